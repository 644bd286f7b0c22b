package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpgradeAllowanceSpec is the desired state of an UpgradeAllowance.
type UpgradeAllowanceSpec struct {
	// ServiceAccount names a controller, Crossplane or a provider, as its
	// service account's full user name, e.g.
	// system:serviceaccount:crossplane-system:crossplane: a new build of it
	// (the images of the pod its requests come from, recorded per resource
	// in kausality.io/controller-builds) may make the spec changes the
	// policies cover and no allowance ships.
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
	// Inputs names changes of objects outside the XR that the pipeline
	// reads (the function's Input inputs, e.g. an EnvironmentConfig) whose
	// changed output is allowed: a composed resource last produced from
	// another generation of the input (annotation
	// kausality.io/input-versions) may change within Policies.
	// +optional
	Inputs []InputVersion `json:"inputs,omitempty"`
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

// InputVersion names a change of an input of the pipeline.
type InputVersion struct {
	// Kind of the input, e.g. EnvironmentConfig.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the input.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of a namespaced input.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Generation the input must have now (metadata.generation); 0 or
	// omitted allows any generation.
	// +optional
	Generation int64 `json:"generation,omitempty"`
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
	CompiledStatus `json:",inline"`
	// Upgraded counts the gated managed resources whose current change it
	// let through: their trace starts at it.
	// +optional
	Upgraded int64 `json:"upgraded,omitempty"`
	// Waiting counts the gated managed resources holding an unconsumed
	// allowance it roots: their gate is open for it, or the change is held
	// back by propagation control, a freeze or an uncovered field.
	// +optional
	Waiting int64 `json:"waiting,omitempty"`
	// Rollout is how far its roll-out across composites has come, as the
	// provider last counted the fleet; empty without spec.rollout.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// RolloutStatus counts an UpgradeAllowance's roll-out over every fleet
// it paces (the composites of one kind, Composition revision and
// namespace that run the same new logic).
type RolloutStatus struct {
	// Composites counts the fleets' members.
	Composites int64 `json:"composites"`
	// Updated counts those that applied the upgrade and are Ready.
	Updated int64 `json:"updated"`
	// Turns counts those whose turn it is (kausality.io/rollout-turns),
	// updated or not.
	Turns int64 `json:"turns"`
	// Message says what holds the roll-out, if anything.
	// +optional
	Message string `json:"message,omitempty"`
}

// UpgradeAllowanceList is a list of UpgradeAllowances.
// +kubebuilder:object:root=true
type UpgradeAllowanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UpgradeAllowance `json:"items"`
}
