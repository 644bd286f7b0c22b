// Package v1alpha1 holds the recorder.kausality.io test API: Bucket, a
// cluster-scoped managed resource reconciled by the recording test provider.
//
// +kubebuilder:object:generate=true
// +groupName=recorder.kausality.io
// +versionName=v1alpha1
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group and version of this API.
const (
	Group   = "recorder.kausality.io"
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

// Kinds of this API.
var (
	// BucketKind is the kind of Bucket.
	BucketKind = "Bucket"
	// BucketGroupVersionKind is the group, version and kind of Bucket.
	BucketGroupVersionKind = SchemeGroupVersion.WithKind(BucketKind)
)

func init() {
	SchemeBuilder.Register(&Bucket{}, &BucketList{})
}
