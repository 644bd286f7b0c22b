package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree/treetest"
)

func TestListed(t *testing.T) {
	claimKind := schema.GroupKind{Group: "example.org", Kind: "DatabaseClaim"}
	legacy := func(ns string) *unstructured.Unstructured {
		return treetest.Obj("example.org/v1alpha1", "XDatabase", "", "orders-x7", map[string]any{"spec": map[string]any{
			"claimRef": map[string]any{"apiVersion": "example.org/v1alpha1", "kind": "DatabaseClaim", "namespace": ns, "name": "orders"},
		}})
	}
	cases := map[string]struct {
		reason    string
		o         *unstructured.Unstructured
		namespace string
		kinds     map[schema.GroupKind]bool
		want      bool
	}{
		"Namespaced":        {reason: "A namespaced object was listed in its namespace.", o: treetest.Bucket("b", "data"), namespace: "team-a", want: true},
		"ClaimListed":       {reason: "A legacy XR whose Claim's kind a policy names is listed under its Claim.", o: legacy("team-a"), namespace: "team-a", kinds: map[schema.GroupKind]bool{claimKind: true}, want: false},
		"ClaimNotListed":    {reason: "A legacy XR whose Claim's kind no policy names is listed itself.", o: legacy("team-a"), namespace: "team-a", want: true},
		"OtherNamespace":    {reason: "A legacy XR of a Claim in another namespace is not listed.", o: legacy("team-b"), namespace: "team-a", want: false},
		"AllNamespaces":     {reason: "Across all namespaces a legacy XR is listed by its Claim's namespace rule alone.", o: legacy("team-b"), want: true},
		"NoClaimNamespaced": {reason: "A cluster-scoped XR without a Claim is in no namespace.", o: treetest.Obj("example.org/v1alpha1", "XDatabase", "", "lone", map[string]any{}), namespace: "team-a", want: false},
		"NoClaimAll":        {reason: "It is listed across all namespaces.", o: treetest.Obj("example.org/v1alpha1", "XDatabase", "", "lone", map[string]any{}), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := listed(tc.o, tc.namespace, tc.kinds); got != tc.want {
				t.Errorf("%s\nlisted(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
