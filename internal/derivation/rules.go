package derivation

import (
	"fmt"
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
)

// rules are one rule per XR spec field a patch reads, sorted by trigger,
// and the comments that say which patches each mirrors. A patch from the
// XR's status or metadata becomes a note: admission diffs only spec, so no
// trigger can name such a field.
func rules(m *Model, kinds []kindOf, xr *Schema, res *Result) ([]v1alpha1.Rule, [][]string) {
	type perKind struct {
		mutations []v1alpha1.MutationBound
	}
	type draft struct {
		kinds    map[int]*perKind
		comments []string
	}
	drafts := map[string]*draft{}
	for _, f := range m.Flows {
		ki := slices.IndexFunc(kinds, func(k kindOf) bool { return k.gvk == f.Template.GVK })
		verbs := verbsOf(f, xr)
		for _, from := range f.From {
			switch root(from) {
			case "spec":
			case "status":
				res.Notes = append(res.Notes, fmt.Sprintf("%s: no rule, Crossplane writes the XR's status and no subject changes it; its value reaches the composed resource while the XR is created (initializing), a later change of it is withheld", Describe(f)))
				continue
			default:
				res.Notes = append(res.Notes, fmt.Sprintf("%s: no rule, only changes of the XR's spec are watched; its value reaches the composed resource while the XR is created (initializing), a later change of it is withheld", Describe(f)))
				continue
			}
			d, ok := drafts[from]
			if !ok {
				d = &draft{kinds: map[int]*perKind{}}
				drafts[from] = d
			}
			d.comments = append(d.comments, Describe(f))
			pk, ok := d.kinds[ki]
			if !ok {
				pk = &perKind{}
				d.kinds[ki] = pk
			}
			i := slices.IndexFunc(pk.mutations, func(b v1alpha1.MutationBound) bool { return b.JSONPath == f.To })
			if i < 0 {
				pk.mutations = append(pk.mutations, v1alpha1.MutationBound{JSONPath: f.To})
				i = len(pk.mutations) - 1
			}
			pk.mutations[i].Verbs = union(pk.mutations[i].Verbs, verbs)
		}
	}
	triggers := make([]string, 0, len(drafts))
	for t := range drafts {
		triggers = append(triggers, t)
	}
	slices.Sort(triggers)
	out := make([]v1alpha1.Rule, 0, len(triggers))
	comments := make([][]string, 0, len(triggers))
	for _, t := range triggers {
		d := drafts[t]
		r := v1alpha1.Rule{Trigger: t}
		for ki, k := range kinds {
			pk, ok := d.kinds[ki]
			if !ok {
				continue
			}
			r.Policies = append(r.Policies, v1alpha1.PolicyEntry{
				Target: childTarget(k), Relation: v1alpha1.RelationControllerChild,
				Verbs: []string{v1alpha1.VerbUpdate}, Mutations: pk.mutations,
			})
			switch {
			case !k.Class.Gated():
			case asked(m, k.gvk)(gate.Update):
				// A changed spec field of a managed resource reaches the
				// cloud as an update. A field the provider can change only
				// by replacing the resource needs Delete and Create
				// instead, which the Composition does not say.
				r.Policies = append(r.Policies, externalEntry(k, v1alpha1.VerbUpdate))
			default:
				res.Notes = append(res.Notes, fmt.Sprintf("%s: no External Update rule: the Composition's spec.managementPolicies do not ask for Update, and Kausality never opens more than they ask", k.gvk.GroupKind()))
			}
		}
		out = append(out, r)
		comments = append(comments, d.comments)
	}
	return out, comments
}

// union is have with add's verbs, in mutationOrder.
func union(have, add []v1alpha1.MutationVerb) []v1alpha1.MutationVerb {
	out := make([]v1alpha1.MutationVerb, 0, len(mutationOrder))
	for _, v := range mutationOrder {
		if slices.Contains(have, v) || slices.Contains(add, v) {
			out = append(out, v)
		}
	}
	return out
}
