package envtest

// How the webhooks are registered: dry runs, the rules naming only policy
// kinds, the deletion webhook's fallback.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	kadmission "github.com/kausality-io/kausality-crossplane/provider/admission"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

func TestDryRunHasNoSideEffects(t *testing.T) {
	ctx := context.Background()
	namespace(t, "team-c")
	waitForRules(t, "databaseclaims")
	aliceC := as(t, alice, "platform-team")
	claim := object("DatabaseClaim", "team-c", "dry", map[string]any{"size": "small"}, map[string]string{"jira": "INFRA-3"})
	if err := aliceC.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	reconciled(t, claim)

	dry := claim.DeepCopy()
	_ = unstructured.SetNestedField(dry.Object, "large", "spec", "size")
	if err := aliceC.Update(ctx, dry, client.DryRunAll); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if len(fixture.Allowances(t, dry)) != 1 {
		t.Errorf("the dry run's answer has allowances %v, want the one the change would earn", fixture.Allowances(t, dry))
	}
	stored := claim.DeepCopy()
	if err := aliceC.Get(ctx, client.ObjectKeyFromObject(stored), stored); err != nil {
		t.Fatal(err)
	}
	if len(fixture.Allowances(t, stored)) != 0 || stored.GetGeneration() != claim.GetGeneration() {
		t.Errorf("a dry run left allowances %v at generation %d on the stored Claim", fixture.Allowances(t, stored), stored.GetGeneration())
	}
}

func TestWebhookRulesNameOnlyPolicyKinds(t *testing.T) {
	ctx := context.Background()
	waitForRules(t, "databaseclaims")
	waitForRules(t, "xdatabases")
	waitForRules(t, "buckets")
	kube := as(t, "admin")
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := kube.Get(ctx, client.ObjectKey{Name: policycontroller.DynamicName}, m); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, h := range m.Webhooks {
		for _, r := range h.Rules {
			for _, f := range slices.Concat(r.APIGroups, r.APIVersions, r.Resources) {
				if f == "*" || strings.Contains(f, "*") {
					t.Errorf("webhook %s has a wildcard rule %+v", h.Name, r.Rule)
				}
			}
			got[h.Name] = append(got[h.Name], r.Resources...)
		}
		if h.SideEffects == nil || *h.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("webhook %s does not declare sideEffects None", h.Name)
		}
	}
	if c := got["composites.kausality.io"]; !slices.Contains(c, "databaseclaims") || !slices.Contains(c, "xdatabases") || len(c) != 2 {
		t.Errorf("composites webhook resources = %v, want exactly databaseclaims and xdatabases", c)
	}
	// Exactly the managed kinds the recording provider's package installs
	// (its Buckets, cluster-scoped and namespaced, and the real provider
	// kinds of the corpus), one rule per group.
	files, err := filepath.Glob(filepath.Join("..", "recorder", "package", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f) //nolint:gosec // the recording provider's own CRDs
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatal(err)
		}
		want[crd.Spec.Group] = append(want[crd.Spec.Group], crd.Spec.Names.Plural)
	}
	gotByGroup := map[string][]string{}
	for _, h := range m.Webhooks {
		if h.Name == "managed.kausality.io" {
			for _, r := range h.Rules {
				for _, g := range r.APIGroups {
					gotByGroup[g] = append(gotByGroup[g], r.Resources...)
				}
			}
		}
	}
	for _, m := range []map[string][]string{want, gotByGroup} {
		for _, rs := range m {
			slices.Sort(rs)
		}
	}
	if diff := cmp.Diff(want, gotByGroup); diff != "" {
		t.Errorf("managed webhook resources by group: -want, +got:\n%s", diff)
	}
}

// TestDeletionWebhookFallback calls the deletion webhook the way the API
// server would if it had no ValidatingAdmissionPolicy, with the policies
// read from the provider's cache.
func TestDeletionWebhookFallback(t *testing.T) {
	h := &kadmission.Deletion{Policies: provider.GetClient(), Cache: policy.NewCache()}
	xr := object("XDatabase", "", "fallback", map[string]any{"size": "small"}, nil)
	req := func(o *unstructured.Unstructured) admission.Request {
		raw, _ := json.Marshal(o.Object)
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "del", Operation: admissionv1.Delete, Name: o.GetName(),
			Kind:      metav1.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XDatabase"},
			UserInfo:  authenticationv1.UserInfo{Username: alice},
			OldObject: runtime.RawExtension{Raw: raw},
		}}
	}
	fixture.Eventually(t, 20e9, "the webhook to deny an unannotated delete", func() (bool, string) {
		r := h.Handle(context.Background(), req(xr))
		return !r.Allowed, r.Result.String()
	})
	r := h.Handle(context.Background(), req(xr))
	want := policy.DeletionMessage("XDatabase fallback", []string{"xdatabases"})
	if r.Result.Message != want {
		t.Errorf("denial = %q, want %q", r.Result.Message, want)
	}
	xr.SetAnnotations(map[string]string{v1alpha1.AnnotationAllowDelete: "true"})
	if r := h.Handle(context.Background(), req(xr)); !r.Allowed {
		t.Errorf("with allow-delete the webhook still denies: %s", r.Result.Message)
	}
}
