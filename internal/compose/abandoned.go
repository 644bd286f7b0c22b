package compose

import (
	"maps"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// Abandoned changes: a gated resource's change whose gate closed before its
// provider applied it (the cloud refused it until the allowance expired)
// neither rides along with a later change nor keeps that change's gate
// shut (DESIGN §4a). The function records, as it lets a change through, the
// value each field had (kausality.io/previous); once the change is
// abandoned, the gate's approval holds those values again
// (gate.Decision.withdraw), and the function answers the resource with
// them, so its spec is what the cloud has, until a new cause covers the
// change.

// errUnapplied says why a field is answered with its value before a change.
const errUnapplied = "its change did not reach the cloud before its gate closed; the resource keeps the value the cloud has until a new cause covers the change"

// revertAbandoned answers ch's resource, for each field of its previous
// record whose change was abandoned, with the value it had before, and
// records that value as the one let through, so the pipeline's value is a
// new change that needs a cause. A value is used only where its hash is
// what the approval holds: what the cloud has, as the gate last let it
// through. It returns what is withheld this way, the record's entries
// still in flight, and the malformed input it met; ch.abandoned becomes
// the record of abandoned changes the resource keeps.
func (r *run) revertAbandoned(it *item, ch *change) (reports []withheld, inFlight mutation.Previous, problems []string) {
	ch.abandoned = keptAbandoned(ch.abandoned, it.desired, ch.passed)
	prev, err := mutation.ParsePrevious(it.om.ann[v1alpha1.AnnotationPrevious])
	if err != nil {
		return nil, nil, []string{errors.Wrapf(err, errFmtParsePrevious, v1alpha1.AnnotationPrevious, ref(it.observed)).Error()}
	}
	if len(prev) == 0 {
		return nil, nil, nil
	}
	approval := gate.ApprovalOf(it.observed).Spec
	spec := gate.SpecRecord(it.observed)
	live := r.liveShipping(it.have, it.observed)
	// The approval is written as the gate opens: what it holds was applied
	// once the provider synced the approved generation.
	prog := allowance.ProgressOf(it.observed)
	synced := prog.Reconciled && prog.HasApproved && prog.Observed >= prog.Approved
	out := maps.Clone(prev)
	edited := false // ch's spec is its own copy, not the decision's
	for _, p := range slices.Sorted(maps.Keys(prev)) {
		approved, now := under(approval, p), under(spec, p)
		switch {
		case r.log, passesUnder(ch.passed, p), covers(live, changeAt(it.observed, p, prev[p])):
			// Still in flight, or a new change of the field this run.
		case maps.Equal(now, approved) && synced:
			delete(out, p) // applied
		case maps.Equal(now, approved):
			// Approved and not yet synced: the gate decides.
		case maps.Equal(mutation.Record(p, prev[p], skipManaged), approved):
			if !edited && ch.rewritten {
				// A spec the decision rewrote stays the decision's.
				ch.spec = runtime.DeepCopyJSONValue(ch.spec)
			}
			edited = true
			w, err := revertField(it, ch, p, prev[p])
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			reports = append(reports, w)
			delete(out, p)
		}
	}
	return reports, out, problems
}

// revertField answers ch's resource with before, the value the field at
// path p had before an abandoned change, records it as let through, and
// keeps the abandoned value in ch.abandoned while the pipeline still
// wants it. It returns what is withheld this way.
func revertField(it *item, ch *change, p string, before any) (withheld, error) {
	if err := ch.setSpec(it.desired, p, before); err != nil {
		return withheld{}, err
	}
	ch.applied = withRecord(ch.applied, p, before)
	v, present := mutation.Value(it.observed, p)
	if !present {
		v = nil
	}
	if stillAbandonedValue(it.desired, p, v) {
		if ch.abandoned == nil {
			ch.abandoned = mutation.Previous{}
		}
		ch.abandoned[p] = v
	}
	m := changeAt(it.observed, p, before)
	return withheldOf(it.dm, string(m.Verb), p, metrics.ReasonUnapplied, errUnapplied), nil
}

// keptAbandoned are the entries of the abandoned record rec the pipeline
// still wants, in desired, and no change this run lets through (passed)
// touches.
func keptAbandoned(rec mutation.Previous, desired map[string]any, passed []mutation.Mutation) mutation.Previous {
	out := maps.Clone(rec)
	for p := range rec {
		if passesUnder(passed, p) || !stillAbandonedValue(desired, p, rec[p]) {
			delete(out, p)
		}
	}
	return out
}

// stillAbandoned reports whether the field at path p of desired, or a
// field above or below it, holds the value an abandoned change of rec set
// there.
func stillAbandoned(rec mutation.Previous, desired map[string]any, p string) bool {
	for q, v := range rec {
		if (mutation.Under(p, q) || mutation.Under(q, p)) && stillAbandonedValue(desired, q, v) {
			return true
		}
	}
	return false
}

// stillAbandonedValue reports whether desired holds v at path p (nil: has
// nothing there).
func stillAbandonedValue(desired map[string]any, p string, v any) bool {
	cur, present := mutation.Value(desired, p)
	if v == nil {
		return !present
	}
	return present && maps.Equal(mutation.Record(p, cur, skipManaged), mutation.Record(p, v, skipManaged))
}

// recordPrevious is prev with, for each mutation ch lets through under an
// External allowance stamped this run (in stamped, not in have), the
// value its field had before, where that is what the approval holds: the
// value the cloud has. A field already recorded keeps its first value,
// the cloud's since.
func recordPrevious(prev mutation.Previous, observed map[string]any, ch change, have, stamped []allowance.Allowance) mutation.Previous {
	if ch.create {
		return prev
	}
	var fresh []allowance.Allowance
	for _, a := range stamped {
		if a.ShipsSpec() && !a.IsPending() && len(a.Mutations) > 0 && !slices.ContainsFunc(have, a.Same) {
			fresh = append(fresh, a)
		}
	}
	if len(fresh) == 0 {
		return prev
	}
	var approval mutation.Applied // read once a field needs it
	out := maps.Clone(prev)
	for _, m := range ch.passed {
		if _, ok := out[m.Path]; ok || !covers(fresh, m) {
			continue
		}
		if approval == nil {
			approval = gate.ApprovalOf(observed).Spec
		}
		// Only the field's own leaves are hashed: the record of the whole
		// spec would be the same there, at the cost of every other leaf.
		v, present := mutation.Value(observed, m.Path)
		var now mutation.Applied
		if present {
			now = mutation.Record(m.Path, v, gate.IsGatePath)
		} else {
			v = nil
		}
		if !sameUnder(now, approval, m.Path) {
			continue
		}
		if out == nil {
			out = mutation.Previous{}
		}
		out[m.Path] = v
	}
	return out
}

// sameUnder reports whether a and b hold the same leaves at or under p:
// maps.Equal of under(a, p) and under(b, p), without building either.
func sameUnder(a, b mutation.Applied, p string) bool {
	n := 0
	for k, h := range a {
		if !mutation.Under(k, p) {
			continue
		}
		if bh, ok := b[k]; !ok || bh != h {
			return false
		}
		n++
	}
	for k := range b {
		if mutation.Under(k, p) {
			n--
		}
	}
	return n == 0
}

// liveShipping are the allowances of have that may still open the gate to
// ship a change of the spec: unconsumed on observed, not expired, not held
// back by propagation control.
func (r *run) liveShipping(have []allowance.Allowance, observed map[string]any) []allowance.Allowance {
	return slices.DeleteFunc(allowance.Unconsumed(have, observed), func(a allowance.Allowance) bool {
		return !a.ShipsSpec() || a.IsPending() || a.ExpiredAt(r.now, r.cfg.gate.MaxOpen)
	})
}

// covers reports whether one of as ships m: a creation ships the whole
// spec, an Update the fields its mutations name.
func covers(as []allowance.Allowance, m mutation.Mutation) bool {
	return slices.ContainsFunc(as, func(a allowance.Allowance) bool {
		if len(a.Mutations) == 0 {
			return a.HasVerb(v1alpha1.VerbCreate)
		}
		return mutation.BoundsOf(a.Mutations).Covers(m)
	})
}

// changeAt is the change of the field at path p from before (nil: none)
// to what obj holds there.
func changeAt(obj map[string]any, p string, before any) mutation.Mutation {
	_, present := mutation.Value(obj, p)
	switch {
	case before == nil:
		return mutation.Mutation{Path: p, Verb: v1alpha1.MutationInsert}
	case !present:
		return mutation.Mutation{Path: p, Verb: v1alpha1.MutationDelete}
	}
	return mutation.Mutation{Path: p, Verb: v1alpha1.MutationMutate}
}

// passesUnder reports whether one of ms changes the field at p, or a field
// above or below it.
func passesUnder(ms []mutation.Mutation, p string) bool {
	return slices.ContainsFunc(ms, func(m mutation.Mutation) bool { return mutation.Under(m.Path, p) || mutation.Under(p, m.Path) })
}

// under are the leaves of rec at or under path p.
func under(rec mutation.Applied, p string) mutation.Applied {
	out := mutation.Applied{}
	for k, h := range rec {
		if mutation.Under(k, p) {
			out[k] = h
		}
	}
	return out
}

// withRecord is rec with the leaves at or under p those of v there (none
// for nil): what was let through there is v.
func withRecord(rec mutation.Applied, p string, v any) mutation.Applied {
	out := maps.Clone(rec)
	if out == nil {
		out = mutation.Applied{}
	}
	for k := range out {
		if mutation.Under(k, p) {
			delete(out, k)
		}
	}
	out.Add(p, v, skipManaged, nil)
	return out
}

// setSpec sets the field at path p (under spec) of the change's copy of
// desired's spec to v (nil: removes it), copying desired's spec first when
// the change kept none of its own.
func (ch *change) setSpec(desired map[string]any, p string, v any) error {
	if !ch.rewritten {
		ch.spec, ch.rewritten, ch.whole = runtime.DeepCopyJSONValue(desired["spec"]), true, false
	}
	obj := map[string]any{"spec": ch.spec}
	var err error
	if v == nil {
		err = fieldpath.Pave(obj).DeleteField(p)
	} else {
		err = fieldpath.Pave(obj).SetValue(p, runtime.DeepCopyJSONValue(v))
	}
	ch.spec = obj["spec"]
	return errors.Wrapf(err, errFmtSetPrevious, ref(desired), p)
}
