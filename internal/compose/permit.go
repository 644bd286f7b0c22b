package compose

import (
	"fmt"
	"strings"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// decision is why a change to a composed resource may go through: the XR
// allowance that covers it, or another reason.
type decision struct {
	ok      bool
	by      *allowance.Allowance
	upgrade *upgrade // the logic change whose UpgradeAllowances let it through
	// creation: the XR's creation lets it through (inCreation).
	creation bool
	reason   string
	code     string // the reason's class, a metrics.Reason* constant
	// problems are what deciding it could not read: a roll-out's blockers
	// or turn record, returned by the decision that first asks (turn).
	problems []string
}

// kindRules are what the policies say of one composed kind, whatever the
// change: worked out once a run for each kind (rulesOf), so that deciding
// a resource's many mutations does not walk the policies for each.
type kindRules struct {
	// restricted: changes need a cause (some policy names the kind, or the
	// policies are not known); external: its cloud resource is restricted
	// too, so the resource is gated.
	restricted, external bool
	// creation: the XR's creation covers creating or completing a resource
	// of the kind (inCreation); creationExternal: it also grants the
	// cloud Create.
	creation, creationExternal bool
	// unresolved: it counts as restricted because targets of its apiGroup
	// are not resolved yet.
	unresolved bool
}

// rulesOf is the kindRules of kind c.
func (r *run) rulesOf(c policy.Child) kindRules {
	if k, ok := r.rules[c]; ok {
		return k
	}
	if r.rules == nil {
		r.rules = map[policy.Child]kindRules{}
	}
	creating := r.creating && !r.restrictAll
	k := kindRules{
		restricted:       r.restrictAll || r.set.Restricts(c),
		external:         r.restrictAll || r.set.RestrictsExternal(c),
		creation:         creating && r.set.CreationCovers(c),
		creationExternal: creating && r.set.CreationGrantsExternal(c),
		unresolved:       r.set.RestrictsUnresolved(c),
	}
	r.rules[c] = k
	return k
}

// restricted reports whether changes to composed resources of kind c need
// a cause: some policy names the kind, or the policies are not known.
func (r *run) restricted(c policy.Child) bool {
	return r.rulesOf(c).restricted
}

// permit is the one check every change to a composed resource of kind c
// passes: an unrestricted kind passes; then the bound of the XR's lifecycle
// phase (creating, deleting) as inPhase reads it; then the XR's first
// unconsumed ControllerChild allowance that grants verb and for which
// covers holds (nil: any that grants verb). Allowances of generation from
// or earlier are used up for the resource (childMeta.from).
func (r *run) permit(c policy.Child, from int64, verb string, inPhase func(policy.Bound) bool, covers func(int, allowance.Allowance) bool) decision {
	if !r.restricted(c) {
		return decision{ok: true}
	}
	if r.phase != policy.PhaseSteady && !r.restrictAll && inPhase(r.set.PhaseBound(r.phase)) {
		return decision{ok: true}
	}
	for i, a := range r.allowances {
		if a.Generation > from && a.Relation == v1alpha1.RelationControllerChild && policy.MatchesChild(a.Target, c) && a.HasVerb(verb) && (covers == nil || covers(i, a)) {
			return decision{ok: true, by: &r.allowances[i]}
		}
	}
	return decision{reason: r.noAllowance(c, verb), code: r.noAllowanceCode()}
}

// permitChild decides creating or deleting a composed resource of kind c.
func (r *run) permitChild(c policy.Child, from int64, verb string) decision {
	if verb == v1alpha1.VerbCreate && r.added == nil && r.inCreation(c) {
		return decision{ok: true, creation: true}
	}
	return r.permit(c, from, verb, func(b policy.Bound) bool { return b.AllowsChild(c, verb) }, nil)
}

// inCreation reports whether the XR's creation covers creating a composed
// resource of kind c or completing one: the creation is not over and the
// XR's initializing bound lets c be created. A resource composed once what
// it needs exists, and a value wired from another resource's status, are
// part of the creation, whoever created the XR being their cause. What new
// logic adds (a Composition revision, a Function) never is: callers ask
// only when the logic did not change.
func (r *run) inCreation(c policy.Child) bool {
	return r.rulesOf(c).creation
}

// partOfCreation reports whether a mutation the pipeline makes while the XR
// is created (inCreation) is part of the creation: an insert completes the
// resource (a field wired from another resource's status); a change of a
// value is the pipeline's own computation (start at zero, raise once a
// dependency reports) as long as nobody changed the XR's spec since it was
// created, which its trace tells: every hop of a change names the field
// changed, the hops of a creation none. Once a person changed it, a change
// of a value may be theirs and needs its own cause; a field the pipeline
// drops is never part of a creation.
func (r *run) partOfCreation(m mutation.Mutation) bool {
	switch m.Verb {
	case v1alpha1.MutationInsert:
		return true
	case v1alpha1.MutationMutate:
		return r.createdAsIs()
	}
	return false
}

// createdAsIs reports whether the XR's spec is as its creation wrote it
// (policy.UnchangedSinceCreated). Never in Log mode, where a change no rule
// permits gets into the spec without rewriting the trace.
func (r *run) createdAsIs() bool {
	return !r.log && r.unchangedSinceCreated
}

// permitMutation decides one field mutation of an existing composed
// resource. unchanged says the pipeline wants what it last let through, so
// the mutation corrects drift rather than propagating a change; up is the
// resource's logic change (upgradeOf, nil: none), whose UpgradeAllowances
// may let through what no XR allowance covers.
func (r *run) permitMutation(c policy.Child, from int64, m mutation.Mutation, unchanged bool, up *upgrade) decision {
	if !r.restricted(c) {
		return decision{ok: true}
	}
	if unchanged {
		// The pipeline wants what it wanted last time; the MR differs
		// because someone changed it. Correcting that is not propagation.
		if r.drift == v1alpha1.DriftAllow && !r.restrictAll {
			return decision{ok: true}
		}
		return decision{code: metrics.ReasonDrift, reason: "drift: the composition still wants the value it last applied and the resource was changed outside it; policy drift is Deny"}
	}
	if up == nil && r.inCreation(c) && r.partOfCreation(m) {
		// Completing the resource: a field it did not have, or a value
		// the pipeline itself computes while the XR is created.
		return decision{ok: true, creation: true}
	}
	d := r.permit(c, from, v1alpha1.VerbUpdate,
		func(b policy.Bound) bool { return b.AllowsMutation(c, m) },
		func(i int, a allowance.Allowance) bool { return len(a.Mutations) == 0 || r.boundsOf(i).Covers(m) })
	if d.ok {
		return d
	}
	if up != nil {
		if up.bound.AllowsMutation(c, m) {
			return r.taking(up)
		}
		return decision{reason: upgradeReason(up), code: metrics.ReasonLogicChanged}
	}
	return d
}

// taking lets an upgrade's change through when it is the XR's turn to take
// it (turn), and withholds it until then.
func (r *run) taking(up *upgrade) decision {
	ok, why, problems := r.turn(up)
	if !ok {
		return decision{reason: why, code: up.turnCode, problems: problems}
	}
	return decision{ok: true, upgrade: up, problems: problems}
}

// permitAdded decides creating a composed resource of kind c: as
// permitChild, and, when the XR's logic changed (r.added), as far as the
// UpgradeAllowances naming the change grant Create, for a new revision
// that adds a resource.
func (r *run) permitAdded(c policy.Child) decision {
	d := r.permitChild(c, 0, v1alpha1.VerbCreate) // nothing composed it yet
	if d.ok || r.added == nil {
		return d
	}
	if r.added.bound.AllowsChild(c, v1alpha1.VerbCreate) {
		return r.taking(r.added)
	}
	return decision{reason: upgradeReason(r.added), code: metrics.ReasonLogicChanged}
}

// upgradeReason says why a logic change's output is withheld.
func upgradeReason(up *upgrade) string {
	return fmt.Sprintf("the logic changed (%s) and no UpgradeAllowance naming that covers it", logic.Describe(up.changes))
}

func (r *run) noAllowance(c policy.Child, verb string) string {
	if r.restrictAll {
		return "the AllowancePolicies are not known (not resolved yet, or unreadable), so every change is withheld"
	}
	msg := fmt.Sprintf("no unconsumed allowance on %s grants %s of %s; policies: %s", ref(r.xr.Object), verb, c.Resource, strings.Join(r.set.Names(), ", "))
	if r.rulesOf(c).unresolved {
		msg += fmt.Sprintf("; %s counts as restricted because targets of its apiGroup are not resolved by the API server yet (AllowancePolicy status.targets): %s", c.Kind, strings.Join(r.set.Unresolved(), ", "))
	}
	return msg
}

// boundsOf is the compiled mutation bounds of allowance i, compiled once.
func (r *run) boundsOf(i int) mutation.Bounds {
	if len(r.bounds) != len(r.allowances) {
		r.bounds = make([]mutation.Bounds, len(r.allowances))
		for j, a := range r.allowances {
			r.bounds[j] = mutation.BoundsOf(a.Mutations)
		}
	}
	return r.bounds[i]
}
