package compose

import (
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// The External allowances a change earns: what lets a gated resource's
// provider write to the cloud for it (gate.go decides the gate from them).

// stampExternal adds to have, the resource's allowances as observed, the
// External allowances it earns for the change let through: those of the XR
// allowances that match it or, without one, a kind-wide grant.
//
// A change propagation control holds back earns them pending, with the
// values it sets (Allowance.Pending); one its pending allowances cover is
// let through by releasing them.
//
// An allowance whose verbs the pipeline's request (requested, nil: "*")
// does not ask for would open nothing (gate.Compute): it is not stamped.
// problems are what the resource's hop leaves out (mrHop).
func (r *run) stampExternal(dm, om childMeta, have []allowance.Allowance, ch change, requested []string) (_ []allowance.Allowance, problems []string) {
	if len(ch.passed) == 0 && len(ch.held) == 0 && len(ch.released) == 0 {
		return have, nil
	}
	out := slices.Clone(have)
	gen := allowance.NextGeneration(om.generation)
	hop, problems := r.mrHop(dm, gen, ch)
	for _, p := range ch.released {
		if i := slices.IndexFunc(out, p.Same); i >= 0 {
			out[i] = out[i].Released(r.now)
			out[i].Generation = gen
		}
	}
	if len(ch.passed) == 0 && len(ch.held) == 0 {
		return out, problems
	}
	covered := ch.covered
	if len(ch.held) > 0 {
		covered = ch.held
	}
	// What an update ships is pinned to the values this run let through:
	// a stale pipeline run that writes an older value back while the gate
	// is open is held, not shipped under this allowance (docs/DESIGN.md
	// §4a). A held change carries its values as pending instead; a
	// creation ships the resource whole.
	var pins map[string]string
	if !ch.create && len(ch.held) == 0 {
		pins = allowance.ValuesOf(dm.obj.Object, ch.passed, skipManaged)
	}
	add := func(a allowance.Allowance) {
		if !slices.ContainsFunc(a.Verbs, func(v string) bool { return gate.Asks(requested, v) || (v == gate.All && gate.AsksWrite(requested)) }) {
			return
		}
		if len(ch.held) > 0 {
			a.Pending = ch.pending
		} else if pins != nil {
			a = a.Pinned(pins)
		}
		if !slices.ContainsFunc(out, a.Reissues) { // never issued twice
			out = append(out, a)
		}
	}
	verb := v1alpha1.VerbUpdate
	if ch.create {
		verb = v1alpha1.VerbCreate
	}
	found := r.stampFromXR(dm, om.from, ch.create, covered, gen, hop, add)
	// Without an XR allowance, a kind-wide grant: creation during
	// initialization (deletion of external resources is the gate
	// controller's and admission's call), or the composition revision's own
	// changes, which reach the cloud only when an UpgradeAllowance grants the
	// external Update; that trace starts at the UpgradeAllowance.
	if !found && r.phase == policy.PhaseInitializing && !r.restrictAll && v1alpha1.GrantsVerb(r.set.PhaseBound(r.phase).ExternalVerbs(dm.child), verb) {
		add(allowance.ExternalGrant(dm.child.APIGroup, dm.child.Kind, verb, gen, r.xrTrace.Then(hop)).Shipping(kindWide(ch, covered)))
	} else if !found && r.rulesOf(dm.child).creationExternal {
		// The XR's creation, until it is first Ready: the resource's
		// creation, fields inserted into it, and values the pipeline
		// changes while nobody changed the XR (partOfCreation).
		if ch.create {
			add(allowance.ExternalGrant(dm.child.APIGroup, dm.child.Kind, verb, gen, r.xrTrace.Then(hop)))
		} else if ins := r.ofCreation(covered); len(ins) > 0 {
			add(allowance.ExternalGrant(dm.child.APIGroup, dm.child.Kind, verb, gen, r.xrTrace.Then(hop)).Shipping(mutation.BoundsFor(ins)))
		}
	}
	// What new logic (a Composition revision, a Function package) changes
	// or adds ships under its UpgradeAllowance, beside whatever XR
	// allowance ships the rest.
	if up := ch.upgrade; up != nil && v1alpha1.GrantsVerb(up.bound.ExternalVerbs(dm.child), verb) {
		add(allowance.ExternalGrant(dm.child.APIGroup, dm.child.Kind, verb, gen, up.base.Then(hop)).Shipping(mutation.BoundsFor(ch.upgrades)))
	}
	return out, problems
}

// kindWide is what a kind-wide grant lets the gate ship of covered: all
// of it, nil, for a creation. It is worked out only for such a grant, not
// for every resource an XR allowance covers.
func kindWide(ch change, covered []mutation.Mutation) []v1alpha1.MutationBound {
	if ch.create {
		return nil
	}
	return mutation.BoundsFor(covered)
}

// stampFromXR adds, through add, the External allowances the XR's
// unconsumed allowances that name the resource's external kind earn for
// the change (covered, or its creation), and reports whether any names it.
func (r *run) stampFromXR(dm childMeta, from int64, create bool, covered []mutation.Mutation, gen int64, hop allowance.Hop, add func(allowance.Allowance)) bool {
	found := false
	for i, xa := range r.allowances {
		if xa.Generation <= from || xa.Relation != v1alpha1.RelationExternal || !policy.MatchesExternal(xa.Target, dm.child) {
			continue
		}
		found = true
		var ships []v1alpha1.MutationBound
		if !create {
			if ships = mutation.BoundsFor(r.childBoundsOf(i, from, dm.child).Shippable(covered)); len(ships) == 0 {
				continue // its chain let nothing through to this resource
			}
		}
		add(allowance.Allowance{
			Relation: v1alpha1.RelationExternal, Target: xa.Target, Verbs: slices.Clone(xa.Verbs), Mutations: ships,
			Generation: gen, Initiator: xa.Initiator, Trace: r.throughXR(i).Then(hop),
		})
	}
	return found
}

// ofCreation are the mutations of ms that are part of the XR's creation
// (partOfCreation): what the creation's External grant ships.
func (r *run) ofCreation(ms []mutation.Mutation) []mutation.Mutation {
	return slices.DeleteFunc(slices.Clone(ms), func(m mutation.Mutation) bool { return !r.partOfCreation(m) })
}
