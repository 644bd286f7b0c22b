package compose

import (
	"slices"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// composedGeneration is the composite generation the resource is recorded
// as composed from: the XR's, when some allowance of the XR was not yet
// composed for it (its generation is later than the record) or it
// records none; otherwise
// the generation it records already. An allowance is used up for the
// resource by that record, so keeping it where no allowance needs it
// decides nothing differently, and Crossplane's own writes to the XR
// (recording resource references raises its generation) then do not
// rewrite every composed resource, each a watch event Crossplane's circuit
// breaker charges the XR for.
func (r *run) composedGeneration(om childMeta) int64 {
	gen := r.xr.GetGeneration()
	if om.from <= 0 || om.from > gen || slices.ContainsFunc(r.allowances, func(a allowance.Allowance) bool { return a.Generation > om.from }) {
		return gen
	}
	return om.from
}
