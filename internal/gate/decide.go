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
	// ReadOnly is the closed gate.
	ReadOnly []string
	// Now and Limit decide expiry: an allowance stamped longer than Limit
	// ago opens nothing.
	Now   time.Time
	Limit time.Duration
	// Frozen names who froze the resource or a parent; a frozen gate opens
	// nothing.
	Frozen string
}

// Decision is the gate of one managed resource and why.
type Decision struct {
	// Allowances are the inputs' allowances with newly consumed ones marked
	// Consumed (never reopened); their order is kept.
	Allowances []allowance.Allowance
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
func Decide(in Inputs) Decision {
	d := Decision{Allowances: make([]allowance.Allowance, 0, len(in.Allowances))}
	for _, a := range in.Allowances {
		if !a.Consumed && a.ConsumedAt(in.Observed, in.Reconciled) {
			a.Consumed = true
			d.Consumed = append(d.Consumed, a)
		}
		d.Allowances = append(d.Allowances, a)
		switch {
		case a.Consumed || a.Relation != v1alpha1.RelationExternal:
		case a.ExpiredAt(in.Now, in.Limit):
			d.Expired = append(d.Expired, a)
		case in.Frozen != "":
			d.Withheld = append(d.Withheld, a)
		default:
			d.Open = append(d.Open, a)
			d.Verbs = append(d.Verbs, a.Verbs...)
		}
	}
	d.Policies, d.Err = Compute(in.ReadOnly, d.Verbs)
	return d
}
