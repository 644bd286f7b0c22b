package derivation

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// AnnotationCompositionResourceName is the annotation Crossplane keys a
// composed resource by. A render experiment matches the baseline's and a
// perturbation's resources by it, since their names are generated.
const AnnotationCompositionResourceName = "crossplane.io/composition-resource-name"

// flowExperiment is the Flow type of a difference a render experiment saw.
const flowExperiment = "Experiment"

// Observation is what rendering one Perturbation gave: the desired
// composed resources, or the render's failure.
type Observation struct {
	Perturbation
	// Composed are the desired composed resources the render printed.
	Composed []*unstructured.Unstructured
	// Err is why the render failed, if it did.
	Err error
}

// Experiment is a render experiment on a Composition: its baseline render
// and one render per perturbed XR field.
type Experiment struct {
	// Name of the Composition.
	Name string
	// XR is the composite kind the Composition composes.
	XR schema.GroupVersionKind
	// Baseline are the desired composed resources of the baseline XR.
	Baseline []*unstructured.Unstructured
	// Observations, one per perturbation.
	Observations []Observation
	// Notes carry what the experiment could not perturb, and anything
	// else the caller learned (Perturbations' notes).
	Notes []string
}

// observed is what the perturbations of one XR field did to one composed
// field.
type observed struct {
	field, resource, path string
	verbs                 []v1alpha1.MutationVerb
}

// FromExperiment reads a render experiment as a Model, as Read reads a
// patch-and-transform step: a template per composed resource of the
// baseline (keyed by its composition resource name), a flow per XR field
// and composed field it changed. Derive turns it into a policy with the
// same rule builder, so both derivations write the same rules for the same
// edges. A flow's verbs are what was seen: Mutate when only values
// changed; Insert, Mutate and Delete when the composed field appeared or
// vanished with the XR field, which then can also change.
func FromExperiment(e *Experiment) (*Model, error) {
	base, names, err := byResourceName(e.Baseline, "the baseline render")
	if err != nil {
		return nil, errors.Wrapf(err, "Composition %s", e.Name)
	}
	x := &reading{m: &Model{Name: e.Name, XR: e.XR, Notes: slices.Clone(e.Notes)}, base: base, names: names,
		templates: map[string]*Template{}, changes: map[string]bool{}}
	for _, n := range names {
		x.template(n, base[n])
	}
	for _, o := range e.Observations {
		if err := x.observe(o); err != nil {
			return nil, errors.Wrapf(err, "Composition %s", e.Name)
		}
	}
	m := x.m
	m.Notes = append(m.Notes, unperturbed(e.Observations, x.changes)...)
	for _, s := range x.seen {
		verbs := []v1alpha1.MutationVerb{v1alpha1.MutationMutate}
		if slices.ContainsFunc(s.verbs, func(v v1alpha1.MutationVerb) bool { return v != v1alpha1.MutationMutate }) {
			verbs = slices.Clone(mutationOrder)
		}
		m.Flows = append(m.Flows, Flow{Template: x.templates[s.resource], Type: flowExperiment, From: []string{s.field}, To: s.path, Verbs: verbs})
	}
	m.Notes = unique(m.Notes)
	return m, nil
}

// reading is a render experiment being read as a Model: the baseline's
// resources by name, a template per resource seen, the edges seen, and
// which XR fields changed anything.
type reading struct {
	m         *Model
	base      map[string]*unstructured.Unstructured
	names     []string // the baseline's, sorted
	templates map[string]*Template
	seen      []*observed
	changes   map[string]bool
}

func (x *reading) template(n string, u *unstructured.Unstructured) {
	t := &Template{Step: "render", Name: n, GVK: u.GroupVersionKind(), Base: u.Object}
	x.templates[n] = t
	x.m.Templates = append(x.m.Templates, t)
}

// observe reads one perturbation: the composed fields it changed, and the
// resources it added or dropped, which no derived rule grants.
func (x *reading) observe(o Observation) error {
	m := x.m
	if o.Err != nil {
		m.Notes = append(m.Notes, fmt.Sprintf("%s: not perturbed (%s): the render failed: %v", o.Field, o.Change, o.Err))
		return nil
	}
	pert, pnames, err := byResourceName(o.Composed, fmt.Sprintf("the render with %s %s", o.Field, o.Change))
	if err != nil {
		return err
	}
	for _, n := range pnames {
		if _, ok := x.base[n]; ok {
			continue
		}
		x.changes[o.Field] = true
		m.Notes = append(m.Notes, fmt.Sprintf("%s: %s composes resource %s (%s), which the baseline does not: the change creates it (and its reverse deletes it), which no derived rule grants, so add a rule with Create and Delete by hand (and render a baseline that composes it to see what changes it)", o.Field, o.Change, n, pert[n].GetKind()))
		if _, ok := x.templates[n]; !ok {
			// Creating an XR with that value creates it: the initializing
			// and deleting bounds must name its kind.
			x.template(n, pert[n])
		}
	}
	for _, n := range x.names {
		p, ok := pert[n]
		if !ok {
			m.Notes = append(m.Notes, fmt.Sprintf("%s: %s drops resource %s (%s): the change deletes it (and its reverse creates it), which no derived rule grants, so add a rule with Create and Delete by hand", o.Field, o.Change, n, x.base[n].GetKind()))
			x.changes[o.Field] = true
			continue
		}
		for _, mu := range diffObjects(x.base[n].Object, p.Object) {
			x.changes[o.Field] = true
			x.seen = record(x.seen, o.Field, n, mu)
		}
	}
	return nil
}

// unperturbed are the notes for the XR fields whose every rendered change
// changed no composed resource: no rule is derived for them.
func unperturbed(os []Observation, changes map[string]bool) []string {
	tried := map[string][]string{}
	var fields []string
	for _, o := range os {
		if o.Err == nil && !changes[o.Field] {
			if _, ok := tried[o.Field]; !ok {
				fields = append(fields, o.Field)
			}
			tried[o.Field] = append(tried[o.Field], o.Change)
		}
	}
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		out = append(out, fmt.Sprintf("%s: not perturbed usefully: %s changed no composed resource, so no rule", f, strings.Join(tried[f], ", ")))
	}
	return out
}

// byResourceName keys composed resources by their composition resource
// name, and lists the names sorted: a render prints them in no promised
// order.
func byResourceName(objs []*unstructured.Unstructured, what string) (map[string]*unstructured.Unstructured, []string, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		n := u.GetAnnotations()[AnnotationCompositionResourceName]
		if n == "" {
			return nil, nil, errors.Errorf("%s: %s %s has no metadata.annotations[%s]", what, u.GetKind(), u.GetName(), AnnotationCompositionResourceName)
		}
		if _, dup := out[n]; dup {
			return nil, nil, errors.Errorf("%s: two composed resources are named %s in metadata.annotations[%s]", what, n, AnnotationCompositionResourceName)
		}
		out[n] = u
	}
	return out, slices.Sorted(maps.Keys(out)), nil
}

// diffObjects are the mutations from base to perturbed of what Kausality
// compares of a composed resource (policy.Body: the spec, or a Secret's
// data; not metadata, which no rule bounds, nor status, which providers
// write). Every field of the baseline counts as owned: the pipeline's
// output is applied whole, so a field it stops setting is deleted. A
// change inside a list of scalars counts as a change of the list, which a
// patch writes whole.
func diffObjects(base, perturbed map[string]any) []mutation.Mutation {
	owned := mutation.WithOwned(func(string) bool { return true })
	b, p := policy.Body(base), policy.Body(perturbed)
	keys := slices.Sorted(maps.Keys(b))
	for k := range p {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	var out []mutation.Mutation
	for _, k := range keys {
		for _, mu := range mutation.Diff(k, b[k], p[k], owned) {
			mu.Path = listOf(mu.Path)
			out = append(out, mu)
		}
	}
	return out
}

// listOf is path without its trailing index segments: the list an element
// of a list of scalars is in.
func listOf(path string) string {
	segs, err := fieldpath.Parse(path)
	if err != nil {
		return path
	}
	n := len(segs)
	for n > 1 && segs[n-1].Type == fieldpath.SegmentIndex {
		n--
	}
	return segs[:n].String()
}

// record adds a mutation of a composed field caused by an XR field,
// keeping first-seen order so flows follow the render's field order.
func record(seen []*observed, field, resource string, mu mutation.Mutation) []*observed {
	i := slices.IndexFunc(seen, func(s *observed) bool {
		return s.field == field && s.resource == resource && s.path == mu.Path
	})
	if i < 0 {
		seen = append(seen, &observed{field: field, resource: resource, path: mu.Path})
		i = len(seen) - 1
	}
	if !slices.Contains(seen[i].verbs, mu.Verb) {
		seen[i].verbs = append(seen[i].verbs, mu.Verb)
	}
	return seen
}

// OtherSteps names the pipeline steps of c that are neither
// patch-and-transform nor Kausality's own: what Read cannot read and only a
// render experiment shows.
func OtherSteps(c *xpv1.Composition) []string {
	var out []string
	for _, st := range c.Spec.Pipeline {
		var in struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if st.Input != nil {
			_ = json.Unmarshal(st.Input.Raw, &in) // unreadable input: not P&T
		}
		group := strings.SplitN(in.APIVersion, "/", 2)[0]
		if (group == ptGroup && in.Kind == ptKind) || group == kausalityGroup {
			continue
		}
		out = append(out, st.Step)
	}
	return out
}

// NeedsRender is an error when m, c read structurally, holds no template
// although c has steps that are not patch-and-transform: everything c
// composes comes from steps only a render experiment reads, so a policy
// derived or checked from m would be empty or report every rule unused.
func NeedsRender(c *xpv1.Composition, m *Model) error {
	other := OtherSteps(c)
	if len(m.Templates) > 0 || len(other) == 0 {
		return nil
	}
	return errors.Errorf("Composition %s: steps %v are not patch-and-transform and compose everything it composes; read them by rendering the Composition: pass --functions (and --xrd)", c.GetName(), other)
}

// Beside keeps a structural reading of a Composition's
// patch-and-transform steps beside its render experiment: an edge the
// experiment did not see (a patch from the XR's status or metadata, a
// resource rendered only for values the baseline does not have, a patch
// its one baseline could not perturb) is still in the model. Where both
// saw an edge the experiment's reading wins, for it saw what the edge
// does; a template only the structural reading has is kept, so its kind
// is bounded too. The notes of both are kept, but for the structural
// reading's notes on the steps of c it could not read: the experiment ran
// them.
func Beside(c *xpv1.Composition, experiment, structural *Model) *Model {
	out := &Model{Name: experiment.Name, XR: experiment.XR, Templates: slices.Clone(experiment.Templates), Flows: slices.Clone(experiment.Flows)}
	byName := map[string]*Template{}
	for _, t := range out.Templates {
		byName[t.Name] = t
	}
	for _, t := range structural.Templates {
		if _, ok := byName[t.Name]; !ok {
			byName[t.Name] = t
			out.Templates = append(out.Templates, t)
		}
	}
	seen := func(f Flow) bool {
		return slices.ContainsFunc(out.Flows, func(g Flow) bool {
			// The experiment sees a list of scalars change whole (listOf).
			return g.Template.Name == f.Template.Name && listOf(g.To) == listOf(f.To) && slices.Equal(g.From, f.From)
		})
	}
	for _, f := range structural.Flows {
		f.Template = byName[f.Template.Name]
		if !seen(f) {
			out.Flows = append(out.Flows, f)
		}
	}
	unread := map[string]bool{}
	for _, st := range c.Spec.Pipeline {
		unread[unreadNote(st)] = true
	}
	out.Notes = slices.Clone(experiment.Notes)
	for _, n := range structural.Notes {
		if !unread[n] {
			out.Notes = append(out.Notes, n)
		}
	}
	out.Notes = unique(out.Notes)
	return out
}
