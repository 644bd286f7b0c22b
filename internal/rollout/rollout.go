// Package rollout holds the batch arithmetic of propagation control
// (docs/PROPAGATION.md): which members of an ordered collection may take a change
// now, given how many already applied it, and the CEL functions that expose
// it to propagateWhen expressions (exponentiallyUpdated, linearlyUpdated,
// and each member's updated() and ready()). One implementation serves both
// roll-outs the design names: composed resources within an XR and XRs
// within an upgrade.
package rollout

// Exponential reports whether the member at index (0-based, in the
// collection's order) may take the change once updated members have: the
// batches double, 1, 2, 4, 8, … — DESIGN §6's
// index < 2^ceil(log2(updated+1)).
func Exponential(index, updated int) bool {
	if index < 0 || updated < 0 {
		return false
	}
	batch := 1
	for batch < updated+1 {
		batch <<= 1
	}
	return index < batch
}

// Linear reports whether the member at index may take the change once
// updated members have, in batches of n — DESIGN §6's
// index < (updated/n + 1) * n. A batch size below 1
// lets nothing through.
func Linear(index, updated, n int) bool {
	if index < 0 || updated < 0 || n < 1 {
		return false
	}
	return index < (updated/n+1)*n
}
