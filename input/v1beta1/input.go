// Package v1beta1 holds the input of the kausality composition function.
//
// +kubebuilder:object:generate=true
// +groupName=kausality.fn.crossplane.io
// +versionName=v1beta1
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode says whether the function withholds or only reports what no allowance
// covers.
// +kubebuilder:validation:Enum=Enforce;Log
type Mode string

// Modes.
const (
	// ModeEnforce withholds every mutation no allowance covers.
	ModeEnforce Mode = "Enforce"
	// ModeLog lets every mutation through and reports what Enforce would
	// withhold, so a platform team can roll Kausality out safely.
	ModeLog Mode = "Log"
)

// Input configures the kausality step of a Composition pipeline. Every field
// is optional; the defaults are the safe choice.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=crossplane
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Mode Enforce (default) withholds uncovered mutations; Log only reports
	// them.
	// +optional
	Mode Mode `json:"mode,omitempty"`

	// ReadOnlyPolicies is the closed gate: the managementPolicies a gated
	// managed resource has while no allowance opens it. Default
	// [Observe, LateInitialize]. Only sets crossplane-runtime supports are
	// accepted.
	// +optional
	ReadOnlyPolicies []string `json:"readOnlyPolicies,omitempty"`

	// MaxGateOpen is how long a gate may stay open for one allowance before
	// it counts as closed, e.g. 30m. Default 1h.
	// +optional
	MaxGateOpen *metav1.Duration `json:"maxGateOpen,omitempty"`

	// Propagation paces permitted changes through the composed resources.
	// Without it a permitted change reaches every resource at once.
	// +optional
	Propagation *Propagation `json:"propagation,omitempty"`

	// Inputs are the objects outside the XR whose content the pipeline
	// reads (the EnvironmentConfigs function-environment-configs selects,
	// say). The function reads each as a required resource and records its
	// generation on every composed resource (kausality.io/input-versions):
	// a change it then makes is a logic change caused by that input,
	// reported naming it and let through as far as an UpgradeAllowance
	// naming the input covers it.
	// +optional
	Inputs []InputRef `json:"inputs,omitempty"`
}

// InputRef names an object the pipeline reads.
type InputRef struct {
	// APIVersion of the object, e.g. apiextensions.crossplane.io/v1beta1.
	APIVersion string `json:"apiVersion"`
	// Kind of the object, e.g. EnvironmentConfig.
	Kind string `json:"kind"`
	// Name of the object.
	Name string `json:"name"`
	// Namespace of a namespaced object; empty for a cluster-scoped one.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Propagation paces a permitted change through the composed resources
// (DESIGN §6): a change reaches a resource only once all of its
// propagateWhen expressions hold; until then the resource keeps its
// observed spec and a closed gate, and carries the change as a pending
// allowance.
type Propagation struct {
	// Resources sets propagateWhen for single composed resources, by
	// composition resource name. A resource named here and matched by a
	// collection must pass both.
	// +optional
	// +listType=map
	// +listMapKey=name
	Resources []ResourcePropagation `json:"resources,omitempty"`

	// Collections are sets of composed resources rolled out in batches.
	// +optional
	// +listType=map
	// +listMapKey=name
	Collections []Collection `json:"collections,omitempty"`

	// Blockers are objects that halt every change propagation control
	// paces while they exist and their when holds: an alarm, a release
	// blocker. Each is also a CEL variable of the propagateWhen
	// expressions, by its name (null while it does not exist).
	// +optional
	// +listType=map
	// +listMapKey=name
	Blockers []Blocker `json:"blockers,omitempty"`
}

// ResourcePropagation is the propagateWhen of one composed resource.
type ResourcePropagation struct {
	// Name is the composition resource name.
	Name string `json:"name"`

	// PropagateWhen are CEL expressions that must all be true for a change
	// to reach the resource. Variables: item (the resource as observed,
	// with updated() and ready()), xr, now, and each blocker. Default [].
	PropagateWhen []string `json:"propagateWhen,omitempty"`
}

// Collection is a set of composed resources that take a change in batches.
type Collection struct {
	// Name is the collection's CEL variable: its members in roll-out order.
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// MatchResourceName selects members by composition resource name, a
	// shell pattern such as pool-*.
	// +optional
	MatchResourceName string `json:"matchResourceName,omitempty"`

	// MatchLabels selects members by the labels the pipeline gives them.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// PropagateWhen are CEL expressions that must all be true for a change
	// to reach a member. Variables: item (the member), the collection by
	// its name, xr, now, and each blocker. Default
	// [exponentiallyUpdated(item, <name>)].
	// +optional
	PropagateWhen []string `json:"propagateWhen,omitempty"`
}

// Blocker is an object whose existence halts propagation.
type Blocker struct {
	// Name is the blocker's CEL variable.
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// APIVersion and Kind of the object.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	// MatchName is the object's name.
	MatchName string `json:"matchName"`

	// Namespace of the object; default the XR's namespace for a
	// namespaced XR. Leave empty for cluster-scoped kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// When is a CEL expression over object (the blocker) that says
	// whether it blocks now; default true: it blocks while it exists.
	// +optional
	When string `json:"when,omitempty"`
}
