package policy

// What a permitted write earns: the allowances its rule's entries grant,
// with the attestations its capture paths read.

import (
	"fmt"
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// capture reads the rule's capture paths from obj as attestations. A path
// that is absent is left out; conditions are the place to require it.
func capture(paths []string, obj map[string]any) map[string]string {
	if len(paths) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, path := range paths {
		v, ok := mutation.Value(obj, path)
		if !ok {
			continue
		}
		if s, ok := v.(string); ok {
			out[path] = s
		} else {
			out[path] = fmt.Sprint(v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// unrestrictedEntries stand for a rule without policies: the trigger allows
// every downstream operation.
var unrestrictedEntries = []entry{
	{PolicyEntry: v1alpha1.PolicyEntry{Target: v1alpha1.Target{APIGroup: "*", Resource: "*"}, Verbs: []string{v1alpha1.VerbAll}}, relation: v1alpha1.RelationControllerChild},
	{PolicyEntry: v1alpha1.PolicyEntry{Target: v1alpha1.Target{External: map[string]string{"kind": "*"}}, Verbs: []string{v1alpha1.VerbAll}}, relation: v1alpha1.RelationExternal},
}

func allowancesFor(r rule, hop allowance.Hop, gen int64, parent *allowance.Allowance) []allowance.Allowance {
	es := r.entries
	if len(es) == 0 {
		es = unrestrictedEntries
	}
	initiator, trace := hop.User, allowance.Trace{hop}
	if parent != nil {
		initiator = parent.Initiator
		trace = parent.Trace.Then(hop)
	}
	out := make([]allowance.Allowance, 0, len(es))
	for _, e := range es {
		out = append(out, allowance.Allowance{
			Relation:   e.relation,
			Target:     *e.Target.DeepCopy(),
			Verbs:      slices.Clone(e.Verbs),
			Mutations:  slices.Clone(e.Mutations),
			Generation: gen,
			Initiator:  initiator,
			Trace:      slices.Clone(trace),
		})
	}
	return out
}

// appendUnique adds allowances not already granted for the same target,
// verbs and mutations, keeping the first (highest-priority) trace: one
// deterministic, linear justification per grant.
func appendUnique(have []allowance.Allowance, add ...allowance.Allowance) []allowance.Allowance {
	for _, a := range add {
		if !slices.ContainsFunc(have, a.SameGrant) {
			have = append(have, a)
		}
	}
	return have
}
