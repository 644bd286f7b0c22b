package v1alpha1

// The object contract: the annotations and labels Kausality reads and writes
// on Claims, XRs and managed resources. Every binary uses these names.
const (
	// AnnotationAllowances holds the JSON array of allowances of an object.
	AnnotationAllowances = "kausality.io/allowances"
	// AnnotationTrace holds the JSON causal chain of the object's current
	// generation.
	AnnotationTrace = "kausality.io/trace"
	// AnnotationTraceLabelPrefix starts user annotations that become labels
	// of the object's own trace hop.
	AnnotationTraceLabelPrefix = "kausality.io/trace-"
	// AnnotationAllowDelete set to "true" lets a protected object be deleted.
	AnnotationAllowDelete = "kausality.io/allow-delete"
	// AnnotationFreeze stops every gate below the object from opening.
	AnnotationFreeze = "kausality.io/freeze"
	// AnnotationMode overrides a policy's mode (Enforce or Log).
	AnnotationMode = "kausality.io/mode"
	// AnnotationBreakGlass, on the Namespace provider-kausality runs in,
	// takes Kausality's admission webhooks out of the write path until it
	// is removed: the provider deletes its dynamic webhook configurations
	// and does not write them again (docs/OPERATIONS.md, "Break-glass").
	// Its value says why. Only who may write AllowancePolicies may set it.
	AnnotationBreakGlass = "kausality.io/break-glass"
	// AnnotationControllerBuilds records which build of each controller
	// last wrote a managed resource: a JSON object of service account user
	// name to a short hash of the images of the writer's pod.
	// Admission writes it; a new build's uncaused changes need an
	// UpgradeAllowance naming the service account.
	AnnotationControllerBuilds = "kausality.io/controller-builds"
	// AnnotationCompositionRevision names the Composition revision that last
	// produced a composed resource.
	AnnotationCompositionRevision = "kausality.io/composition-revision"
	// AnnotationFunctionVersions records, as a JSON object of Function name
	// to package, the Functions of the pipeline that last produced a
	// composed resource: a new package version of any of them is a logic
	// change, like a new Composition revision.
	AnnotationFunctionVersions = "kausality.io/function-versions"
	// AnnotationInputVersions is the generation of each input (the
	// function's Input inputs: EnvironmentConfigs and other objects the
	// pipeline reads) that last produced a composed resource, a JSON object
	// of "Kind/name" (or "Kind/namespace/name") to generation, written by
	// the function.
	AnnotationInputVersions = "kausality.io/input-versions"
	// AnnotationApplied records what the function last let through for a
	// composed resource, so drift correction can be told from propagation.
	AnnotationApplied = "kausality.io/applied"
	// AnnotationComposedGeneration is the generation of its composite that
	// the function last composed a composed resource from: an allowance of
	// the composite is used up for the resource once it was composed from
	// the allowance's generation.
	AnnotationComposedGeneration = "kausality.io/composed-generation"
	// AnnotationLeftAsStored is, on a composed resource the function wrote,
	// the composite's KausalityComposed record of that run (the generation
	// and the other resources it left as stored): written with the
	// resources themselves, it outlives a reconcile that fails before
	// Crossplane writes the composite's status.
	AnnotationLeftAsStored = "kausality.io/left-as-stored"
	// AnnotationApproved records, on a gated managed resource, the spec its
	// provider was last allowed to write to the cloud: a hash per leaf, as
	// AnnotationApplied. An Update gate opens only when every field the
	// spec differs by from it is covered by an open allowance, so an open
	// gate never ships an unrelated pending change (DESIGN §4a).
	AnnotationApproved = "kausality.io/approved"
	// AnnotationApprovedGeneration is the generation whose spec
	// AnnotationApproved records. An allowance that ships the spec is used
	// up only by a generation an open gate let through: one the provider
	// observed behind a closed gate was never applied.
	AnnotationApprovedGeneration = "kausality.io/approved-generation"
	// AnnotationApprovedBefore records, beside AnnotationApproved, what the
	// approval before it held for each leaf the latest approval changed (a
	// JSON object of path to hash, "-" for a leaf it did not have). When
	// an allowance expires before its provider applied the change, the
	// approval goes back to these for the fields the change set: the
	// cloud still holds them, and the function can answer the resource
	// with them again (AnnotationPrevious).
	AnnotationApprovedBefore = "kausality.io/approved-before"
	// AnnotationPrevious records, on a gated managed resource, the value
	// each spec field had before the change in flight on it (a JSON
	// object of path to value, null for a field it did not have), as the
	// function let the change through. When that change's gate closes
	// without the provider applying it, the function answers the resource
	// with these values again, so the abandoned change neither rides
	// along with a later one nor keeps it shut (DESIGN §4a); it uses one
	// only where its hash is what the approval holds.
	AnnotationPrevious = "kausality.io/previous"
	// AnnotationAbandoned records, on a gated managed resource, the value
	// each spec field was set to by a change abandoned on it (its gate
	// closed before the provider applied it; a JSON object of path to
	// value, null for a field the change removed). While the pipeline
	// still wants that value and no cause covers it, the function says
	// why it is withheld: it did not reach the cloud. It is dropped once
	// the pipeline wants another value or a cause lets the change through.
	AnnotationAbandoned = "kausality.io/abandoned"
	// AnnotationRequestedPolicies records, on a gated managed resource, the
	// spec.managementPolicies the Composition's pipeline asked for before
	// Kausality (a JSON array; absent: none, which means "*"). The gate is
	// never wider than it (DESIGN §5): an observe-only import is never
	// created, a resource kept on deletion never deleted. The function
	// writes it; everyone who decides the gate reads it.
	AnnotationRequestedPolicies = "kausality.io/requested-policies"
	// AnnotationRolloutTurns records, on a composite, the roll-outs whose
	// turn it is (docs/PROPAGATION.md, "A roll-out across XRs"): which
	// UpgradeAllowance, at which generation, under which logic. Only the
	// provider writes it, from its watch of the fleet; the function reads
	// it instead of counting the fleet on every run.
	AnnotationRolloutTurns = "kausality.io/rollout-turns"
	// LabelGated marks managed resources whose gate Kausality manages.
	LabelGated = "kausality.io/gated"
)

// ConditionCreated is the condition the function keeps on a composite once
// it has been Ready: its creation is over. Until then what the pipeline
// adds (a resource composed once what it needs exists, a value wired from
// another resource's status) is part of the creation and needs no other
// cause; from then on it is a change like any other. Only Crossplane
// writes a composite's status (admission refuses users' status writes),
// so nobody can make a composite look as if it were still being created.
const ConditionCreated = "KausalityCreated"

// ConditionComposed is the condition the function keeps on a composite
// recording the generation it last composed from and the composed
// resources that run left as stored (allowance.Composed): an allowance of
// the composite is used up for those without a write of each.
const ConditionComposed = "KausalityComposed"

// ReasonComposed is the reason of ConditionComposed.
const ReasonComposed = "Composed"

// Condition types Kausality sets, which `kubectl kausality` reads.
const (
	// ConditionAllowed is False on a composite while the function
	// withholds a mutation of what it composes, and says which and why.
	ConditionAllowed = "KausalityAllowed"
	// ConditionPropagated is False on a composite while propagation
	// control holds a change back or a freeze keeps gates shut.
	ConditionPropagated = "Propagated"
	// ConditionRestricted is False on a composite some policy is for while
	// it composes a managed resource of a kind no policy names: Kausality
	// does not gate that resource, so its changes reach the cloud without
	// a cause.
	ConditionRestricted = "KausalityRestricted"
	// ConditionUpgraded says whether every composed resource of the XR
	// was produced by the current logic (Composition revision and
	// Function packages) and applied it. The function sets it while an
	// UpgradeAllowance paces an upgrade across XRs, its message starting
	// with the logic's key; the provider counts the fleet from it.
	ConditionUpgraded = "KausalityUpgraded"
	// ConditionGateOpen says why the gate controller keeps a gated managed
	// resource's gate shut against an allowance, or revoked it (status
	// False); a gate that does what its allowances say has none.
	ConditionGateOpen = "GateOpen"
)

// Reasons of ConditionAllowed when it is True although something would be
// withheld in Enforce mode: the message names it.
const (
	// ReasonWouldWithhold: Log mode let it into the spec; gates stay closed.
	ReasonWouldWithhold = "WouldWithhold"
	// ReasonAuditWouldWithhold: Audit mode let it through, gates and all.
	ReasonAuditWouldWithhold = "AuditWouldWithhold"
)
