package gate

import (
	"maps"
	"slices"
	"time"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// Inputs are what decides one managed resource's gate.
type Inputs struct {
	// Allowances of the managed resource, as stored.
	Allowances []allowance.Allowance
	// Progress is the managed resource's as stored: what its provider
	// observed and which generation was last approved.
	Progress allowance.Progress
	// Generation is the managed resource's generation as stored (before
	// the write being decided, at admission).
	Generation int64
	// Spec is the record of the spec beyond the gate as it will be stored
	// (SpecRecord), and Approved what the gate last let through. An
	// allowance that ships the spec opens the gate only when the
	// allowances opening it cover every leaf the two differ by. Nil Spec
	// and Approved compare equal: nothing is pending.
	Spec     mutation.Applied
	Approved Approval
	// ReadOnly is the closed gate, and Requested what the resource's
	// pipeline asked for (nil: "*"): the gate is never wider (Compute).
	ReadOnly  []string
	Requested []string
	// Now and Limit decide expiry: an allowance stamped longer than Limit
	// ago opens nothing.
	Now   time.Time
	Limit time.Duration
	// Frozen names who froze the resource or a parent; a frozen gate opens
	// nothing, and consumes nothing either: the provider observes the
	// generations that pass during a freeze without applying them.
	Frozen string
}

// Decision is the gate of one managed resource and why.
type Decision struct {
	// Allowances are the inputs' allowances with newly consumed ones marked
	// Consumed (never reopened) and withheld ones moved past the stored
	// generation; their order is kept.
	Allowances []allowance.Allowance
	// Changed reports whether Allowances differ from the inputs'.
	Changed bool
	// Consumed and Expired are the allowances this decision found consumed
	// or past the limit; Open are the unconsumed External ones that open
	// the gate.
	Consumed, Expired, Open []allowance.Allowance
	// Withheld are the unconsumed External allowances a freeze keeps shut.
	Withheld []allowance.Allowance
	// Pending are those propagation control holds back (Allowance.Pending).
	Pending []allowance.Allowance
	// Moot are the unconsumed External allowances whose verbs the
	// resource's pipeline did not ask for (Inputs.Requested): they open
	// nothing, and nothing they grant is approved.
	Moot []allowance.Allowance
	// Held are the unconsumed External allowances that stay shut because
	// the spec differs from what was last approved by fields in Uncovered,
	// which no allowance opening the gate covers, or because the verbs
	// together are a combination crossplane-runtime does not support
	// (Err). They are not used up by what the provider observes meanwhile.
	Held      []allowance.Allowance
	Uncovered []string
	// Verbs are the external verbs the gate opens for.
	Verbs []string
	// Policies is the gate: spec.managementPolicies.
	Policies []string
	// Approved is the approval to store: the inputs' approval, or, when
	// the gate opens for Create or Update (Approves), the inputs' spec.
	// Its generation is then the stored one; Config.Decide sets it to the
	// generation the write gives the resource.
	Approved Approval
	Approves bool
	// Withdraws says Approved withdraws what an allowance that expired
	// before its change was applied had approved (withdraw): the caller
	// stores Approved as it does when the decision Approves.
	Withdraws bool
	// Err says why the gate failed closed: an unsupported combination.
	Err error
}

// Decide applies the gate formula to a managed resource's allowances: an
// allowance is consumed once the observed generation reaches its own (and,
// for one that ships the spec, once that generation was approved), a
// consumed or expired allowance opens nothing, a freeze opens nothing, and
// the rest open the External verbs they grant, as far as crossplane-runtime
// supports the combination (else the gate fails closed with Err) and as far
// as they cover the pending spec change.
//
// A freeze holds External allowances back instead of letting them be
// consumed by generations the provider only observed: each decision during
// the freeze moves them past the stored generation, so once the freeze
// lifts they are still unconsumed and the write that opens the gate is the
// generation that applies them. It also marks them Held, so they do not
// expire however long it lasts, and restamps them when it lifts, so their
// time limit counts from then. Pending allowances (propagation control)
// are moved alike and open nothing until the function releases them.
//
// An open gate ships the whole spec, so an allowance that ships the spec
// opens only when the allowances opening the gate cover every leaf the
// spec differs by from what was last approved (DESIGN §4a): a change the
// Namespace's Log mode let in, or one a pipeline step after Kausality
// made, would otherwise reach the cloud with the next permitted change,
// under its trace.
func Decide(in Inputs) Decision {
	d := Decision{Allowances: make([]allowance.Allowance, 0, len(in.Allowances)), Approved: in.Approved}
	var candidates []allowance.Allowance
	for _, a := range in.Allowances {
		a, withheld := d.advance(a, in)
		d.Allowances = append(d.Allowances, a)
		if d.sort(a, in, withheld) {
			candidates = append(candidates, a)
		}
	}
	d.withdraw(in)
	if d.Uncovered = uncovered(candidates, d.Approved.Spec.Changed(in.Spec), in.Spec); len(d.Uncovered) > 0 {
		for _, a := range candidates {
			if a.ShipsSpec() {
				d.Held = append(d.Held, a)
			} else {
				d.Open = append(d.Open, a)
			}
		}
	} else {
		d.Open = candidates
	}
	d.Open, d.Moot = asked(d.Open, in.Requested)
	for _, a := range d.Open {
		d.Verbs = append(d.Verbs, a.Verbs...)
	}
	d.Policies, d.Err = Compute(in.ReadOnly, in.Requested, d.Verbs)
	if d.Err != nil {
		// Nothing opens: none of them may be used up meanwhile.
		d.Held, d.Open, d.Verbs = append(d.Held, d.Open...), nil, nil
	}
	for _, a := range d.Open {
		if shipsThrough(a, d.Policies) {
			d.Approved, d.Approves = d.Approved.approving(in.Spec, in.Generation), true
			break
		}
	}
	return d
}

// shipsThrough reports whether the gate policies let a ship the spec: it
// grants Create or Update and the gate opens that verb.
func shipsThrough(a allowance.Allowance, policies []string) bool {
	return a.ShipsSpec() && ((a.HasVerb(Create) && slices.Contains(policies, Create)) || (a.HasVerb(Update) && slices.Contains(policies, Update)))
}

// asked splits open into the allowances with a verb the pipeline's
// request (nil: "*") lets open and the moot rest.
func asked(open []allowance.Allowance, requested []string) (opens, moot []allowance.Allowance) {
	want, err := askedSet(requested)
	if err != nil {
		return nil, open
	}
	for _, a := range open {
		if slices.ContainsFunc(a.Verbs, func(v string) bool { return want.has(v) || (v == All && want.writes()) }) {
			opens = append(opens, a)
		} else {
			moot = append(moot, a)
		}
	}
	return opens, moot
}

// withdraw takes back from the approval what an expired allowance had let
// through when its provider never applied it: the approval is written as
// the gate opens, so a change the cloud refused until the gate expired
// would otherwise count as shipped, and the next gate that opens for
// another change would ship it along (DESIGN §4a). The allowance's pinned
// fields go back to what the approval before held (Approval.Before), what
// the cloud still has; without that record they leave the approval. Either
// way the spec's new values are pending again: the gate holds for them
// until a new cause covers them or the function answers the resource with
// the values the cloud has (kausality.io/previous). An allowance without
// pinned values (a creation) withdraws nothing.
func (d *Decision) withdraw(in Inputs) {
	if in.Progress.Reconciled && in.Progress.Observed >= in.Approved.Generation {
		// The provider applied the approved generation.
		return
	}
	var out mutation.Applied
	for _, a := range d.Expired {
		if !a.ShipsSpec() || a.Generation > in.Approved.Generation || len(a.Values) == 0 {
			continue
		}
		for p := range a.Values {
			if out == nil {
				out = maps.Clone(d.Approved.Spec)
			}
			restore(out, d.Approved.Before, p)
		}
	}
	if out != nil && !maps.Equal(out, d.Approved.Spec) {
		d.Approved = Approval{Spec: out, Generation: in.Approved.Generation}
		d.Withdraws = true
	}
}

// restore sets the leaves of spec at or under path p back to what before
// holds for them: a leaf before does not name leaves spec.
func restore(spec, before mutation.Applied, p string) {
	for k := range spec {
		if mutation.Under(k, p) {
			if h, ok := before[k]; ok {
				spec[k] = h
			} else {
				delete(spec, k)
			}
		}
	}
	for k, h := range before {
		if mutation.Under(k, p) {
			spec[k] = h
		}
	}
}

// FreezeMatters reports whether a freeze can change the decision over as:
// only an unconsumed External allowance is withheld by one, or restamped
// when one lifts. Without such an allowance the decision is the same
// frozen or not, so whoever decides may skip reading the parents a freeze
// is set on: the gate controller and admission skip it once a resource's
// allowances are used up, which is every reconcile after a gate closed.
func FreezeMatters(as []allowance.Allowance) bool {
	return slices.ContainsFunc(as, live)
}

// live reports whether a is an unconsumed External allowance: one that may
// still open the gate, and so one a freeze holds back.
func live(a allowance.Allowance) bool {
	return !a.Consumed && a.Relation == v1alpha1.RelationExternal
}

// advance is a as this decision leaves it: moved past the stored
// generation while a freeze withholds it (withheld) or propagation control
// holds it, restamped when a freeze lifted, or marked consumed once the
// provider observed it.
func (d *Decision) advance(a allowance.Allowance, in Inputs) (_ allowance.Allowance, withheld bool) {
	live := live(a)
	withheld = in.Frozen != "" && live && !a.ExpiredAt(in.Now, in.Limit)
	switch {
	case withheld || (live && a.IsPending()):
		if a.Generation <= in.Generation {
			a.Generation = in.Generation + 1
			d.Changed = true
		}
		if withheld && !a.Held && !a.IsPending() {
			a.Held = true
			d.Changed = true
		}
	case live && a.Held:
		// The freeze lifted: the gate's time limit counts from now.
		a.Held = false
		a = a.Restamped(in.Now)
		d.Changed = true
	case !a.Consumed && a.ConsumedBy(in.Progress):
		a.Consumed = true
		d.Changed = true
		d.Consumed = append(d.Consumed, a)
	}
	return a, withheld
}

// sort files a, as advance left it, under what keeps it shut (pending,
// expired, withheld), and reports whether it is a candidate to open the
// gate instead.
func (d *Decision) sort(a allowance.Allowance, in Inputs, withheld bool) bool {
	switch {
	case a.Consumed || a.Relation != v1alpha1.RelationExternal:
	case a.IsPending():
		d.Pending = append(d.Pending, a)
	case a.ExpiredAt(in.Now, in.Limit):
		d.Expired = append(d.Expired, a)
	case withheld:
		d.Withheld = append(d.Withheld, a)
	default:
		return true
	}
	return false
}

// uncovered are the pending leaves no spec-shipping candidate covers at
// the value the spec (its record) holds, or nil when none is pending or no
// candidate ships the spec.
func uncovered(candidates []allowance.Allowance, pending []string, spec mutation.Applied) []string {
	if len(pending) == 0 {
		return nil
	}
	s := shipped(candidates)
	if !s.ships {
		return nil
	}
	if spec == nil {
		spec = mutation.Applied{} // every leaf gone: none holds a pinned value
	}
	var out []string
	for _, p := range pending {
		if !s.covers(p, spec) {
			out = append(out, p)
		}
	}
	return out
}

// Unshipped are the changes of a write (ms) that no unconsumed External
// allowance of as ships: the changes a writer made without a cause, which
// would reach the cloud with the next allowance that opens the gate. A
// pending allowance (propagation control) counts: its change has a cause
// and ships once released.
func Unshipped(as []allowance.Allowance, ms []mutation.Mutation) []mutation.Mutation {
	var live []allowance.Allowance
	for _, a := range as {
		if !a.Consumed {
			live = append(live, a)
		}
	}
	s := shipped(live)
	var out []mutation.Mutation
	for _, m := range ms {
		// By field: a build's or the provider's own write is not a hand
		// edit's value.
		if !s.covers(m.Path, nil) {
			out = append(out, m)
		}
	}
	return out
}

// shipping is what a set of allowances lets the gate ship.
type shipping struct {
	ships  bool // some allowance ships the spec
	all    bool // a creation ships the whole spec
	bounds []bound
}

// bound is a field an allowance ships, as far as the values it is pinned
// to (Allowance.Values) allow.
type bound struct {
	pattern mutation.Pattern
	by      allowance.Allowance
}

func shipped(as []allowance.Allowance) shipping {
	var s shipping
	for _, a := range as {
		if !a.ShipsSpec() {
			continue
		}
		s.ships = true
		if len(a.Mutations) == 0 && a.HasVerb(v1alpha1.VerbCreate) {
			s.all = true
		}
		for _, m := range a.Mutations {
			if p, err := mutation.ParsePattern(m.JSONPath); err == nil {
				s.bounds = append(s.bounds, bound{pattern: p, by: a})
			}
		}
	}
	return s
}

// covers reports whether a change at path is shipped: some bound overlaps
// it (an empty map or list recorded as one leaf is changed by an insert
// below it) and, with the spec's record, its allowance is pinned to the
// value there or pins none. A nil spec compares fields only.
func (s shipping) covers(path string, spec mutation.Applied) bool {
	if s.all {
		return true
	}
	for _, b := range s.bounds {
		if b.pattern.Overlaps(path) && (spec == nil || b.by.Pins(path, spec)) {
			return true
		}
	}
	return false
}
