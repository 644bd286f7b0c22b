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
}
