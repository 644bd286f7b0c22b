package v1alpha1

import (
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recorderv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
)

// BucketSpec is the desired state of a Bucket.
type BucketSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`

	// ForProvider holds the desired settings of the external bucket, as
	// for the cluster-scoped Bucket.
	ForProvider recorderv1alpha1.BucketParameters `json:"forProvider"`
}

// BucketStatus is the observed state of a Bucket.
type BucketStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	// AtProvider holds the observed state of the external bucket.
	// +optional
	AtProvider recorderv1alpha1.BucketObservation `json:"atProvider,omitempty"`
}

// Bucket is a namespaced managed resource standing for a bucket in the
// recording test provider's in-memory cloud.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=crossplane;managed
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SIZE",type="integer",JSONPath=".spec.forProvider.size"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type Bucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BucketSpec   `json:"spec"`
	Status BucketStatus `json:"status,omitempty"`
}

// BucketList is a list of Buckets.
//
// +kubebuilder:object:root=true
type BucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Buckets of the list.
	Items []Bucket `json:"items"`
}

// GetCondition returns the condition of the supplied type.
func (b *Bucket) GetCondition(ct xpv2.ConditionType) xpv2.Condition {
	return b.Status.GetCondition(ct)
}

// SetConditions sets the supplied conditions, replacing those of the same type.
func (b *Bucket) SetConditions(c ...xpv2.Condition) {
	b.Status.SetConditions(c...)
}

// GetManagementPolicies returns spec.managementPolicies.
func (b *Bucket) GetManagementPolicies() xpv2.ManagementPolicies {
	return b.Spec.ManagementPolicies
}

// SetManagementPolicies sets spec.managementPolicies.
func (b *Bucket) SetManagementPolicies(p xpv2.ManagementPolicies) {
	b.Spec.ManagementPolicies = p
}

// GetProviderConfigReference returns spec.providerConfigRef.
func (b *Bucket) GetProviderConfigReference() *xpv2.ProviderConfigReference {
	return b.Spec.ProviderConfigReference
}

// SetProviderConfigReference sets spec.providerConfigRef.
func (b *Bucket) SetProviderConfigReference(r *xpv2.ProviderConfigReference) {
	b.Spec.ProviderConfigReference = r
}

// GetWriteConnectionSecretToReference returns spec.writeConnectionSecretToRef.
func (b *Bucket) GetWriteConnectionSecretToReference() *xpv2.LocalSecretReference {
	return b.Spec.WriteConnectionSecretToReference
}

// SetWriteConnectionSecretToReference sets spec.writeConnectionSecretToRef.
func (b *Bucket) SetWriteConnectionSecretToReference(r *xpv2.LocalSecretReference) {
	b.Spec.WriteConnectionSecretToReference = r
}
