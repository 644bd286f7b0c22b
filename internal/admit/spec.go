package admit

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// LateInitialized reports whether user's write is a provider's late
// initialization: by a provider's service account, and only filling spec
// fields that were unset. It is the provider's bookkeeping, no hand edit;
// anything more a provider writes is checked like one.
func (t Writers) LateInitialized(user string, old, obj *unstructured.Unstructured) bool {
	if old == nil || !t.Controller(user) {
		return false
	}
	return !slices.ContainsFunc(mutation.Diff("spec", SpecBeyondGate(old), SpecBeyondGate(obj)), func(m mutation.Mutation) bool { return m.Verb != v1alpha1.MutationInsert })
}

// SpecChanged reports whether a write changes the spec beyond the gate,
// which Kausality owns.
func SpecChanged(old, obj *unstructured.Unstructured) bool {
	return !equality.Semantic.DeepEqual(SpecBeyondGate(old), SpecBeyondGate(obj))
}

// SpecBeyondGate is a copy of o's spec without managementPolicies.
func SpecBeyondGate(o *unstructured.Unstructured) map[string]any {
	spec, _, _ := unstructured.NestedMap(o.Object, "spec")
	delete(spec, "managementPolicies")
	return spec
}
