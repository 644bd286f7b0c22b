package allowance

import (
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Consumption: when an allowance is used up, read from the object that
// carries it.

// ConsumedAt reports whether the allowance is used up for a carrying object
// whose observed generation is observed (ok=false: none observed yet) and
// that keeps no approval record; ConsumedBy is the general rule.
// An External allowance for Delete alone is the exception: the provider
// deletes only once the object itself is deleted, which observing a
// generation says nothing about, so it is used up by the deletion (the
// object goes) or by its time limit, never by a generation.
func (a Allowance) ConsumedAt(observed int64, ok bool) bool {
	return a.ConsumedBy(Progress{Observed: observed, Reconciled: ok})
}

// Progress is how far a carrying object's changes have gone: what its
// controller observed and, on a gated managed resource, which generation
// an open gate last let its provider write to the cloud.
type Progress struct {
	// Observed is the observed generation; Reconciled is false when none
	// is reported (see ObservedGeneration).
	Observed   int64
	Reconciled bool
	// Approved is the generation recorded in kausality.io/approved-generation;
	// HasApproved is false without that record (composites, Claims), where
	// observation alone consumes.
	Approved    int64
	HasApproved bool
	// Gate is the spec.managementPolicies stored at the observed
	// generation's side, HasGate false without one. A change is applied
	// only behind a gate that opened for it: a generation observed behind
	// a gate someone narrowed meanwhile applied nothing.
	Gate    []string
	HasGate bool
	// Expired reports whether an allowance's time ran out (nil: none
	// has): an expired one opens nothing again, so one observed past its
	// approval counts as used whatever gate is stored (a gate the
	// function closed at the limit while the provider was down, after the
	// provider applied the change).
	Expired func(Allowance) bool
}

// ProgressOf reads a carrying object's progress.
func ProgressOf(carrier map[string]any) Progress {
	var p Progress
	p.Observed, p.Reconciled = ObservedGeneration(carrier)
	p.Approved, p.HasApproved = ApprovedGeneration(carrier)
	if spec, ok := carrier["spec"].(map[string]any); ok {
		if ps, ok := spec["managementPolicies"].([]any); ok {
			p.HasGate = true
			if len(ps) > 0 {
				// Made once at its size: it is read twice for every
				// gated resource of every run.
				p.Gate = make([]string, 0, len(ps))
			}
			for _, v := range ps {
				if s, ok := v.(string); ok {
					p.Gate = append(p.Gate, s)
				}
			}
		}
	}
	return p
}

// opens reports whether the gate p stores opens one of a's verbs that ship
// the spec (Create, Update): the gate the provider observed it behind.
// Without a stored gate it does not say, and counts as open.
func (p Progress) opens(a Allowance) bool {
	if !p.HasGate {
		return true
	}
	for _, g := range p.Gate {
		if g == v1alpha1.VerbAll || ((g == v1alpha1.VerbCreate || g == v1alpha1.VerbUpdate) && a.HasVerb(g)) {
			return true
		}
	}
	return false
}

// ConsumedBy reports whether the allowance is used up for a carrying object
// at progress p: marked consumed, or observed at its generation. An
// External allowance that ships the spec (Create, Update) on a resource
// that keeps an approval record is used up only once that generation was
// also approved: a generation the provider observed behind a closed gate
// (an unsupported combination, an uncovered pending change) applied
// nothing, so the change still waits, and so did every generation before
// the approved one. Nor is it used up while the stored gate does not
// open its verb and its time has not run out (Progress.Expired): someone
// narrowed the gate before the provider applied the change
// (Progress.Gate), and the gate opens again for it. Delete
// alone is used up only by the deletion (see ConsumedAt).
func (a Allowance) ConsumedBy(p Progress) bool {
	if a.Consumed || a.OpensDelete() || a.IsPending() {
		return a.Consumed
	}
	if !p.Reconciled || p.Observed < a.Generation {
		return false
	}
	if !p.HasApproved || !a.ShipsSpec() {
		return true
	}
	// The gate that let the change through opened at the approved
	// generation, which is later than the allowance's own when the
	// resource moved on between the function reading it and Crossplane's
	// write (another gate closing, say): until the provider observes the
	// approved generation, it has applied nothing of it.
	return p.Approved >= a.Generation && p.Observed >= p.Approved && (p.opens(a) || (p.Expired != nil && p.Expired(a)))
}

// ShipsSpec reports whether a is an External allowance whose gate lets the
// provider write the spec to the cloud: it grants Create or Update.
func (a Allowance) ShipsSpec() bool {
	return a.Relation == v1alpha1.RelationExternal && (a.HasVerb(v1alpha1.VerbCreate) || a.HasVerb(v1alpha1.VerbUpdate))
}

// OpensDelete reports whether a is an External allowance for Delete alone:
// the one an admitted deletion stamps.
func (a Allowance) OpensDelete() bool {
	return a.Relation == v1alpha1.RelationExternal && len(a.Verbs) == 1 && a.Verbs[0] == v1alpha1.VerbDelete
}

// Unconsumed are the allowances of as not yet consumed on carrier, the
// object carrying them as stored: its progress decides. This is
// how consumed allowances are pruned everywhere.
func Unconsumed(as []Allowance, carrier map[string]any) []Allowance {
	p := ProgressOf(carrier)
	return slices.DeleteFunc(slices.Clone(as), func(a Allowance) bool { return a.ConsumedBy(p) })
}

// KeepConsumed is as with every allowance marked consumed that stored, the
// allowances as stored, holds consumed: a consumed allowance is never
// reopened (DESIGN §3), whatever a stale writer sends back. changed says
// whether any was marked.
func KeepConsumed(as, stored []Allowance) (out []Allowance, changed bool) {
	out = slices.Clone(as)
	for i, a := range out {
		if !a.Consumed && slices.ContainsFunc(stored, func(s Allowance) bool { return s.Consumed && s.Same(a) }) {
			out[i].Consumed = true
			changed = true
		}
	}
	return out, changed
}

// KeepUnconsumed is as with every allowance stored holds unconsumed on
// storedObj (the object as stored) put back where as has none of the same
// origin, and whether it put any back. A write never loses an unconsumed
// allowance (DESIGN §4a): Crossplane composing from a copy older than the
// provider's last write (the Delete allowance a deletion stamps, say), or a
// buggy pipeline step, would otherwise drop one and close its gate. Only
// consumption removes an allowance. Same origin, not sameness, decides, as
// a freeze moves a held allowance's generation.
func KeepUnconsumed(as, stored []Allowance, storedObj map[string]any) (out []Allowance, changed bool) {
	out = as
	for _, s := range Unconsumed(stored, storedObj) {
		if !slices.ContainsFunc(out, func(a Allowance) bool { return a.SameGrant(s) && a.SameOrigin(s) }) {
			if !changed {
				out = slices.Clone(as)
			}
			out = append(out, s)
			changed = true
		}
	}
	return out, changed
}
