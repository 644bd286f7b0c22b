package gate

import (
	"time"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// Inputs are what decides one managed resource's gate.
type Inputs struct {
	// Allowances of the managed resource, as stored.
	Allowances []allowance.Allowance
	// Observed is the managed resource's observed generation; Reconciled is
	// false when no provider has reported one yet.
	Observed   int64
	Reconciled bool
	// Generation is the managed resource's generation as stored (before
	// the write being decided, at admission).
	Generation int64
	// ReadOnly is the closed gate.
	ReadOnly []string
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
	// Verbs are the external verbs the gate opens for.
	Verbs []string
	// Policies is the gate: spec.managementPolicies.
	Policies []string
	// Err says why the gate failed closed: an unsupported combination.
	Err error
}

// Decide applies the gate formula to a managed resource's allowances: an
// allowance is consumed once the observed generation reaches its own, a
// consumed or expired allowance opens nothing, a freeze opens nothing, and
// the rest open the External verbs they grant, as far as crossplane-runtime
// supports the combination (else the gate fails closed with Err).
//
// A freeze holds External allowances back instead of letting them be
// consumed by generations the provider only observed: each decision during
// the freeze moves them past the stored generation, so once the freeze
// lifts they are still unconsumed and the write that opens the gate is the
// generation that applies them.
func Decide(in Inputs) Decision {
	d := Decision{Allowances: make([]allowance.Allowance, 0, len(in.Allowances))}
	for _, a := range in.Allowances {
		withheld := in.Frozen != "" && !a.Consumed && a.Relation == v1alpha1.RelationExternal && !a.ExpiredAt(in.Now, in.Limit)
		switch {
		case withheld:
			if a.Generation <= in.Generation {
				a.Generation = in.Generation + 1
				d.Changed = true
			}
		case !a.Consumed && a.ConsumedAt(in.Observed, in.Reconciled):
			a.Consumed = true
			d.Changed = true
			d.Consumed = append(d.Consumed, a)
		}
		d.Allowances = append(d.Allowances, a)
		switch {
		case a.Consumed || a.Relation != v1alpha1.RelationExternal:
		case a.ExpiredAt(in.Now, in.Limit):
			d.Expired = append(d.Expired, a)
		case withheld:
			d.Withheld = append(d.Withheld, a)
		default:
			d.Open = append(d.Open, a)
			d.Verbs = append(d.Verbs, a.Verbs...)
		}
	}
	d.Policies, d.Err = Compute(in.ReadOnly, d.Verbs)
	return d
}
