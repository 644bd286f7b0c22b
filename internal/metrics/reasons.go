package metrics

// Reasons of the function's decisions (label reason of
// kausality_function_decisions_total). The messages on the XR say the
// details; these are the few classes a dashboard groups by.
const (
	// Withheld (or, in Log mode, log_only).
	ReasonNoAllowance     = "no_allowance"     // no unconsumed XR allowance grants the change
	ReasonPoliciesUnknown = "policies_unknown" // the policies are not resolved: fail closed
	ReasonDrift           = "drift"            // correcting drift, and the policies' drift is Deny
	ReasonLogicChanged    = "logic_changed"    // new logic, and no UpgradeAllowance covers its output
	ReasonRolloutInvalid  = "rollout_invalid"  // an UpgradeAllowance's roll-out does not compile or evaluate
	ReasonFrozen          = "frozen"           // a freeze keeps the gate shut
	ReasonUncovered       = "uncovered_change" // the gate would ship a change no allowance covers
	ReasonGateError       = "gate_error"       // the gate could not be decided
	ReasonGateOverdue     = "gate_overdue"     // the gate stayed open past maxGateOpen: only closing it this run
	ReasonUnapplied       = "unapplied"        // a change whose gate closed before its provider applied it: the cloud's value is kept

	// Pending: an UpgradeAllowance permits the change.
	ReasonUpgradeTurn   = "upgrade_turn"   // not the XR's turn in the roll-out yet
	ReasonRolloutHalted = "rollout_halted" // a blocker halts the roll-out

	// Held by propagation control.
	ReasonPropagateWhen = "propagate_when"     // a propagateWhen rule is false
	ReasonWindow        = "maintenance_window" // ... and only a closed window stops it
	ReasonBlocker       = "blocker"            // a blocker exists, or cannot be read
	ReasonEvalFailed    = "evaluation_failed"  // a propagateWhen rule failed to evaluate

	// Let through.
	ReasonAllowance       = "allowance"         // an XR allowance covers it
	ReasonUpgrade         = "upgrade_allowance" // an UpgradeAllowance covers it, in the XR's turn
	ReasonReleased        = "pending_released"  // a held change whose batch came
	ReasonUnrestricted    = "unrestricted"      // no policy names the kind
	ReasonPolicyPermitted = "policy"            // a lifecycle phase, the XR's creation or drift Allow
)

// Reasons of admission decisions (label reason of
// kausality_admission_decisions_total, and audit annotation reason).
const (
	// Denied.
	ReasonPolicyViolation   = "policy_violation"   // a watched change no rule permits (Enforce mode)
	ReasonPolicyError       = "policy_error"       // the policies cannot be evaluated
	ReasonBrokenPolicy      = "broken_policy"      // a policy for the kind does not compile
	ReasonProtected         = "protected"          // a kausality.io annotation only Kausality may write
	ReasonFrozenWrite       = "frozen"             // a freeze set or lifted by someone who may not
	ReasonReferences        = "references"         // a reference only Crossplane may change
	ReasonIdentity          = "identity"           // what a gated resource acts on changed
	ReasonParentUncovered   = "parent_uncovered"   // Crossplane's write is not covered by its parent's allowances
	ReasonMalformed         = "malformed"          // a kausality.io annotation does not parse
	ReasonChain             = "chain"              // Crossplane's write does not chain to the composite's allowances
	ReasonBuild             = "build"              // a controller's new build writes what no UpgradeAllowance covers
	ReasonDeletionProtected = "deletion_protected" // deletion protection and no kausality.io/allow-delete
	ReasonDeletionUndecided = "deletion_undecided" // what the deletion does to the cloud cannot be decided
	ReasonStatusWriter      = "status_writer"      // a status Kausality reads written by someone else
	ReasonInvalidPolicy     = "invalid_policy"     // an AllowancePolicy or UpgradeAllowance does not compile
	ReasonConflict          = "conflict"           // a write from a stale copy
	ReasonRefused           = "refused"            // a refusal no other reason names

	// Allowed or patched.
	ReasonCaused  = "caused"   // the write carries a cause: allowances or a trace stamped
	ReasonLogMode = "log_mode" // Log mode let in what Enforce would deny
	ReasonPass    = "pass"     // nothing for Kausality to decide

	// Errored.
	ReasonBadRequest = "bad_request" // the object could not be decoded
	ReasonInternal   = "internal"    // a read failed
)
