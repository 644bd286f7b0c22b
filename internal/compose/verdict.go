package compose

import (
	"slices"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
)

// verdict is the function's word on one desired composed resource
// (verdictOf): what it is answered with, what is let through, withheld
// and held back, and what the XR reports of it. Later stages assemble
// verdicts into the response and the XR's report and change none.
type verdict struct {
	it *item // the resource and what would change in it, as decide left them
	// ch is the change the resource is answered with: the decision's, held
	// back or releasing its held creation as propagation control's batch
	// says, with the records stamping works out (applied, superseded,
	// previous, abandoned).
	ch change
	// hold is why propagation control holds ch back; nil: it does not.
	hold *hold
	// heldProblems are the malformed input holding the change back met.
	heldProblems []string
	// stamp is what is written onto it; nil: nothing.
	stamp *stamp
	// reports are what its gate keeps shut and what of its abandoned
	// changes it answers as the cloud has them: stamping's, beside those
	// of its decision (item.ch.reports).
	reports []withheld
	// problems are the malformed input stamping met, one line each.
	problems []string
	// unrestricted is what the XR says of a managed resource of a kind no
	// policy names (unrestrictedLine); "" for any other.
	unrestricted string
}

// verdictOf is the verdict on the desired composed resource it, given
// what would change in it (decide) and propagation control's word on that
// change (p, from pace's batch): the change held back or let go, then
// stamped and gated (finish). It is the one place a resource's verdict is
// made. Its stamp takes over the item's copy of the desired annotations
// (childMeta.ann), which nothing reads from the item afterwards; the rest
// of the item it reads only.
func (r *run) verdictOf(it *item, p pacing) verdict {
	v := verdict{it: it, ch: it.ch, hold: p.hold}
	switch {
	case p.hold != nil:
		var err error
		if v.ch, err = heldBack(it); err != nil {
			v.heldProblems = []string{err.Error()}
		}
	case p.paced && it.pendingCreate != nil:
		// Its turn came: the creation held back earlier goes now.
		v.ch.released = append(slices.Clip(v.ch.released), *it.pendingCreate)
	}
	r.finish(&v)
	return v
}

// findings are what the run reports on the XR: what it withheld and held
// back, malformed input, and how far an upgrade got.
type findings struct {
	withheld []withheld
	holds    []hold   // changes propagation control holds back
	problems []string // malformed input, one line each
	// behind: some composed resource still records older logic (its
	// upgrade is withheld, held, or waits for its turn), or has not
	// applied it yet.
	behind bool
	// usedCreation: this run let something through as part of the XR's
	// creation (loaded.creating).
	usedCreation bool
	// unrestricted are the composed managed resources of kinds no policy
	// for the XR names, one line each.
	unrestricted []string
	// untouched are the observed resources Kausality stamps that the run
	// leaves untouched (composedGeneration) and whose own record is of an
	// earlier XR generation, by composition resource name: what the XR's
	// KausalityComposed record says was composed from its generation
	// without a write.
	untouched []string
	// rideable: an allowance of the XR is of a later generation than one
	// of the untouched resources records as composed from, apart from the
	// XR's record: were that lost, the allowance would count as not yet
	// composed for the resource (leaveAsStored).
	rideable bool
	// recordable: an allowance of the XR is of a later generation than
	// one of the untouched resources was composed from by every record
	// (childMeta.from): the XR's record has something new to say.
	recordable bool
}

// tally gathers what the run reports on the XR from its verdicts, one at
// a time as each is given, so that no verdict outlives its resource's
// answer: each carries its whole change.
type tally struct {
	// upgrades: the run reports how far an upgrade got even while no
	// resource records older logic (reportsUpgraded), so it asks whether
	// each resource applied its change.
	upgrades     bool
	holds        []hold
	heldProblems []string
	// stamped are stamping's findings: what gates keep shut, problems,
	// unrestricted kinds, the creation used and logic behind.
	stamped findings
	// unapplied: some resource has not applied what it was let through
	// (memberState).
	unapplied bool
	// counts are the outcomes record counts beside what is withheld: each
	// resource held back and each let through, in name order.
	counts []counted
}

// newTally is the tally of r with no verdict given yet.
func newTally(r *run) *tally {
	return &tally{upgrades: r.reportsUpgraded(false)}
}

// add tallies v, a verdict of r.
func (t *tally) add(r *run, v *verdict) {
	it := v.it
	if h := v.hold; h != nil {
		t.holds = append(t.holds, *h)
		if r.metrics != nil {
			t.counts = append(t.counts, counted{resource: h.resource, outcome: metrics.OutcomeHeld, reason: h.code, child: it.dm.child})
		}
	}
	t.heldProblems = append(t.heldProblems, v.heldProblems...)
	f := &t.stamped
	f.usedCreation = f.usedCreation || v.ch.creation
	f.withheld = append(f.withheld, v.reports...)
	f.problems = append(f.problems, v.problems...)
	if v.unrestricted != "" && !slices.Contains(f.unrestricted, v.unrestricted) {
		f.unrestricted = append(f.unrestricted, v.unrestricted)
	}
	if st := v.stamp; st != nil && st.closing == nil && it.observed != nil && untouched(&v.ch) && len(it.problems) == 0 && len(v.problems) == 0 &&
		it.om.own < r.xr.GetGeneration() {
		// One whose own record says as much needs no word from the XR:
		// the XR's record changes once a generation, not again when a
		// later run leaves alone what an earlier one changed.
		f.untouched = append(f.untouched, it.resName)
		kept := max(it.om.own, r.stored[it.resName])
		f.rideable = f.rideable || slices.ContainsFunc(r.allowances, func(a allowance.Allowance) bool { return a.Generation > kept })
		f.recordable = f.recordable || slices.ContainsFunc(r.allowances, func(a allowance.Allowance) bool { return a.Generation > it.om.from })
	}
	if st := v.stamp; st != nil && st.closing == nil && r.olderLogic(st.annotations) {
		f.behind = true
	}
	if t.upgrades && !f.behind && !t.unapplied {
		// Upgraded, for the other XRs of a roll-out, means applied: each
		// resource observed at the generation it was let through, its
		// allowances used up, as propagation control counts members.
		have, _ := v.answered()
		applied, _ := r.memberState(it, &v.ch, have)
		t.unapplied = !applied
	}
	if r.metrics != nil && it.ok && (v.ch.create || len(v.ch.passed) > 0 || len(v.ch.released) > 0) {
		t.counts = append(t.counts, counted{resource: it.resName, outcome: metrics.OutcomeLetThrough, reason: r.letThrough(v), child: it.dm.child})
	}
}

// gather is what the run reports on the XR from what its stages returned,
// stage by stage and within a stage resource by resource, in name order:
// decided's (load's and decide's findings), propagation control's (paced:
// the problems its plan met, then the holds of t's verdicts), then
// stamping's.
func gather(decided findings, paced []string, t *tally) findings {
	f := decided
	f.problems = slices.Concat(f.problems, paced, t.heldProblems, t.stamped.problems)
	f.withheld = append(f.withheld, t.stamped.withheld...)
	f.holds = t.holds
	f.usedCreation, f.unrestricted, f.untouched = t.stamped.usedCreation, t.stamped.unrestricted, t.stamped.untouched
	f.rideable, f.recordable = t.stamped.rideable, t.stamped.recordable
	f.behind = t.stamped.behind || t.unapplied
	return f
}
