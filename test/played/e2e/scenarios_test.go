package played_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/played"
)

// created runs S1 for a new Claim and returns its key.
func created(t *testing.T, x *played.Crossplane, ns, name string) client.ObjectKey {
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
	if _, err := x.Composite(ctx, played.XRName(key)); err != nil {
		t.Fatal(err)
	}
	if err := x.WaitReconciled(ctx, played.XRName(key)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
}
