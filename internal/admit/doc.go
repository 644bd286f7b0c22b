// Package admit holds the admission decisions of DESIGN §4a, pure and
// free of I/O: who may write Kausality's annotations and the gated label,
// which writes are a provider's bookkeeping, whether the allowances
// Crossplane stamps on a managed resource continue a chain, and who may set
// or lift a freeze, and what the policies say of a write (Evaluate). Each
// decision is a Verdict: allowed, or denied for a reason, with the
// writer's message, warnings and audit annotations. provider/admission
// gathers the objects, asks these, and turns the verdict into the API
// server's answer; every decision has a table test here.
package admit
