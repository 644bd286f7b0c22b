package envtest

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// TestBobCannotRetargetOrForgeStatus: Bob has what crossplane-edit grants,
// status subresources included. Through the real API server he can neither
// point a gated Bucket at another cloud resource (external-name) or away
// from its composite (controller reference), nor write the status
// Kausality reads as fact, on the Bucket or on the XDatabase; the
// recording provider and Crossplane write the same status unhindered.
func TestBobCannotRetargetOrForgeStatus(t *testing.T) {
	ctx := context.Background()
	waitForRules(t, "xdatabases")
	waitForRules(t, "buckets")
	aliceC, cp, bobC := as(t, alice, "platform-team"), as(t, crossplane, "system:serviceaccounts"), as(t, bob)

	cloud.Put("victim-db", recorder.State{Size: 9, Region: "us"})
	xr := object("XDatabase", "", "retarget-x", map[string]any{"size": "1"}, nil)
	if err := aliceC.Create(ctx, xr); err != nil {
		t.Fatal(err)
	}
	reconciled(t, xr)
	b := bucket("retarget-1", 1, xr)
	if err := cp.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitReconciled(t, cp, b)

	deniedAs := func(what, want string, err error) {
		t.Helper()
		if !kerrors.IsForbidden(err) || !contains(err, want) {
			t.Errorf("%s: got %v, want a denial containing %q", what, err, want)
		}
	}

	// Each write reads the object fresh: the provider writes it too.
	// Retargeting with crossplane.io/external-name.
	retarget := b.DeepCopy()
	deniedAs("Bob sets external-name", `may not change what a gated managed resource acts on`, controlplane.Update(bobC, retarget, func() {
		ann := retarget.GetAnnotations()
		ann[admit.AnnotationExternalName] = "victim-db"
		retarget.SetAnnotations(ann)
	}))

	// Pointing the controller reference elsewhere.
	repoint := b.DeepCopy()
	deniedAs("Bob repoints the controller reference", "controller reference (from XDatabase retarget-x to XDatabase scratch)", controlplane.Update(bobC, repoint, func() {
		repoint.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Name: "scratch", UID: types.UID("00000000-0000-4000-8000-00000000bbbb"), Controller: ptr.To(true)}})
	}))

	// Forging the observed generation on the Bucket's status.
	forged := b.DeepCopy()
	deniedAs("Bob writes the Bucket's status", "status of Bucket retarget-1", controlplane.UpdateStatus(bobC, forged, func() {
		_ = unstructured.SetNestedSlice(forged.Object, []any{map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess",
			"observedGeneration": forged.GetGeneration() + 5, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
	}))

	// Clearing the XDatabase's conditions so it looks initializing.
	cleared := xr.DeepCopy()
	deniedAs("Bob writes the XDatabase's status", "status of XDatabase retarget-x", controlplane.UpdateStatus(bobC, cleared, func() {
		unstructured.RemoveNestedField(cleared.Object, "status")
	}))

	// Adding his own Bucket to what the XDatabase records it composed,
	// which a deletion would read as proof of composition.
	refs := xr.DeepCopy()
	deniedAs("Bob adds a resource reference", "spec.resourceRefs of XDatabase retarget-x", controlplane.Update(bobC, refs, func() {
		_ = unstructured.SetNestedSlice(refs.Object, []any{map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": "bobs"}}, "spec", "resourceRefs")
	}))

	// Crossplane writes its composite's status as before.
	reconciled(t, xr)

	// Nothing Bob tried reached the cloud or stuck.
	if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if got := b.GetAnnotations()[admit.AnnotationExternalName]; got == "victim-db" {
		t.Errorf("external-name of retarget-1 = %q after Bob's denied write", got)
	}
	if og, _ := allowance.ObservedGeneration(b.Object); og > b.GetGeneration() {
		t.Errorf("observed generation of retarget-1 = %d, beyond its generation %d: Bob's forged status stuck", og, b.GetGeneration())
	}
	if n := cloud.Count(recorder.VerbUpdate, "victim-db") + cloud.Count(recorder.VerbDelete, "victim-db"); n != 0 {
		t.Errorf("external Updates and Deletes of victim-db = %d, want 0", n)
	}
}

// TestNewManagedKindCoveredByItsCRD: a provider installed while Kausality
// runs brings a new managed kind. Its CRD, once established, puts the kind
// under the webhooks through a watch, not the next discovery round: this
// suite runs discovery once an hour. The window it takes is logged.
func TestNewManagedKindCoveredByItsCRD(t *testing.T) {
	ctx := context.Background()
	adminC := as(t, "admin")
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.late.example.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "late.example.org", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget",
				Categories: []string{"crossplane", "managed"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	start := time.Now()
	if err := adminC.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adminC.Delete(context.Background(), crd) })
	waitForRules(t, "widgets")
	t.Logf("a new managed kind was under the webhooks %v after its CRD was created (discovery runs once an hour here)", time.Since(start).Round(time.Millisecond))
}
