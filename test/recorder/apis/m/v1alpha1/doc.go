// Package v1alpha1 holds the recorder.m.kausality.io test API: Bucket, a
// namespaced managed resource in the shape Crossplane v2 providers serve
// their kinds (a ".m." API group, a typed provider config reference, local
// connection secrets), reconciled by the recording test provider next to
// the cluster-scoped recorder.kausality.io Bucket.
//
// +kubebuilder:object:generate=true
// +groupName=recorder.m.kausality.io
// +versionName=v1alpha1
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group and version of this API.
const (
	Group   = "recorder.m.kausality.io"
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
