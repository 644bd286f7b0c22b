// Package policy evaluates AllowancePolicies and UpgradeAllowances: which
// composed kinds they restrict, the bound each lifecycle phase sets, and, at
// admission, which allowances a change of a watched field earns. It is pure:
// no I/O, no clients. The function, the gate controller and the admission
// webhook all use it, so a policy means the same everywhere.
//
// Semantics, where DESIGN §3 leaves room:
//
//   - Upper bounds: a kind no entry names is unrestricted; the union of the
//     entries naming a kind is its bound. An UpgradeAllowance is a grant, not
//     a bound: a kind it does not name gets nothing from it.
//   - Several policies for one kind are ordered by priority (highest first),
//     then name. Mode is Log only when every policy says Log (and the
//     Namespace's kausality.io/mode annotation does not say otherwise; on a
//     Claim or XR it is ignored); drift is Allow only when every policy says
//     Allow. Disagreement resolves to the safer value.
//   - A policy without subjects lets every authenticated user initiate; a
//     policy with subjects lets only those with mayInitiate initiate. Only
//     policies that name subjects let a user lift another user's freeze.
//   - The deleting phase of a policy without a deleting section is
//     unrestricted for the function, but deleting cloud resources on an
//     admitted deletion is granted only by explicit deleting entries
//     (DeletionBound).
//   - CEL and the phase read the stored status, never the request's.
//   - CEL sees object and oldObject with metadata.annotations,
//     metadata.labels and status present (empty when unset), so
//     `has(object.status.observedGeneration)` works on a new object.
package policy
