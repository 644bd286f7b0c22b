package derivation

import (
	"fmt"
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
)

// rules are one rule per XR spec field a patch reads, sorted by trigger,
// and the comments that say which patches each mirrors. A patch from the
// XR's status or metadata becomes a note (sourceNote), as does one into a
// field the function does not compare (compared).
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
		if ok, why := compared(f, kinds[ki].Class); !ok {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: no rule, %s", Describe(f), why))
			continue
		}
		bounds := boundsOf(f, m.Flows, xr)
		for _, from := range f.From {
			if note := sourceNote(f, from); note != "" {
				res.Notes = append(res.Notes, note)
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
			pk.mutations = merged(pk.mutations, bounds)
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

// creationNote says what becomes of a value no rule can let through: what
// partOfCreation in internal/compose lets through while the XR is being
// created, and nothing after.
const creationNote = "While the XR is being created, inserting the value is part of the creation, and so is a change of it as long as nobody changed the XR's spec; once the XR is created, a change of it is withheld"

// sourceNote is why no rule can name the flow's XR field from, "" when one
// can: admission diffs only the XR's spec, so no trigger names a field of
// its status or metadata.
func sourceNote(f Flow, from string) string {
	switch root(from) {
	case "spec":
		return ""
	case "status":
		return fmt.Sprintf("%s: no rule, Crossplane writes the XR's status and no subject changes it. %s", Describe(f), creationNote)
	default:
		return fmt.Sprintf("%s: no rule, only changes of the XR's spec are watched. %s", Describe(f), creationNote)
	}
}

// merged is have with the bounds of add, a path's verbs joined.
func merged(have, add []v1alpha1.MutationBound) []v1alpha1.MutationBound {
	for _, b := range add {
		i := slices.IndexFunc(have, func(h v1alpha1.MutationBound) bool { return h.JSONPath == b.JSONPath })
		if i < 0 {
			have = append(have, v1alpha1.MutationBound{JSONPath: b.JSONPath})
			i = len(have) - 1
		}
		have[i].Verbs = union(have[i].Verbs, b.Verbs)
	}
	return have
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
