package envtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	kadmission "github.com/kausality-io/kausality-crossplane/provider/admission"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// BenchmarkClaimUpdate measures the Composites webhook on a Claim update
// under the suite's three DatabaseClaim policies, read from the provider's
// informer cache as in production. The reference is the floor of any
// mutating webhook on the same request: decoding both objects, encoding
// the result and computing the JSON patch.
func BenchmarkClaimUpdate(b *testing.B) {
	old := object("DatabaseClaim", "team-a", "bench", map[string]any{"size": "small", "engine": "postgres", "tags": map[string]any{"team": "a"}},
		map[string]string{"jira": "INFRA-7"})
	old.SetGeneration(3)
	old.Object["status"] = map[string]any{"observedGeneration": int64(3)} // reconciled: steady, not initializing
	obj := old.DeepCopy()
	obj.Object["spec"].(map[string]any)["size"] = "large"
	oldRaw, _ := json.Marshal(old.Object)
	objRaw, _ := json.Marshal(obj.Object)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "bench", Operation: admissionv1.Update, Name: "bench", Namespace: "team-a",
		Kind:      metav1.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "DatabaseClaim"},
		Resource:  metav1.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "databaseclaims"},
		UserInfo:  authenticationv1.UserInfo{Username: alice, Groups: []string{"platform-team", "system:authenticated"}},
		Object:    runtime.RawExtension{Raw: objRaw},
		OldObject: runtime.RawExtension{Raw: oldRaw},
	}}
	h := &kadmission.Composites{Policies: provider.GetClient(), Reader: provider.GetAPIReader(), Cache: policy.NewCache(),
		Trusted: admit.Writers{Provider: "provider", Crossplane: crossplane}, Now: time.Now}
	ctx := context.Background()
	// Wait for the informer to hold the policies, and check the handler
	// does the work being measured.
	fixture.Eventually(b, 30*time.Second, "an allowance-earning response", func() (bool, string) {
		r := h.Handle(ctx, req)
		return r.Allowed && len(r.Patches) > 0, fmt.Sprintf("allowed %v, %d patches, %v", r.Allowed, len(r.Patches), r.Result)
	})

	b.Run("impl=handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := h.Handle(ctx, req); !r.Allowed {
				b.Fatal(r.Result.Message)
			}
		}
	})
	b.Run("impl=reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var o, n map[string]any
			if err := json.Unmarshal(oldRaw, &o); err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal(objRaw, &n); err != nil {
				b.Fatal(err)
			}
			n["metadata"].(map[string]any)["annotations"].(map[string]any)["x"] = "y"
			raw, _ := json.Marshal(n)
			if r := admission.PatchResponseFromRaw(objRaw, raw); len(r.Patches) == 0 {
				b.Fatal("no patch")
			}
		}
	})
}
