// Package v1alpha1 holds the kausality.io API: AllowancePolicy, which maps
// changes of watched Claim/XR fields to the downstream mutations they permit,
// and UpgradeAllowance, which permits the output changes a Composition or
// controller upgrade causes.
//
// +kubebuilder:object:generate=true
// +groupName=kausality.io
// +versionName=v1alpha1
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group and version of this API.
const (
	Group   = "kausality.io"
	Version = "v1alpha1"
)

var (
	// SchemeGroupVersion is the group and version of this API.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kinds of this API, for requests that need a GVK without a typed object.
var (
	AllowancePolicyKind              = "AllowancePolicy"
	AllowancePolicyGroupVersionKind  = SchemeGroupVersion.WithKind(AllowancePolicyKind)
	UpgradeAllowanceKind             = "UpgradeAllowance"
	UpgradeAllowanceGroupVersionKind = SchemeGroupVersion.WithKind(UpgradeAllowanceKind)
)

func init() {
	SchemeBuilder.Register(&AllowancePolicy{}, &AllowancePolicyList{}, &UpgradeAllowance{}, &UpgradeAllowanceList{})
}
