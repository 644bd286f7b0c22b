// Package admit holds the admission decisions of DESIGN §4a, pure and
// free of I/O: who may write Kausality's annotations and the gated label,
// which writes are a provider's bookkeeping, whether the allowances
// Crossplane stamps on a managed resource continue a chain, and who may set
// or lift a freeze. provider/admission reads the objects, asks these, and
// answers the API server; every decision has a table test here.
package admit
