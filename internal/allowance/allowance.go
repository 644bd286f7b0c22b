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

// FromUpgrade reports whether a's chain starts at an UpgradeAllowance: new
// logic (a Composition revision, a Function build) caused it, not a user.
func (a Allowance) FromUpgrade() bool { return a.Trace.FromUpgrade() }

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

// Reissues reports whether a, about to be issued, is b issued again: the
// same grant (SameGrant) along the same chain (SameOrigin), for the same
// values (Values, Pending). One change earns one allowance and never a
// second; a later change of the same origin earns its own, as a creation
// completes a resource in steps after the provider created it.
func (a Allowance) Reissues(b Allowance) bool {
	return a.SameGrant(b) && a.SameOrigin(b) && maps.Equal(a.Values, b.Values) && maps.Equal(a.Pending, b.Pending)
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
