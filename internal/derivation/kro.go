package derivation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// kro's ResourceGraphDefinition, and the group its instances get when the
// schema names none.
const (
	kroGroup        = "kro.run"
	kroGraphKind    = "ResourceGraphDefinition"
	kroDefaultGroup = "kro.run"
	// kroInstance is the identifier kro's CEL names the instance by.
	kroInstance = "schema"
	// flowReference is the Flow type of a kro ${schema.…} reference.
	flowReference = "Reference"
)

// IsResourceGraph reports whether u is a kro ResourceGraphDefinition.
func IsResourceGraph(u *unstructured.Unstructured) bool {
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	return err == nil && gv.Group == kroGroup && u.GetKind() == kroGraphKind
}

// ReadGraph reads a kro ResourceGraphDefinition as a Model, as Read reads
// a patch-and-transform step: a template per resource, and a flow per
// template field whose value references the instance
// (`${schema.spec.replicas}`, `web-${schema.spec.name}`). Derive turns it
// into a policy with the same rule builder. kro's graph is explicit, so
// nothing has to be rendered.
//
// References to other resources (`${deployment.status.x}`) are noted, not
// ruled: no subject changes them, as no subject changes an XR's status.
// includeWhen and forEach expressions that read the instance are noted
// too: their change creates or deletes resources, which a rule's Update
// does not grant.
func ReadGraph(u *unstructured.Unstructured) (*Model, error) {
	at := fmt.Sprintf("ResourceGraphDefinition %s", u.GetName())
	group, _, _ := unstructured.NestedString(u.Object, "spec", "schema", "group")
	version, _, _ := unstructured.NestedString(u.Object, "spec", "schema", "apiVersion")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "schema", "kind")
	if version == "" || kind == "" {
		return nil, errors.Errorf("%s: spec.schema.apiVersion and spec.schema.kind are required", at)
	}
	if g, v, ok := strings.Cut(version, "/"); ok {
		// An apiVersion with its group ("group/version").
		group, version = g, v
	}
	if group == "" {
		group = kroDefaultGroup
	}
	g := &graph{Model: &Model{Name: u.GetName(), XR: schema.GroupVersionKind{Group: group, Version: version, Kind: kind}}, ids: map[string]bool{}}
	rs, _, err := unstructured.NestedSlice(u.Object, "spec", "resources")
	if err != nil {
		return nil, errors.Wrapf(err, "%s: spec.resources", at)
	}
	for _, r := range rs {
		res, _ := r.(map[string]any)
		if id, _ := res["id"].(string); id != "" {
			g.ids[id] = true
		}
	}
	for i, r := range rs {
		res, _ := r.(map[string]any)
		id, _ := res["id"].(string)
		rat := fmt.Sprintf("%s: spec.resources[%d] (%s)", at, i, id)
		if id == "" {
			return nil, errors.Errorf("%s: id is required", rat)
		}
		if err := g.resource(id, res, rat); err != nil {
			return nil, err
		}
	}
	return g.Model, nil
}

// graph reads one ResourceGraphDefinition into its Model.
type graph struct {
	*Model
	// ids are the graph's resource ids, which expressions may name.
	ids map[string]bool
}

func (m *graph) resource(id string, res map[string]any, at string) error {
	if err := m.noteConditions(id, res, at); err != nil {
		return err
	}
	tmpl, ok := res["template"].(map[string]any)
	if !ok {
		if _, ext := res["externalRef"]; ext {
			// kro reads it, never writes it: nothing to permit.
			m.Notes = append(m.Notes, fmt.Sprintf("resource %s is an externalRef: kro only reads it, so no rule", id))
			return nil
		}
		return errors.Errorf("%s: template or externalRef is required", at)
	}
	av, _ := tmpl["apiVersion"].(string)
	kind, _ := tmpl["kind"].(string)
	gv, err := schema.ParseGroupVersion(av)
	if err != nil || kind == "" || strings.Contains(av+kind, "${") {
		return errors.Errorf("%s: template.apiVersion %q and template.kind %q do not name a kind", at, av, kind)
	}
	t := &Template{Step: "kro", Name: id, GVK: gv.WithKind(kind), Base: tmpl}
	m.Templates = append(m.Templates, t)
	return m.walkTemplate(t, nil, tmpl, at+": template")
}

// noteConditions notes includeWhen and forEach expressions that read the
// instance: a change of such a field creates or deletes resources.
func (m *graph) noteConditions(id string, res map[string]any, at string) error {
	for _, key := range []string{"includeWhen", "forEach"} {
		var texts []string
		collectStrings(res[key], &texts)
		for _, s := range texts {
			es, err := ScanExpressions(s)
			if err != nil {
				return errors.Wrapf(err, "%s: %s %q", at, key, s)
			}
			for _, e := range es {
				for _, r := range References(e.Text) {
					if r.Root == kroInstance && r.Path != "" {
						m.Notes = append(m.Notes, fmt.Sprintf("resource %s: %s reads %s, so a change of it creates or deletes %s resources, which no derived rule grants: add a rule with Create and Delete by hand", id, key, r.Path, id))
					}
				}
			}
		}
	}
	return nil
}

func collectStrings(v any, out *[]string) {
	switch t := v.(type) {
	case string:
		*out = append(*out, t)
	case []any:
		for _, e := range t {
			collectStrings(e, out)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			collectStrings(t[k], out)
		}
	}
}

// walkTemplate adds a flow for every string below v (at path segs) whose
// expressions reference the instance.
func (m *graph) walkTemplate(t *Template, segs fieldpath.Segments, v any, at string) error {
	switch tv := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(tv)) {
			if !nameableKey(k) {
				m.Notes = append(m.Notes, fmt.Sprintf("resource %s: key %q under %s cannot be named in a policy path: what references below it change is in no rule", t.Name, k, pathOr(segs)))
				continue
			}
			if err := m.walkTemplate(t, append(slices.Clone(segs), fieldpath.Field(k)), tv[k], at); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range tv {
			if err := m.walkTemplate(t, append(slices.Clone(segs), fieldpath.Segment{Type: fieldpath.SegmentIndex, Index: uint(i)}), e, at); err != nil {
				return err
			}
		}
	case string:
		return m.readTemplateString(t, segs, tv, at)
	}
	return nil
}

func (m *graph) readTemplateString(t *Template, segs fieldpath.Segments, s, at string) error {
	es, err := ScanExpressions(s)
	if err != nil {
		return errors.Wrapf(err, "%s.%s", at, pathOr(segs))
	}
	if len(es) == 0 || len(segs) == 0 {
		return nil
	}
	to := segs.String()
	f := Flow{Template: t, Type: flowReference, To: to}
	var optional bool
	for _, e := range es {
		for _, r := range References(e.Text) {
			switch {
			case r.Root == kroInstance && r.Path != "":
				if !slices.Contains(f.From, r.Path) {
					f.From = append(f.From, r.Path)
				}
				optional = optional || r.Optional
			case m.ids[r.Root]:
				m.Notes = append(m.Notes, fmt.Sprintf("resource %s %s reads %s.%s: no rule, another resource's fields are written by its controller, not changed by a subject; its value reaches %s while the instance is created (initializing), a later change of it is withheld", t.Name, to, r.Root, r.Path, t.Name))
			}
		}
	}
	if len(f.From) == 0 {
		return nil
	}
	if optional {
		// Optional access: the field may be absent, and kro then leaves
		// the target out, so it appears and vanishes with the field.
		f.Verbs = slices.Clone(mutationOrder)
	}
	if len(es) > 1 || strings.TrimSpace(s) != "${"+es[0].Text+"}" || strings.TrimSpace(es[0].Text) != kroInstance+"."+f.From[0] {
		// Not a plain copy: the template string says what kro writes,
		// as a patch's transforms do.
		f.Transforms = []string{s}
	}
	m.Flows = append(m.Flows, f)
	return nil
}

func pathOr(segs fieldpath.Segments) string {
	if len(segs) == 0 {
		return "template"
	}
	return segs.String()
}

// KubernetesKinds resolves kinds of Kubernetes' own API groups
// (policy.BuiltIn), which a kro graph composes more often than managed
// resources. Their plurals are regular, and they have no external
// resource (policy.ClassUnmanaged), so their rules carry no External
// entry. Other kinds are left to the next resolver.
type KubernetesKinds struct{}

// Resolve implements Resolver.
func (KubernetesKinds) Resolve(gvk schema.GroupVersionKind) (Kind, bool, error) {
	if policy.BuiltIn(gvk.Group) {
		return Kind{Resource: Guess(gvk), Class: policy.ClassUnmanaged}, true, nil
	}
	return Kind{}, false, nil
}
