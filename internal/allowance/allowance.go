// Package allowance holds the vocabulary of the kausality.io annotations,
// used alike by the function, the gate controller and admission: allowances
// and traces, their codecs (strict parsing, compact output in a stable key
// order, so repeated applies never flap), what makes two hops or two
// allowances the same, when an allowance is consumed or expired, and the
// freeze.
package allowance

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// An Allowance permits one layer to mutate the next. It is stored in the
// kausality.io/allowances annotation of the object whose controller may make
// the mutation.
type Allowance struct {
	Relation v1alpha1.Relation `json:"relation"`
	Target   v1alpha1.Target   `json:"target"`
	// Verbs permitted on the target object.
	Verbs []string `json:"verbs,omitempty"`
	// Mutations permitted on the target's fields (ControllerChild). On an
	// External allowance they name the carrying resource's spec fields
	// whose change its gate ships to the cloud: an Update gate opens only
	// when they cover everything the spec differs by from what was last
	// approved. An External allowance without them covers the whole spec
	// if it grants Create (a creation ships it all), else nothing.
	Mutations []v1alpha1.MutationBound `json:"mutations,omitempty"`
	// Generation of the carrying object this allowance is for; it is consumed
	// once the carrying object's observed generation reaches it.
	Generation int64  `json:"generation"`
	Initiator  string `json:"initiator,omitempty"`
	Trace      Trace  `json:"trace,omitempty"`
	// Consumed marks an allowance whose change has been applied. A consumed
	// allowance is never reopened.
	Consumed bool `json:"consumed,omitempty"`
	// Pending marks an External allowance whose change propagation control
	// holds back (DESIGN §6): it maps each field its Mutations name to the
	// hash of the value the change sets there (the applied record's codec;
	// Absent for a field it removes), so the change it was issued for, and
	// no later one, is what it lets through once released. A pending
	// allowance opens no gate, is never used up by a generation and never
	// expires; the function releases it (Release) when the resource's
	// propagateWhen holds.
	Pending map[string]string `json:"pending,omitempty"`
	// Values pins an External allowance a hand edit earned to the values
	// the edit set (ValuesOf): it maps each field the edit changed to the
	// hash of its value, or Absent. Its gate ships a change of those
	// fields only while the spec holds them: a later write of one (a stale
	// pipeline run reverting the edit) is a change of its own and needs
	// its own cause (DESIGN §4a).
	Values map[string]string `json:"values,omitempty"`
	// Held marks an External allowance a freeze keeps shut. It does not
	// expire while held, and its clock restarts when the freeze lifts, so a
	// change held by a freeze of any length still applies afterwards.
	Held bool `json:"held,omitempty"`
}

// ExternalGrant is an External allowance for verb on the cloud resource
// behind a managed resource of apiGroup and kind, for the carrying object's
// generation gen and traced by t: what a kind-wide grant (creation while
// initializing, an UpgradeAllowance, an admitted deletion) stamps.
func ExternalGrant(apiGroup, kind, verb string, gen int64, t Trace) Allowance {
	return Allowance{
		Relation:   v1alpha1.RelationExternal,
		Target:     v1alpha1.Target{External: map[string]string{"apiGroup": apiGroup, "kind": kind}},
		Verbs:      []string{verb},
		Generation: gen,
		Initiator:  t.Initiator(),
		Trace:      t,
	}
}

// Shipping is a with the spec fields its gate ships (see Mutations).
func (a Allowance) Shipping(fields []v1alpha1.MutationBound) Allowance {
	a.Mutations = fields
	return a
}

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

// FromUpgrade reports whether a's chain starts at an UpgradeAllowance: new
// logic (a Composition revision, a Function build) caused it, not a user.
func (a Allowance) FromUpgrade() bool { return a.Trace.FromUpgrade() }

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

// HasVerb reports whether the allowance grants verb, directly or through "*".
func (a Allowance) HasVerb(verb string) bool {
	return v1alpha1.GrantsVerb(a.Verbs, verb)
}

// SameGrant reports whether a and b permit the same: relation, target,
// verbs and field mutations. Where they come from is not asked.
func (a Allowance) SameGrant(b Allowance) bool {
	return a.Relation == b.Relation && sameTarget(a.Target, b.Target) && slices.Equal(a.Verbs, b.Verbs) &&
		slices.EqualFunc(a.Mutations, b.Mutations, func(x, y v1alpha1.MutationBound) bool {
			return x.JSONPath == y.JSONPath && slices.Equal(x.Verbs, y.Verbs)
		})
}

// SameOrigin reports whether a and b were issued for the same target along
// the same chain: their traces agree on every hop before the carrying
// object's own. DESIGN §3 identifies an allowance this way (parent,
// parent generation, target), and one is never issued twice.
func (a Allowance) SameOrigin(b Allowance) bool {
	return a.Relation == b.Relation && sameTarget(a.Target, b.Target) && len(b.Trace) > 0 && a.Trace.Extends(b.Trace.Parent())
}

// Same reports whether a and b are one allowance, consumed or not: the same
// grant for the same generation of the carrying object, along the same
// chain.
func (a Allowance) Same(b Allowance) bool {
	return a.SameGrant(b) && a.Generation == b.Generation && a.Trace.Same(b.Trace)
}

func sameTarget(a, b v1alpha1.Target) bool {
	return a.APIGroup == b.APIGroup && a.APIVersion == b.APIVersion && a.Resource == b.Resource && maps.Equal(a.External, b.External)
}

// SortKey orders allowances deterministically (trace linearity): by the
// kind/name/field of each hop, then generation and relation.
func (a Allowance) SortKey() string {
	keys := make([]string, 0, len(a.Trace)+2)
	for _, h := range a.Trace {
		keys = append(keys, h.Key())
	}
	keys = append(keys, fmt.Sprintf("%020d", a.Generation), string(a.Relation))
	return strings.Join(keys, "|")
}

// Sort orders allowances by SortKey, in place, stably.
func Sort(as []Allowance) {
	sort.SliceStable(as, func(i, j int) bool { return as[i].SortKey() < as[j].SortKey() })
}

// Validate checks what Parse cannot check by decoding alone.
func (a Allowance) Validate() error {
	switch a.Relation {
	case v1alpha1.RelationControllerChild:
		if a.Target.Resource == "" {
			return errors.New("relation ControllerChild needs target.resource")
		}
		for _, v := range a.Verbs {
			switch v {
			case v1alpha1.VerbCreate, v1alpha1.VerbUpdate, v1alpha1.VerbDelete, v1alpha1.VerbAll:
			default:
				return errors.Errorf("verb %q is not one of Create, Update, Delete, *", v)
			}
		}
	case v1alpha1.RelationExternal:
		if len(a.Target.External) == 0 {
			return errors.New("relation External needs target.external")
		}
	default:
		return errors.Errorf("relation %q is not ControllerChild or External", a.Relation)
	}
	for i, m := range a.Mutations {
		if m.JSONPath == "" {
			return errors.Errorf("mutations[%d].jsonPath is empty", i)
		}
		for _, v := range m.Verbs {
			switch v {
			case v1alpha1.MutationInsert, v1alpha1.MutationDelete, v1alpha1.MutationMutate, v1alpha1.MutationAll:
			default:
				return errors.Errorf("mutations[%d].verbs: %q is not one of Insert, Delete, Mutate, *", i, v)
			}
		}
	}
	if len(a.Pending) > 0 && a.Relation != v1alpha1.RelationExternal {
		return errors.New("only an External allowance can be pending")
	}
	for k := range a.Pending {
		if k == "" {
			return errors.New("pending names an empty field")
		}
	}
	if len(a.Values) > 0 && a.Relation != v1alpha1.RelationExternal {
		return errors.New("only an External allowance can be pinned to values")
	}
	for k := range a.Values {
		if k == "" {
			return errors.New("values names an empty field")
		}
	}
	if a.Generation < 0 {
		return errors.Errorf("generation %d is negative", a.Generation)
	}
	return errors.Wrap(a.Trace.Validate(), "trace")
}

// StampedAt is when the allowance was stamped on its carrying object: the
// timestamp of its last hop; ok is false without a readable one.
func (a Allowance) StampedAt() (time.Time, bool) {
	if len(a.Trace) == 0 {
		return time.Time{}, false
	}
	ts, err := time.Parse(time.RFC3339, a.Trace.Last().Timestamp)
	return ts, err == nil
}

// MaxSkew is how far in the future an allowance's timestamp may lie when
// it is stamped: the clocks of the function and the provider disagree by
// seconds, never by minutes.
const MaxSkew = time.Minute

// Stampable says why a writer may not stamp a onto an object whose stored
// generation is stored, at now, or is nil when it may: its generation must
// be no later than the object's next (an allowance for a later one would
// never be consumed), and its timestamp readable and not in the future (an
// allowance without one, or stamped in the future, would never expire).
func (a Allowance) Stampable(stored int64, now time.Time) error {
	if a.Generation < 1 || a.Generation > NextGeneration(stored) {
		return errors.Errorf("its generation %d is not one the object's next write (%d) or an earlier one gives it", a.Generation, NextGeneration(stored))
	}
	ts, ok := a.StampedAt()
	if !ok {
		return errors.New("its last hop carries no readable timestamp")
	}
	if ts.After(now.Add(MaxSkew)) {
		return errors.Errorf("it is stamped %s, in the future", a.Trace.Last().Timestamp)
	}
	return nil
}

// Within reports whether a grants nothing parent does not: the same
// relation and target, and only verbs parent grants. An allowance a
// pipeline step stamps onto a composed resource carries its composite's
// allowance down, never widens it.
func (a Allowance) Within(parent Allowance) bool {
	return a.Relation == parent.Relation && sameTarget(a.Target, parent.Target) &&
		!slices.ContainsFunc(a.Verbs, func(v string) bool { return !parent.HasVerb(v) })
}

// ExpiredAt reports whether the allowance's gate has been open longer than
// limit at now, counting from when it was stamped. One that is pending or
// held by a freeze never expires: its gate has not opened. Without a readable
// timestamp it never expires: the consumption rule still closes the gate.
// The function and the gate controller both close gates by this rule, so
// they agree on when.
func (a Allowance) ExpiredAt(now time.Time, limit time.Duration) bool {
	if a.IsPending() || a.Held {
		return false
	}
	ts, ok := a.StampedAt()
	if !ok || limit <= 0 {
		return false
	}
	return now.Sub(ts) > limit
}

// NextGeneration is the generation a spec write gives an object whose
// stored generation is stored (0 for an object being created). Allowances
// and hops stamped by such a write name it, so the provider's observing it
// is what consumes them.
func NextGeneration(stored int64) int64 {
	return stored + 1
}
