package derivation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// The input of function-patch-and-transform, recognised by its apiVersion's
// group and kind rather than by the Function's name, which each cluster
// chooses.
const (
	ptGroup = "pt.fn.crossplane.io"
	ptKind  = "Resources"
	// kausalityGroup is the input group of Kausality's own step, which
	// changes nothing a policy has to permit.
	kausalityGroup = "kausality.fn.crossplane.io"
)

// Patch types of function-patch-and-transform.
const (
	patchFromComposite    = "FromCompositeFieldPath"
	patchCombineComposite = "CombineFromComposite"
	patchSet              = "PatchSet"
	patchFromEnvironment  = "FromEnvironmentFieldPath"
	patchCombineEnv       = "CombineFromEnvironment"
	patchToComposite      = "ToCompositeFieldPath"
	patchCombineToXR      = "CombineToComposite"
	patchToEnvironment    = "ToEnvironmentFieldPath"
	patchCombineToEnv     = "CombineToEnvironment"
)

// ptInput is the part of pt.fn.crossplane.io/v1beta1 Resources that says
// where values flow; connection details and readiness checks do not.
type ptInput struct {
	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind"`
	Environment *struct {
		Patches []ptPatch `json:"patches,omitempty"`
	} `json:"environment,omitempty"`
	PatchSets []ptPatchSet `json:"patchSets,omitempty"`
	Resources []ptResource `json:"resources,omitempty"`
}

type ptPatchSet struct {
	Name    string    `json:"name"`
	Patches []ptPatch `json:"patches,omitempty"`
}

type ptResource struct {
	Name    string         `json:"name"`
	Base    map[string]any `json:"base,omitempty"`
	Patches []ptPatch      `json:"patches,omitempty"`
}

type ptPatch struct {
	Type          string            `json:"type,omitempty"`
	FromFieldPath *string           `json:"fromFieldPath,omitempty"`
	ToFieldPath   *string           `json:"toFieldPath,omitempty"`
	PatchSetName  *string           `json:"patchSetName,omitempty"`
	Combine       *ptCombine        `json:"combine,omitempty"`
	Transforms    []json.RawMessage `json:"transforms,omitempty"`
	Policy        *struct {
		FromFieldPath string `json:"fromFieldPath,omitempty"`
		ToFieldPath   string `json:"toFieldPath,omitempty"`
	} `json:"policy,omitempty"`
}

type ptCombine struct {
	Variables []struct {
		FromFieldPath string `json:"fromFieldPath"`
	} `json:"variables"`
	Strategy string          `json:"strategy"`
	String   json.RawMessage `json:"string,omitempty"`
}

// Template is one composed resource a patch-and-transform step renders.
type Template struct {
	// Step and Name locate the template in the Composition.
	Step, Name string
	// GVK of the composed resource, from its base.
	GVK schema.GroupVersionKind
	// Base is the template's base object.
	Base map[string]any
}

// Flow is one patch that carries an XR field to a composed resource's
// field, patch sets expanded.
type Flow struct {
	// Template the patch belongs to.
	Template *Template
	// Type of the patch: FromCompositeFieldPath, CombineFromComposite,
	// or FromEnvironmentFieldPath and CombineFromEnvironment reading what
	// the step's environment patches wrote from the XR.
	Type string
	// From are the XR fields the patch reads, in canonical fieldpath
	// syntax: one, or a Combine's variables.
	From []string
	// Via names the environment fields an environment patch reads, which
	// the step's environment patches write from From.
	Via string
	// To is the composed resource's field the patch writes, its
	// toFieldPath in canonical fieldpath syntax, whatever its transforms
	// make of the value.
	To string
	// Output is what the patch writes, as its transforms tell: it decides
	// whether a change of the source also inserts and deletes below To.
	Output Output
	// PatchSet names the patch set the patch came from, if any.
	PatchSet string
	// Transforms are the patch's transforms (and a Combine's strategy),
	// compact JSON, for people reading the derived rule.
	Transforms []string
	// Required says the composed resource is not rendered until the XR
	// field exists (policy.fromFieldPath: Required).
	Required bool
	// Verbs, when set, are the mutations the flow was seen to cause (a
	// render experiment, a kro reference that may be absent) and replace
	// what the template's base and the XR's schema suggest.
	Verbs []v1alpha1.MutationVerb
}

// Model is what a Composition's patch-and-transform steps say.
type Model struct {
	// Name of the Composition.
	Name string
	// XR is the composite kind the Composition composes.
	XR schema.GroupVersionKind
	// Templates in pipeline and template order.
	Templates []*Template
	// Flows in pipeline, template and patch order.
	Flows []Flow
	// Notes say what could not be read structurally.
	Notes []string
}

// Read reads the patch-and-transform steps of a Pipeline Composition.
// Steps of other functions are noted, not read: what they change shows
// only by running them.
func Read(c *xpv1.Composition) (*Model, error) {
	gv, err := schema.ParseGroupVersion(c.Spec.CompositeTypeRef.APIVersion)
	if err != nil {
		return nil, errors.Wrapf(err, "Composition %s: spec.compositeTypeRef.apiVersion", c.GetName())
	}
	m := &Model{Name: c.GetName(), XR: gv.WithKind(c.Spec.CompositeTypeRef.Kind)}
	if c.Spec.Mode != "" && c.Spec.Mode != xpv1.CompositionModePipeline {
		return nil, errors.Errorf("Composition %s: spec.mode %q is not Pipeline", c.GetName(), c.Spec.Mode)
	}
	for i, st := range c.Spec.Pipeline {
		at := fmt.Sprintf("Composition %s: spec.pipeline[%d] (step %s)", c.GetName(), i, st.Step)
		var in ptInput
		if st.Input != nil && len(st.Input.Raw) > 0 {
			if err := json.Unmarshal(st.Input.Raw, &in); err != nil {
				return nil, errors.Wrapf(err, "%s: cannot read input", at)
			}
		}
		group := strings.SplitN(in.APIVersion, "/", 2)[0]
		switch {
		case group == ptGroup && in.Kind == ptKind:
			if err := m.readStep(st.Step, &in); err != nil {
				return nil, errors.Wrap(err, at)
			}
		case group == kausalityGroup:
			// Kausality's own step composes nothing.
		default:
			m.Notes = append(m.Notes, unreadNote(st))
		}
	}
	return m, nil
}

// unreadNote is Read's note on a step it does not read.
func unreadNote(st xpv1.PipelineStep) string {
	return fmt.Sprintf("step %s (function %s) is not patch-and-transform: it is not read, so what it changes in composed resources is in no rule; derive by experiment (--functions) renders it", st.Step, st.FunctionRef.Name)
}

func (m *Model) readStep(step string, in *ptInput) error {
	sets, err := patchSets(in.PatchSets)
	if err != nil {
		return err
	}
	env, err := environmentWrites(in)
	if err != nil {
		return err
	}
	for i, r := range in.Resources {
		at := fmt.Sprintf("input.resources[%d] (%s)", i, r.Name)
		if r.Base == nil {
			m.Notes = append(m.Notes, fmt.Sprintf("step %s resource %s has no base: it is not read", step, r.Name))
			continue
		}
		av, _ := r.Base["apiVersion"].(string)
		kind, _ := r.Base["kind"].(string)
		gv, err := schema.ParseGroupVersion(av)
		if err != nil || kind == "" {
			return errors.Errorf("%s.base: apiVersion %q and kind %q do not name a kind", at, av, kind)
		}
		t := &Template{Step: step, Name: r.Name, GVK: gv.WithKind(kind), Base: r.Base}
		m.Templates = append(m.Templates, t)
		ps, err := expandPatches(r.Patches, sets, at)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if err := m.readPatch(t, env, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// fields reads a patch's source and target fields, canonical: the XR
// fields (or environment fields) it reads and the field it writes. ok is
// false for a patch that writes no composed resource.
func (p placedPatch) fields(typ string) (from []string, to string, ok bool, err error) {
	switch typ {
	case patchFromComposite, patchFromEnvironment:
		if p.FromFieldPath == nil {
			return nil, "", false, errors.Errorf("%s: a %s patch needs fromFieldPath", p.at, typ)
		}
		from = []string{*p.FromFieldPath}
		to = *p.FromFieldPath // the default when toFieldPath is unset
		if p.ToFieldPath != nil {
			to = *p.ToFieldPath
		}
	case patchCombineComposite, patchCombineEnv:
		if p.Combine == nil || len(p.Combine.Variables) == 0 || p.ToFieldPath == nil {
			return nil, "", false, errors.Errorf("%s: a %s patch needs combine.variables and toFieldPath", p.at, typ)
		}
		for _, v := range p.Combine.Variables {
			from = append(from, v.FromFieldPath)
		}
		to = *p.ToFieldPath
	case patchToComposite, patchCombineToXR, patchToEnvironment, patchCombineToEnv:
		// They write the XR or the environment from a composed
		// resource, never a composed resource.
		return nil, "", false, nil
	default:
		return nil, "", false, errors.Errorf("%s: type %q is not a patch type function-patch-and-transform has", p.at, typ)
	}
	for i := range from {
		if from[i], err = canonical(from[i]); err != nil {
			return nil, "", false, errors.Wrapf(err, "%s: fromFieldPath", p.at)
		}
	}
	if to, err = canonical(to); err != nil {
		return nil, "", false, errors.Wrapf(err, "%s: toFieldPath", p.at)
	}
	return from, to, true, nil
}

func (m *Model) readPatch(t *Template, env envWrites, p placedPatch) error {
	typ := p.Type
	if typ == "" {
		typ = patchFromComposite // function-patch-and-transform's default
	}
	from, to, ok, err := p.fields(typ)
	if err != nil || !ok {
		return err
	}
	f := Flow{Template: t, Type: typ, To: to, PatchSet: p.set, Required: p.Policy != nil && p.Policy.FromFieldPath == "Required"}
	if p.Combine != nil && (typ == patchCombineComposite || typ == patchCombineEnv) {
		f.Transforms = append(f.Transforms, fmt.Sprintf(`{"combine":%q,"string":%s}`, p.Combine.Strategy, compactJSON(p.Combine.String)))
		f.Output = OutputScalar // a string format is the one strategy
	}
	for _, tr := range p.Transforms {
		f.Transforms = append(f.Transforms, compactJSON(tr))
	}
	f.Output = transformsOutput(p.Transforms, f.Output)
	if p.Policy != nil && p.Policy.ToFieldPath != "" && p.Policy.ToFieldPath != "Replace" {
		// Merged into the target: keys and elements come and go below it.
		f.Output = OutputStructured
	}
	if slices.ContainsFunc(from, wildcard) {
		m.Notes = append(m.Notes, fmt.Sprintf("resource %s: the %s patch from %s to %s: no rule, function-patch-and-transform reads fromFieldPath without expanding [*] (a list there fails the pipeline, a map has no key *), so the patch never carries a value",
			t.Name, typ, strings.Join(from, " + "), to))
		return nil
	}
	if typ == patchFromEnvironment || typ == patchCombineEnv {
		m.readEnvironmentPatch(f, env, from)
		return nil
	}
	f.From = from
	m.Flows = append(m.Flows, f)
	return nil
}

// readEnvironmentPatch reads a patch from the environment: a flow from the
// XR fields the step's environment patches write into what it reads, a
// note when it reads none of them.
func (m *Model) readEnvironmentPatch(f Flow, env envWrites, from []string) {
	var xr, via []string
	for _, p := range from {
		if srcs := env.sources(p); len(srcs) > 0 {
			xr = append(xr, srcs...)
			via = append(via, p)
		}
	}
	if len(xr) == 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("resource %s: the %s patch from the environment's %s to %s: no rule, since no change of the XR causes it. "+
			"The value the resource is created with is part of the XR's creation; once the XR is created, a change of it is withheld unless the Kausality step's Input "+
			"lists the EnvironmentConfig it comes from under inputs and an UpgradeAllowance naming that EnvironmentConfig covers it",
			f.Template.Name, f.Type, strings.Join(from, " + "), f.To))
		return
	}
	f.From, f.Via = unique(xr), strings.Join(via, ", ")
	m.Flows = append(m.Flows, f)
}

// hasPrefix reports whether segs starts with prefix.
func hasPrefix(segs, prefix fieldpath.Segments) bool {
	return len(segs) >= len(prefix) && slices.Equal(segs[:len(prefix)], prefix)
}

// canonical is path in crossplane-runtime's canonical fieldpath syntax, so
// that a patch and a rule that name one field the same way compare equal.
func canonical(path string) (string, error) {
	segs, err := fieldpath.Parse(path)
	if err != nil {
		return "", errors.Wrapf(err, "cannot parse %q", path)
	}
	if len(segs) == 0 {
		return "", errors.Errorf("path %q is empty", path)
	}
	return segs.String(), nil
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v) // sorts map keys: stable comments
	return string(b)
}

// root is the first segment of a canonical path: spec, status, metadata.
func root(path string) string {
	segs, err := fieldpath.Parse(path)
	if err != nil || len(segs) == 0 {
		return ""
	}
	return segs[0].Field
}
