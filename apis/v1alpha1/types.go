package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode says whether a policy denies or only reports what it does not permit.
// +kubebuilder:validation:Enum=Enforce;Log
type Mode string

// Modes.
const (
	// ModeEnforce denies (admission) or withholds (function) what no rule permits.
	ModeEnforce Mode = "Enforce"
	// ModeLog lets everything through and reports what Enforce would stop.
	ModeLog Mode = "Log"
)

// DriftPolicy says whether the composition may correct drift on a composed
// resource: a field the pipeline still wants as it wanted last time, while the
// observed resource differs (a hand edit, or an outside change).
// +kubebuilder:validation:Enum=Allow;Deny
type DriftPolicy string

// Drift policies.
const (
	DriftAllow DriftPolicy = "Allow"
	DriftDeny  DriftPolicy = "Deny"
)

// Relation says what a policy entry bounds: a Kubernetes child object the
// controller writes, or the external system behind a managed resource.
// +kubebuilder:validation:Enum=ControllerChild;External
type Relation string

// Relations.
const (
	RelationControllerChild Relation = "ControllerChild"
	RelationExternal        Relation = "External"
)

// SubjectKind is the RBAC kind of a subject.
// +kubebuilder:validation:Enum=User;Group;ServiceAccount
type SubjectKind string

// Subject kinds.
const (
	SubjectUser           SubjectKind = "User"
	SubjectGroup          SubjectKind = "Group"
	SubjectServiceAccount SubjectKind = "ServiceAccount"
)

// Object verbs of a ControllerChild entry, and the Crossplane verbs of an
// External entry. External verbs are free-form for other systems.
const (
	VerbCreate = "Create"
	VerbUpdate = "Update"
	VerbDelete = "Delete"
	VerbAll    = "*"
)

// GrantsVerb reports whether a verbs list grants verb, directly or through
// "*". Allowances, policy entries and bounds all read verbs this way.
func GrantsVerb(verbs []string, verb string) bool {
	return slices.Contains(verbs, verb) || slices.Contains(verbs, VerbAll)
}

// MutationVerb is a field-level operation on a child object.
// +kubebuilder:validation:Enum=Insert;Delete;Mutate;"*"
type MutationVerb string

// Mutation verbs.
const (
	// MutationInsert adds a field, map key or array item.
	MutationInsert MutationVerb = "Insert"
	// MutationDelete removes a field, map key or array item.
	MutationDelete MutationVerb = "Delete"
	// MutationMutate changes an existing value.
	MutationMutate MutationVerb = "Mutate"
	// MutationAll is any of the above.
	MutationAll MutationVerb = "*"
)

// ObjectKind names the kind a policy applies to, fully qualified.
type ObjectKind struct {
	// APIGroup of the kind, empty for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// APIVersion of the kind, e.g. v1alpha1. Empty matches every version.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind, singular CamelCase, e.g. DatabaseClaim.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// Subject is someone who may change a watched object: RBAC conventions.
type Subject struct {
	// Kind of subject.
	Kind SubjectKind `json:"kind"`
	// Name of the user, group or service account.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of a ServiceAccount.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// MayInitiate lets this subject start a new allowance chain, not only
	// propagate one that exists on a parent.
	// +optional
	MayInitiate bool `json:"mayInitiate,omitempty"`
}

// Target identifies what a policy entry bounds: a child GVR for
// ControllerChild, or an external resource type for External.
type Target struct {
	// APIGroup of the child resource.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// APIVersion of the child resource. Empty matches every version.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// Resource is the plural, lowercase resource name, e.g. rdsinstances.
	// +optional
	Resource string `json:"resource,omitempty"`
	// External identifies an external resource type (relation External).
	// Kausality matches the keys apiGroup, kind and resource against the
	// managed resource; other keys (provider, service, ...) describe the
	// target for people and are carried into traces unchanged.
	// +optional
	External map[string]string `json:"external,omitempty"`
}

// MutationBound permits field-level operations under a path.
type MutationBound struct {
	// JSONPath of the field, in crossplane-runtime fieldpath syntax with [*]
	// wildcards, e.g. spec.forProvider.tags[*]. "*" matches every field.
	// +kubebuilder:validation:MinLength=1
	JSONPath string `json:"jsonPath"`
	// Verbs permitted on the field.
	// +kubebuilder:validation:MinItems=1
	Verbs []MutationVerb `json:"verbs"`
}

// PolicyEntry is an upper bound for one target. The union of all entries
// matching a target is its bound; a target no entry names is unrestricted.
type PolicyEntry struct {
	// Target bounded by this entry.
	Target Target `json:"target"`
	// Relation between the policy's object and the target.
	// +kubebuilder:default=ControllerChild
	// +optional
	Relation Relation `json:"relation,omitempty"`
	// Verbs permitted on the target object (ControllerChild: Create, Update,
	// Delete; External: the provider's verbs, for Crossplane Create, Update,
	// Delete); "*" permits all.
	// +optional
	Verbs []string `json:"verbs,omitempty"`
	// Mutations permitted when Verbs include Update (ControllerChild only).
	// Omitted permits every field mutation.
	// +optional
	Mutations []MutationBound `json:"mutations,omitempty"`
}

// InitializingPhase bounds what may happen before the object's first
// successful reconcile.
type InitializingPhase struct {
	// When is a CEL expression over object that is true while the object is
	// initializing. Default: the object has no observed generation, neither
	// at status.observedGeneration nor on its Synced condition.
	// +optional
	When string `json:"when,omitempty"`
	// Policies bounding operations during initialization. Empty: unrestricted.
	// +optional
	Policies []PolicyEntry `json:"policies,omitempty"`
}

// DeletingPhase bounds what may happen while the object is being deleted.
type DeletingPhase struct {
	// Policies bounding operations during deletion. Empty: unrestricted.
	// +optional
	Policies []PolicyEntry `json:"policies,omitempty"`
}

// Rule maps a change of a trigger field to the downstream operations it
// permits.
type Rule struct {
	// Trigger is the path of the watched field, [*] matches any index.
	// +kubebuilder:validation:MinLength=1
	Trigger string `json:"trigger"`
	// Conditions are CEL expressions over object and oldObject that must
	// all be true for the rule to permit the change.
	// +optional
	Conditions []string `json:"conditions,omitempty"`
	// Capture lists paths whose values are recorded in the trace as
	// attestations, e.g. metadata.annotations[jira].
	// +optional
	Capture []string `json:"capture,omitempty"`
	// Policies permitted by a change of the trigger. Empty: unrestricted.
	// +optional
	Policies []PolicyEntry `json:"policies,omitempty"`
}

// AllowancePolicySpec is the desired state of an AllowancePolicy.
type AllowancePolicySpec struct {
	// For is the kind of object (a Claim or XR) this policy watches.
	For ObjectKind `json:"for"`
	// Subjects who may change the object; mayInitiate lets them start a chain.
	// +optional
	Subjects []Subject `json:"subjects,omitempty"`
	// Initializing bounds operations before the first successful reconcile.
	// +optional
	Initializing *InitializingPhase `json:"initializing,omitempty"`
	// Deleting bounds operations while the object is being deleted.
	// +optional
	Deleting *DeletingPhase `json:"deleting,omitempty"`
	// Rules map trigger fields to permitted downstream operations.
	// +optional
	Rules []Rule `json:"rules,omitempty"`
	// Mode Enforce denies or withholds what no rule permits; Log reports it.
	// +kubebuilder:default=Enforce
	// +optional
	Mode Mode `json:"mode,omitempty"`
	// Drift says whether the composition may correct drift on composed
	// resources of this object.
	// +kubebuilder:default=Deny
	// +optional
	Drift DriftPolicy `json:"drift,omitempty"`
	// Priority orders policies that apply to the same kind: higher first.
	// Equal priorities are ordered by name.
	// +optional
	Priority int32 `json:"priority,omitempty"`
	// DeletionProtection requires the annotation kausality.io/allow-delete:
	// "true" before an object of this kind may be deleted.
	// +optional
	DeletionProtection bool `json:"deletionProtection,omitempty"`
}

// PolicyStatus is the observed state of a policy.
type PolicyStatus struct {
	// Conditions: Ready says whether every CEL expression and path compiled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ConditionReady is the condition type that says a policy compiled.
const ConditionReady = "Ready"

// An AllowancePolicy maps changes of a Claim's or XR's watched fields to the
// downstream mutations they permit.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kausality,shortName=ap
// +kubebuilder:printcolumn:name="FOR",type=string,JSONPath=".spec.for.kind"
// +kubebuilder:printcolumn:name="MODE",type=string,JSONPath=".spec.mode"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type AllowancePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AllowancePolicySpec `json:"spec"`
	Status PolicyStatus        `json:"status,omitempty"`
}

// AllowancePolicyList is a list of AllowancePolicies.
// +kubebuilder:object:root=true
type AllowancePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AllowancePolicy `json:"items"`
}

// UpgradeAllowanceSpec is the desired state of an UpgradeAllowance.
type UpgradeAllowanceSpec struct {
	// ServiceAccount whose new controller version may make the changes,
	// as the full user name, e.g.
	// system:serviceaccount:crossplane-system:crossplane.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// CompositionRevisions names the Composition revisions whose changed
	// output is allowed: a composed resource last produced by another
	// revision (annotation kausality.io/composition-revision) may change
	// within Policies when it is produced by one of these. A trailing *
	// matches a prefix, e.g. xdatabases-aws-*.
	// +optional
	CompositionRevisions []string `json:"compositionRevisions,omitempty"`
	// Compositions names Composition revisions by the Composition's name
	// and the revision's number (spec.revision of the CompositionRevision):
	// on a cluster, revision names are hashes nobody types.
	// +optional
	Compositions []CompositionRevisionRef `json:"compositions,omitempty"`
	// Functions names Function upgrades whose changed output is allowed: a
	// composed resource last produced with another package of a Function
	// of its pipeline (annotation kausality.io/function-versions) may
	// change within Policies when the new package's version matches. When
	// a composed resource's logic changed in several ways (a new revision
	// and a new Function, say), one UpgradeAllowance must name every one.
	// +optional
	Functions []FunctionVersion `json:"functions,omitempty"`
	// Policies bound the changes the upgrade may make.
	// +kubebuilder:validation:MinItems=1
	Policies []PolicyEntry `json:"policies"`
	// Rollout paces the upgrade across the composites of its Composition
	// revision: a composite takes it only when PropagateWhen holds.
	// Without it every composite takes the upgrade at once.
	// +optional
	Rollout *UpgradeRollout `json:"rollout,omitempty"`
}

// UpgradeRollout paces an upgrade across composites.
type UpgradeRollout struct {
	// PropagateWhen are CEL expressions that must all hold for a composite
	// to take the upgrade, in the dialect of propagation control (Input
	// propagation): xr is the composite, xrs the composites of the same
	// kind on the same Composition revision in name order, each a member
	// whose updated() says it applied the upgrade and ready() that it is
	// Ready, and now the time. Default: [exponentiallyUpdated(xr, xrs)],
	// one composite, then two, then four, each batch after the one before
	// it applied the upgrade and is Ready.
	// +optional
	PropagateWhen []string `json:"propagateWhen,omitempty"`
	// Blockers halt the roll-out while they exist (or while their when
	// holds): an alarm, say. They are the blockers of propagation control
	// (Input propagation.blockers), read by the function as required
	// resources; one that cannot be read blocks.
	// +optional
	Blockers []RolloutBlocker `json:"blockers,omitempty"`
}

// A RolloutBlocker is an object whose existence halts a roll-out.
type RolloutBlocker struct {
	// Name names the blocker in messages.
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	Name string `json:"name"`
	// APIVersion and Kind of the object.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// MatchName is the object's name.
	MatchName string `json:"matchName"`
	// Namespace of the object; default the XR's namespace for a namespaced
	// XR. Leave empty for cluster-scoped kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// When is a CEL expression over object (the blocker) that says whether
	// it blocks now; default true: it blocks while it exists.
	// +optional
	When string `json:"when,omitempty"`
}

// A CompositionRevisionRef names a Composition revision by its
// Composition and number.
type CompositionRevisionRef struct {
	// Name of the Composition.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Revision is the CompositionRevision's spec.revision.
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`
}

// A FunctionVersion names the versions of one Function an upgrade may move
// to.
type FunctionVersion struct {
	// Name of the Function, as the Composition's pipeline references it
	// (functionRef.name).
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Version the Function's new package must have: its tag, or its digest.
	// * matches any run of characters, so v0.10.* matches every patch
	// release of v0.10.
	// +kubebuilder:validation:MinLength=1
	Version string `json:"version"`
}

// An UpgradeAllowance permits the output changes that a new Composition
// revision or controller version makes while no user changed anything.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kausality,shortName=ua
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="UPGRADED",type=integer,JSONPath=".status.upgraded"
// +kubebuilder:printcolumn:name="WAITING",type=integer,JSONPath=".status.waiting"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type UpgradeAllowance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UpgradeAllowanceSpec   `json:"spec"`
	Status UpgradeAllowanceStatus `json:"status,omitempty"`
}

// UpgradeAllowanceStatus is the observed state of an UpgradeAllowance: the
// Ready condition says whether it compiled, and the counts what it reached
// among gated managed resources, as the provider last looked.
type UpgradeAllowanceStatus struct {
	PolicyStatus `json:",inline"`
	// Upgraded counts the gated managed resources whose current change it
	// let through: their trace starts at it.
	// +optional
	Upgraded int64 `json:"upgraded,omitempty"`
	// Waiting counts the gated managed resources holding an unconsumed
	// allowance it roots: their gate is open for it, or the change is held
	// back by propagation control, a freeze or an uncovered field.
	// +optional
	Waiting int64 `json:"waiting,omitempty"`
}

// UpgradeAllowanceList is a list of UpgradeAllowances.
// +kubebuilder:object:root=true
type UpgradeAllowanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UpgradeAllowance `json:"items"`
}
