package e2e

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
)

// created runs S1 for a new Claim and returns its key.
func created(t *testing.T, x *controlplane.Crossplane, ns, name string) client.ObjectKey {
	t.Helper()
	namespace(t, ns)
	c := claim(ns, name, "small", map[string]string{"jira": "INFRA-1"})
	if err := alice(t).Create(context.Background(), c); err != nil {
		t.Fatalf("alice creates Claim %s: %v", name, err)
	}
	key := client.ObjectKeyFromObject(c)
	settle(t, x, key)
	return key
}

func TestS1UserCreatesClaim(t *testing.T) {
	x := crossplane(t, 1)
	key := created(t, x, "s1", "orders")
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
		if as := allowancesOf(t, b); len(as) != 0 {
			t.Errorf("bucket %s keeps allowances after creation: %+v", res, as)
		}
	}
}

func TestS2PermittedChange(t *testing.T) {
	x := crossplane(t, 1)
	key := created(t, x, "s2", "orders")
	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice's permitted change: %v", err)
	}
	settle(t, x, key)
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
}

func TestS3ChangeWithoutJira(t *testing.T) {
	x := crossplane(t, 1)
	key := created(t, x, "s3", "orders")
	ctx := context.Background()
	c := claim(key.Namespace, key.Name, "", nil)

	// Enforce: denied at admission.
	withoutJira := func(extra map[string]string) func() {
		return func() {
			ann := c.GetAnnotations()
			delete(ann, "jira")
			for k, v := range extra {
				ann[k] = v
			}
			c.SetAnnotations(ann)
			_ = unstructured.SetNestedField(c.Object, "large", "spec", "size")
		}
	}
	err := controlplane.Update(alice(t), c, withoutJira(nil))
	controlplane.ErrorContains(t, err, "spec.size", "AllowancePolicy claims", "is false")

	// Log: the Claim takes the change with a warning, but it carries no
	// allowance, so Crossplane cannot propagate it to the XR.
	if err := controlplane.Update(alice(t), c, withoutJira(map[string]string{v1alpha1.AnnotationMode: "Log"})); err != nil {
		t.Fatalf("Log mode denied the change: %v", err)
	}
	_, _, err = x.SyncClaim(ctx, key)
	controlplane.ErrorContains(t, err, "spec.size", "AllowancePolicy xdatabases", "no unconsumed allowance on DatabaseClaim s3/orders covers spec.size")
	if _, err := x.Composite(ctx, controlplane.XRName(key)); err != nil {
		t.Fatal(err)
	}
	if err := x.WaitReconciled(ctx, controlplane.XRName(key)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
}

func allowancesOf(t *testing.T, o client.Object) []allowance.Allowance {
	t.Helper()
	as, err := allowance.Parse(o.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil {
		t.Fatalf("allowances of %s: %v", o.GetName(), err)
	}
	return as
}
