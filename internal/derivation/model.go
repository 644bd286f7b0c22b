package derivation

import (
	"encoding/json"
	"fmt"
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
)

// ptInput is the part of pt.fn.crossplane.io/v1beta1 Resources that says
// where values flow; connection details and readiness checks do not.
type ptInput struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	PatchSets  []ptPatchSet `json:"patchSets,omitempty"`
	Resources  []ptResource `json:"resources,omitempty"`
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
	// Type of the patch, FromCompositeFieldPath or CombineFromComposite.
	Type string
	// From are the XR fields the patch reads, in canonical fieldpath
	// syntax: one, or a Combine's variables.
	From []string
	// To is the composed resource's field the patch writes.
	To string
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
	sets := map[string][]ptPatch{}
	for _, ps := range in.PatchSets {
		sets[ps.Name] = ps.Patches
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
		for j, p := range r.Patches {
			pat := fmt.Sprintf("%s.patches[%d]", at, j)
			if p.Type != patchSet {
				if err := m.readPatch(t, "", p, pat); err != nil {
					return err
				}
				continue
			}
			if p.PatchSetName == nil {
				return errors.Errorf("%s: a PatchSet patch needs patchSetName", pat)
			}
			ps, ok := sets[*p.PatchSetName]
			if !ok {
				return errors.Errorf("%s: patch set %q does not exist", pat, *p.PatchSetName)
			}
			for k, sp := range ps {
				if err := m.readPatch(t, *p.PatchSetName, sp, fmt.Sprintf("%s (patch set %s, patch %d)", pat, *p.PatchSetName, k)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (m *Model) readPatch(t *Template, set string, p ptPatch, at string) error {
	typ := p.Type
	if typ == "" {
		typ = patchFromComposite // function-patch-and-transform's default
	}
	f := Flow{Template: t, Type: typ, PatchSet: set, Required: p.Policy != nil && p.Policy.FromFieldPath == "Required"}
	for _, tr := range p.Transforms {
		f.Transforms = append(f.Transforms, compactJSON(tr))
	}
	switch typ {
	case patchFromComposite:
		if p.FromFieldPath == nil {
			return errors.Errorf("%s: fromFieldPath is required", at)
		}
		f.From = []string{*p.FromFieldPath}
		f.To = *p.FromFieldPath // the default when toFieldPath is unset
		if p.ToFieldPath != nil {
			f.To = *p.ToFieldPath
		}
	case patchCombineComposite:
		if p.Combine == nil || len(p.Combine.Variables) == 0 || p.ToFieldPath == nil {
			return errors.Errorf("%s: a CombineFromComposite patch needs combine.variables and toFieldPath", at)
		}
		for _, v := range p.Combine.Variables {
			f.From = append(f.From, v.FromFieldPath)
		}
		f.To = *p.ToFieldPath
		f.Transforms = append([]string{fmt.Sprintf(`{"combine":%q,"string":%s}`, p.Combine.Strategy, compactJSON(p.Combine.String))}, f.Transforms...)
	case patchFromEnvironment, patchCombineEnv:
		m.Notes = append(m.Notes, fmt.Sprintf("resource %s: a %s patch to %s reads the environment, not the XR: a change of it is no subject's change and needs an UpgradeAllowance", t.Name, typ, deref(p.ToFieldPath)))
		return nil
	default:
		// To-composite and to-environment patches write the XR or the
		// environment, never a composed resource: no rule to derive.
		return nil
	}
	var err error
	for i := range f.From {
		if f.From[i], err = canonical(f.From[i]); err != nil {
			return errors.Wrapf(err, "%s: fromFieldPath", at)
		}
	}
	if f.To, err = canonical(f.To); err != nil {
		return errors.Wrapf(err, "%s: toFieldPath", at)
	}
	m.Flows = append(m.Flows, f)
	return nil
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// root is the first segment of a canonical path: spec, status, metadata.
func root(path string) string {
	segs, err := fieldpath.Parse(path)
	if err != nil || len(segs) == 0 {
		return ""
	}
	return segs[0].Field
}
