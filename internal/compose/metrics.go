package compose

import (
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// rank orders the outcomes of one composed resource's decision: the first
// that applies to any of its changes is the resource's outcome, so a
// resource with one change withheld counts as withheld, not let through.
var rank = map[string]int{
	metrics.OutcomeWithheld:   0,
	metrics.OutcomePending:    1,
	metrics.OutcomeHeld:       2,
	metrics.OutcomeLogOnly:    3,
	metrics.OutcomeLetThrough: 4,
}

// counted is what record counts for one composed resource.
type counted struct {
	resource        string // its composition resource name
	outcome, reason string
	child           policy.Child
}

// record counts one decision per composed resource the run had something
// to decide about: a change withheld, waiting for its roll-out turn, held
// by propagation control, or let through. Resources with nothing to change
// are not counted, so the rate of decisions follows changes, not
// reconciles. counts are the held and let through (tally.counts).
func (r *run) record(f *findings, counts []counted) {
	if r.metrics == nil {
		return
	}
	seen := map[string]counted{}
	put := func(v counted) {
		if had, ok := seen[v.resource]; ok && rank[had.outcome] <= rank[v.outcome] {
			return
		}
		seen[v.resource] = v
	}
	for _, w := range f.withheld {
		outcome := metrics.OutcomeWithheld
		switch {
		case w.logOnly:
			outcome = metrics.OutcomeLogOnly
		case w.code == metrics.ReasonUpgradeTurn || w.code == metrics.ReasonRolloutHalted:
			// An UpgradeAllowance permits it; only its turn is to come.
			outcome = metrics.OutcomePending
		}
		put(counted{resource: w.resource, outcome: outcome, reason: w.code, child: w.child})
	}
	for _, c := range counts {
		put(c)
	}
	kind := r.xr.GetKind()
	for _, v := range seen {
		p := ""
		if !r.restrictAll {
			p = r.set.RestrictedBy(v.child)
		}
		r.metrics.Decision(kind, v.outcome, v.reason, p)
	}
}

// letThrough is why the changes of a resource went through.
func (r *run) letThrough(v *verdict) string {
	switch {
	case v.ch.upgrade != nil:
		return metrics.ReasonUpgrade
	case len(v.ch.released) > 0:
		return metrics.ReasonReleased
	case v.ch.chosen != nil:
		return metrics.ReasonAllowance
	case !r.restricted(v.it.dm.child):
		return metrics.ReasonUnrestricted
	}
	return metrics.ReasonPolicyPermitted
}

// noAllowanceCode is noAllowance's class.
func (r *run) noAllowanceCode() string {
	if r.restrictAll {
		return metrics.ReasonPoliciesUnknown
	}
	return metrics.ReasonNoAllowance
}
