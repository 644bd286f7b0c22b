package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode says whether a policy denies or only reports what it does not permit.
// +kubebuilder:validation:Enum=Enforce;Log;Audit
type Mode string

// Modes.
const (
	// ModeEnforce denies (admission) or withholds (function) what no rule permits.
	ModeEnforce Mode = "Enforce"
	// ModeLog lets everything through admission and the function and
	// reports what Enforce would stop; gates still close, so what Enforce
	// would withhold does not reach the cloud.
	ModeLog Mode = "Log"
	// ModeAudit closes no gate and refuses nothing: composed managed
	// resources keep the management policies their Composition gives them,
	// and Kausality only reports what Enforce would withhold or deny. The
	// way to adopt Kausality on a running cluster before enforcing it.
	ModeAudit Mode = "Audit"
)

// Stricter reports whether m stops more than o: Enforce, then Log, then
// Audit.
func (m Mode) Stricter(o Mode) bool { return m.rank() > o.rank() }

func (m Mode) rank() int {
	switch m {
	case ModeAudit:
		return 0
	case ModeLog:
		return 1
	default:
		return 2
	}
}

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
	// Mode Enforce denies or withholds what no rule permits; Log reports it
	// and still closes gates; Audit reports it and closes no gate.
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

// CompiledStatus says whether an object's CEL and paths compiled.
type CompiledStatus struct {
	// Conditions: Ready says whether every CEL expression and path compiled
	// (and, on an AllowancePolicy, every target resolved).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// PolicyStatus is the observed state of an AllowancePolicy.
type PolicyStatus struct {
	CompiledStatus `json:",inline"`
	// Targets are the resources the policy's targets name, as the API
	// server serves them: the provider resolves each apiGroup and resource
	// through its CustomResourceDefinition (or discovery, for built-in
	// kinds). The function and admission match composed resources by the
	// kind recorded here, never by a guessed plural; a target missing here
	// is unresolved, and every kind of its apiGroup counts as restricted
	// until it resolves (fail closed).
	// +listType=map
	// +listMapKey=apiGroup
	// +listMapKey=resource
	// +optional
	Targets []ResolvedTarget `json:"targets,omitempty"`
}

// ResolvedTarget is one resource a policy's targets name, as the API server
// serves it.
type ResolvedTarget struct {
	// APIGroup of the resource, as the target names it.
	APIGroup string `json:"apiGroup"`
	// Resource is the plural, as the target names it.
	Resource string `json:"resource"`
	// Kind the API server serves the resource as.
	Kind string `json:"kind"`
	// Versions the API server serves, sorted.
	// +optional
	Versions []string `json:"versions,omitempty"`
	// Namespaced says whether objects of the kind live in namespaces.
	// +optional
	Namespaced bool `json:"namespaced,omitempty"`
	// Categories of the kind's CRD: "managed" for a managed resource,
	// "composite" for an XR. A composite is never gated.
	// +optional
	Categories []string `json:"categories,omitempty"`
}

// ConditionReady is the condition type that says a policy compiled and
// every target resolved.
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
