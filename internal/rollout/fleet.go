package rollout

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// KeyOf is the logic a composite's ConditionUpgraded names (the text
// before the first ": " of its message, "logic <hash>"), "" without one.
// The function sets the condition on every run while an upgrade is paced,
// so every composite that ran under a new logic names it.
func KeyOf(xr map[string]any) string {
	msg, _ := policy.Condition(xr, v1alpha1.ConditionUpgraded)["message"].(string)
	k, _, ok := strings.Cut(msg, ": ")
	if !ok {
		return ""
	}
	return k
}

// Upgraded reports whether the composite applied logic: its
// ConditionUpgraded is True and names it.
func Upgraded(xr map[string]any, logic string) bool {
	return logic != "" && policy.ConditionTrue(xr, v1alpha1.ConditionUpgraded) && KeyOf(xr) == logic
}

// A Fleet is what an upgrade rolls out across: the composites of one kind
// on one Composition revision (and in one namespace, for a namespaced
// kind), by id (namespace/name), as a watch cache holds them.
type Fleet map[string]map[string]any

// Logics are the logics the fleet's composites name, sorted: those an
// upgrade may be rolling out.
func (f Fleet) Logics() []string {
	var out []string
	for _, o := range f {
		if k := KeyOf(o); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// A Decision is whose turn it is in a fleet under one logic.
type Decision struct {
	// Turns are the ids whose turn it is.
	Turns map[string]bool
	// Updated counts the composites that applied the logic and are Ready.
	Updated int
	// Failed is the first propagateWhen that did not hold for the first
	// composite it held back; empty when every composite may take it.
	Failed string
}

// Decide evaluates rule for every composite of the fleet, as the function
// once did for its own composite over the whole fleet: xr is the
// composite, xrs the fleet in name order, each member updated when it
// applied logic and ready when it is Ready. It costs the fleet's size in
// evaluations, each O(1) in the fleet (positions are worked out once per
// collection, see position). An expression that fails for a composite
// gives it no turn, and the error is returned with the first.
func Decide(rule Rule, fleet Fleet, logic string, now time.Time) (Decision, error) {
	ids := make([]string, 0, len(fleet))
	for id := range fleet {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	d := Decision{Turns: map[string]bool{}}
	members := make([]any, len(ids))
	for i, id := range ids {
		o := fleet[id]
		up, ready := Upgraded(o, logic), policy.ConditionTrue(o, v1alpha1.ConditionReady)
		if up && ready {
			d.Updated++
		}
		members[i] = Member(policy.CELView(o), id, up, ready)
	}
	var first error
	for i, id := range ids {
		m := members[i]
		v, err := rule.Check(map[string]any{VarXR: m, VarXRs: members, VarNow: now, VarItem: m}, now)
		switch {
		case err != nil:
			if first == nil {
				first = err
				d.Failed = v.Failed
			}
		case v.OK:
			d.Turns[id] = true
		case d.Failed == "":
			d.Failed = v.Failed
		}
	}
	return d, first
}

// Revision is the Composition revision a composite runs on, "" when it
// names none yet: what an upgrade's fleet is made of.
func Revision(xr map[string]any) string {
	// Read without parsing a field path: the provider asks this of every
	// composite on every pass.
	for _, path := range revisionPaths {
		if s, _, _ := unstructured.NestedString(xr, path...); s != "" {
			return s
		}
	}
	return ""
}

// revisionPaths are where a composite names its Composition revision:
// Crossplane v2, then legacy.
var revisionPaths = [][]string{{"spec", "crossplane", "compositionRevisionRef", "name"}, {"spec", "compositionRevisionRef", "name"}}
