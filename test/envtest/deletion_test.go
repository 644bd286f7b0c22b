package envtest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/provider/gatecontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// refusingWebhook registers another validating webhook, as a cluster may
// have, that refuses the deletion of XDatabases labelled
// test.kausality.io/refuse: Kausality's deletion webhook admits the same
// deletion and opens the Delete gates first.
func refusingWebhook(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	wo := env.WebhookInstallOptions
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: wo.LocalServingCertDir})
	srv.Register("/refuse", &webhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Denied("refused by another admission check")
	})})
	go func() { _ = srv.Start(ctx) }()
	url := fmt.Sprintf("https://127.0.0.1:%d/refuse", port)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "test-refuse-deletion"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "refuse.test.kausality.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: wo.LocalServingCAData},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"xdatabases"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"test.kausality.io/refuse": "true"}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	adminC := as(t, "admin")
	if err := adminC.Create(context.Background(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adminC.Delete(context.Background(), vwc) })
}

// TestRefusedDeletionRevokesTheDeleteGate: Alice may delete her XDatabase
// and its buckets in the cloud, and Kausality's webhook opens the Delete
// gates; another admission check refuses the deletion. The open gates must
// not outlive it: Bob deleting one Bucket directly right away has its gate
// revoked first, and once the grace has passed with the XDatabase still
// standing the other's is revoked too; neither deletion reaches the cloud.
func TestRefusedDeletionRevokesTheDeleteGate(t *testing.T) {
	ctx := context.Background()
	waitForRules(t, "xdatabases")
	waitForRules(t, "buckets")
	refusingWebhook(t)
	aliceC, cp := as(t, alice, "platform-team"), as(t, crossplane, "system:serviceaccounts")

	cloud.Put("refused-1", recorder.State{Size: 1, Region: "eu"})
	cloud.Put("refused-2", recorder.State{Size: 1, Region: "eu"})
	xr := object("XDatabase", "", "refused-x", map[string]any{"size": "1"}, map[string]string{v1alpha1.AnnotationAllowDelete: "true"})
	xr.SetLabels(map[string]string{"test.kausality.io/refuse": "true"})
	if err := aliceC.Create(ctx, xr); err != nil {
		t.Fatal(err)
	}
	// Crossplane records what it composed; only it may.
	refs := []any{
		map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": "refused-1"},
		map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": "refused-2"},
	}
	if err := controlplane.Update(cp, xr, func() { _ = unstructured.SetNestedSlice(xr.Object, refs, "spec", "resourceRefs") }); err != nil {
		t.Fatalf("crossplane records the XDatabase's resources: %v", err)
	}
	reconciled(t, xr)
	b, b2 := bucket("refused-1", 1, xr), bucket("refused-2", 1, xr)
	for _, o := range []*unstructured.Unstructured{b, b2} {
		if err := cp.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		waitReconciled(t, cp, o)
	}

	// The refusing webhook may take a moment to be called.
	fixture.Eventually(t, 30*time.Second, "the other webhook to refuse the deletion", func() (bool, string) {
		err := aliceC.Delete(ctx, xr.DeepCopy())
		return err != nil && kerrors.IsForbidden(err) && contains(err, "refused by another admission check"), errString(err)
	})
	if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(policiesOf(b), "Delete") || !slices.ContainsFunc(fixture.Allowances(t, b), func(a allowance.Allowance) bool { return a.OpensDelete() && !a.Consumed }) {
		t.Fatalf("Kausality's webhook admitted the deletion and opened the Delete gate: gate %v, allowances %+v", policiesOf(b), fixture.Allowances(t, b))
	}

	// Right away, Bob deletes the second Bucket by itself: its gate is
	// revoked before the deletion goes on.
	bobC := as(t, "bob")
	if err := bobC.Delete(ctx, b2.DeepCopy()); err != nil {
		t.Fatalf("bob deletes Bucket refused-2: %v", err)
	}
	gone(t, cp, b2)
	if n := cloud.Count(recorder.VerbDelete, "refused-2"); n != 0 {
		t.Errorf("external Deletes of refused-2 = %d, want 0: Bob's deletion rode on the refused deletion's gate", n)
	}

	// Past the grace the XDatabase still stands: the gate is revoked.
	clock.Advance(2 * gatecontroller.DefaultDeletionGrace)
	defer clock.Advance(-2 * gatecontroller.DefaultDeletionGrace)
	poke(t, b)
	fixture.Eventually(t, 30*time.Second, "the Delete gate revoked", func() (bool, string) {
		if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		c := gateCondition(b)
		return !slices.Contains(policiesOf(b), "Delete") && c.Reason == gatecontroller.ReasonDeletionRefused && c.Status == corev1.ConditionFalse,
			fmt.Sprintf("gate %v, condition %s: %s", policiesOf(b), c.Reason, c.Message)
	})
	for _, a := range fixture.Allowances(t, b) {
		if a.OpensDelete() && !a.Consumed {
			t.Errorf("revoked Delete allowance still unconsumed: %+v", a)
		}
	}

	// Bob deletes the Bucket: the provider orphans the cloud bucket.
	if err := bobC.Delete(ctx, b.DeepCopy()); err != nil {
		t.Fatalf("bob deletes the Bucket: %v", err)
	}
	gone(t, cp, b)
	for _, n := range []string{"refused-1", "refused-2"} {
		if c := cloud.Count(recorder.VerbDelete, n); c != 0 {
			t.Errorf("external Deletes of %s = %d, want 0: the refused deletion's gate let Bob delete in the cloud", n, c)
		}
		if _, ok := cloud.Get(n); !ok {
			t.Errorf("the cloud bucket %s is gone", n)
		}
	}
}

// gone waits until the provider let o go.
func gone(t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	fixture.Eventually(t, 30*time.Second, o.GetName()+" gone", func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopy())
		return kerrors.IsNotFound(err), errString(err)
	})
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}
