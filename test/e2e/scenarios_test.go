package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// created runs S1 for a new Claim composed by the Composition comp and
// returns its key.
func created(t *testing.T, comp, ns, name string) client.ObjectKey {
	t.Helper()
	return createdClosed(t, comp, ns, name, controlplane.ClosedGate)
}

// createdClosed is created for a Composition whose closed gate is closed.
func createdClosed(t *testing.T, comp, ns, name string, closed []string) client.ObjectKey {
	t.Helper()
	namespace(t, ns)
	c := claim(ns, name, "small", map[string]string{"jira": "INFRA-1"})
	_ = unstructured.SetNestedField(c.Object, comp, "spec", "compositionRef", "name")
	if err := alice(t).Create(context.Background(), c); err != nil {
		t.Fatalf("alice creates Claim %s: %v", name, err)
	}
	key := client.ObjectKeyFromObject(c)
	settleClosed(t, key, closed)
	return key
}

func TestS1UserCreatesClaim(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "s1", "orders")
	bs := buckets(t, key)
	if len(bs) != 2 {
		t.Fatalf("buckets = %d, want data and logs", len(bs))
	}
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
	for res, b := range bs {
		tr := traceOf(t, b)
		if got := strings.Join(kinds(tr), " → "); got != "DatabaseClaim → XDatabase → Bucket" {
			t.Errorf("bucket %s trace = %s, want DatabaseClaim → XDatabase → Bucket", res, got)
		}
		if tr.Initiator() != controlplane.Alice {
			t.Errorf("bucket %s trace starts with %q, want %s", res, tr.Initiator(), controlplane.Alice)
		}
		for _, a := range fixture.Allowances(t, b) {
			if !a.Consumed {
				t.Errorf("bucket %s keeps an open allowance after creation: %+v", res, a)
			}
		}
	}
	// Crossplane and the recording provider act from their pods: each
	// resource records the build of both (docs/UPGRADES.md).
	want := logic.BuildHash([]string{cp.CrossplaneImage()})
	fixture.Eventually(t, settleTimeout, "both controllers' builds recorded", func() (bool, string) {
		for res, b := range buckets(t, key) {
			rec, err := logic.ParseControllers(b.GetAnnotations()[v1alpha1.AnnotationControllerBuilds])
			if err != nil {
				t.Fatalf("bucket %s: %v", res, err)
			}
			if rec[controlplane.CrossplaneUser] != want || len(rec) != 2 {
				return false, fmt.Sprintf("bucket %s records builds %v, want Crossplane's %s (%s) and the recording provider's", res, rec, want, cp.CrossplaneImage())
			}
		}
		return true, ""
	})
	// The function prunes the consumed Create allowances on Crossplane's
	// next reconcile of the XR, which may come as late as the function's
	// response TTL.
	fixture.Eventually(t, settleTimeout, "the consumed Create allowances pruned", func() (bool, string) {
		for res, b := range buckets(t, key) {
			if as := fixture.Allowances(t, b); len(as) != 0 {
				return false, fmt.Sprintf("bucket %s keeps %+v", res, as)
			}
		}
		return true, ""
	})
}

func TestS2PermittedChange(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "s2", "orders")
	traceXR(t, key)
	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice's permitted change: %v", err)
	}
	settle(t, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
	if s, _ := cp.Cloud.Get(buckets(t, key)["data"].GetName()); s.Size != 2 {
		t.Errorf("cloud size = %d, want 2", s.Size)
	}
	tr := traceOf(t, buckets(t, key)["data"])
	if got := strings.Join(kinds(tr), " → "); got != "DatabaseClaim → XDatabase → Bucket" {
		t.Fatalf("data bucket trace = %s", got)
	}
	if tr[0].User != controlplane.Alice || tr[0].Attestations["metadata.annotations[jira]"] != "INFRA-1" || tr[0].Field != "spec.size" {
		t.Errorf("origin hop = %+v, want alice changing spec.size with jira INFRA-1", tr[0])
	}
	if tr[2].Field != "spec.forProvider.size" {
		t.Errorf("bucket hop field = %q, want spec.forProvider.size", tr[2].Field)
	}
	// The Claim's user sees that their change went through.
	fixture.Eventually(t, settleTimeout, "the Claim to say nothing was withheld", func() (bool, string) {
		c, err := cp.Object(context.Background(), controlplane.ClaimGVK, key)
		if err != nil || c == nil {
			return false, fmt.Sprint(err)
		}
		a := controlplane.Condition(c, "KausalityAllowed")
		return a.Status == "True", controlplane.Conditions(c)
	})
}

func TestS3ChangeWithoutJira(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "s3", "orders")
	ctx := context.Background()
	c := claim(key.Namespace, key.Name, "", nil)
	withoutJira := func(extra map[string]string) func() {
		return func() {
			ann := c.GetAnnotations()
			delete(ann, "jira")
			maps.Copy(ann, extra)
			c.SetAnnotations(ann)
			_ = unstructured.SetNestedField(c.Object, "large", "spec", "size")
		}
	}
	denied := []string{"spec.size", "AllowancePolicy claims", "is false"}

	// Enforce: denied at admission.
	fixture.ErrorContains(t, controlplane.Update(alice(t), c, withoutJira(nil)), denied...)

	// The mode is not the Claim's to choose: Log on the Claim (which
	// Crossplane would copy to the XR) is ignored, and the change is still
	// denied.
	fixture.ErrorContains(t, controlplane.Update(alice(t), c, withoutJira(map[string]string{v1alpha1.AnnotationMode: string(v1alpha1.ModeLog)})), denied...)

	// Nor is it Alice's: Crossplane's edit role does not let her annotate
	// her Namespace.
	logMode := func(ns *corev1.Namespace) func() {
		return func() {
			metav1.SetMetaDataAnnotation(&ns.ObjectMeta, v1alpha1.AnnotationMode, string(v1alpha1.ModeLog))
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}
	if err := controlplane.Update(alice(t), ns, logMode(ns)); !kerrors.IsForbidden(err) {
		t.Fatalf("alice sets %s on Namespace %s: got %v, want Forbidden", v1alpha1.AnnotationMode, key.Namespace, err)
	}

	// An administrator switches the Namespace to Log: the Claim and the XR
	// take the change with a warning and the function lets it through to
	// the Bucket, but no allowance opens its gate, so the cloud sees
	// nothing.
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}
	if err := controlplane.Update(as(t, "admin"), ns, logMode(ns)); err != nil {
		t.Fatal(err)
	}
	// The provider reads Namespaces from its watch cache: the switch takes
	// effect a moment after the administrator's write.
	fixture.Eventually(t, settleTimeout, "Log mode to let the change in", func() (bool, string) {
		err := controlplane.Update(alice(t), c, withoutJira(nil))
		return err == nil, fmt.Sprintf("Log mode denied the change: %v", err)
	})
	fixture.Eventually(t, settleTimeout, "the data bucket to take the size in Kubernetes", func() (bool, string) {
		b := buckets(t, key)["data"]
		size, _, _ := unstructured.NestedInt64(b.Object, "spec", "forProvider", "size")
		return size == 2, cp.Describe(ctx, key)
	})
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
	if s, _ := cp.Cloud.Get(buckets(t, key)["data"].GetName()); s.Size != 1 {
		t.Errorf("cloud size = %d, want 1", s.Size)
	}
}
