package compose

import (
	"slices"
)

// verdict is the function's word on one desired composed resource: what
// it is answered with, what is let through, withheld and held back, and
// what the XR reports of it. Later stages assemble verdicts into the
// response and the XR's report and change none.
type verdict struct {
	it *item // the resource and its decision, as decide left them
	// ch is the change the resource is answered with: the decision's, as
	// propagation control paced it, with the records stamping works out
	// (applied, superseded, previous, abandoned).
	ch change
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
}

// assemble is what the run reports on the XR from what its stages
// returned, stage by stage and within a stage resource by resource, in
// name order: decided's (load's and decide's findings), propagation
// control's (holds, and the problems it met), then stamping's, each
// verdict's.
func (r *run) assemble(decided findings, holds []hold, paced []string, vs []verdict) findings {
	f := decided
	f.holds = holds
	f.problems = append(f.problems, paced...)
	for i := range vs {
		v := &vs[i]
		f.usedCreation = f.usedCreation || v.ch.creation
		f.withheld = append(f.withheld, v.reports...)
		f.problems = append(f.problems, v.problems...)
		if v.unrestricted != "" && !slices.Contains(f.unrestricted, v.unrestricted) {
			f.unrestricted = append(f.unrestricted, v.unrestricted)
		}
		if st := v.stamp; st != nil && st.closing == nil && r.olderLogic(st.annotations) {
			f.behind = true
		}
	}
	if !f.behind && r.reportsUpgraded(false) {
		// Upgraded, for the other XRs of a roll-out, means applied: each
		// resource observed at the generation it was let through, its
		// allowances used up, as propagation control counts members.
		for i := range vs {
			have, _ := vs[i].answered()
			if applied, _ := r.memberState(vs[i].it, &vs[i].ch, have); !applied {
				f.behind = true
			}
		}
	}
	return f
}
