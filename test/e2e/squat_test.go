package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// composedName is the name Crossplane v2.3.4 gives a composed resource of
// the root XR xr (internal/names.ChildName: the XR's name, and a hash of
// its UID and the composition resource name): anyone who can read the XR
// can work it out before Crossplane composes the resource.
func composedName(xr *unstructured.Unstructured, resource string) string {
	h := sha256.Sum256([]byte(string(xr.GetUID()) + resource))
	return xr.GetName() + "-" + hex.EncodeToString(h[:])[:12]
}

// TestV2BobSquatsAComposedName: Bob creates a Bucket under the name
// Crossplane will give Alice's new XStore's data bucket, aiming it at a
// production bucket through its external name, before Crossplane composes
// it (the XStore is paused). Crossplane stops at it (it reads the
// squatter through the resource references it recorded and finds no
// composition resource name; a squatter carrying one is refused at
// creation, and adopting one that has none is refused too), so the
// XStore is stuck and says why, and nothing reaches the production
// bucket. Alice's deletion of the squatter, a write Kausality
// does not stand in the way of, orphans it, and the XStore composes its
// own data bucket, created in the cloud once.
func TestV2BobSquatsAComposedName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp := storeComposition(t)
	prod := createdStore(t, comp, "v2-squat", "prod")
	victim := storeBuckets(t, prod)["logs"].GetName()

	x := store(prod.Namespace, "shop", "small", map[string]string{"crossplane.io/paused": "true"})
	_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
	if err := alice(t).Create(ctx, x); err != nil {
		t.Fatalf("alice creates XStore shop, paused: %v", err)
	}
	key := client.ObjectKeyFromObject(x)
	squatted := composedName(x, "data")
	squatter := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(1), "region": "eu"}}}}
	squatter.SetGroupVersionKind(controlplane.MBucketGVK)
	squatter.SetNamespace(key.Namespace)
	squatter.SetName(squatted)
	squatter.SetAnnotations(map[string]string{"crossplane.io/external-name": victim})
	if err := as(t, controlplane.Bob).Create(ctx, squatter); err != nil {
		t.Fatalf("bob creates Bucket %s: %v", squatted, err)
	}
	if err := controlplane.Update(alice(t), x, func() {
		ann := x.GetAnnotations()
		delete(ann, "crossplane.io/paused")
		x.SetAnnotations(ann)
	}); err != nil {
		t.Fatalf("alice resumes XStore shop: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "XStore shop to say it cannot compose its data bucket", func() (bool, string) {
		o, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || o == nil {
			return false, fmt.Sprint(err)
		}
		c := policy.Condition(o.Object, "Synced")
		m, _ := c["message"].(string)
		// Crossplane records the names it allocates in the XStore's
		// resource references before it creates anything, then reads the
		// squatter back through them and stops at it: Crossplane's own
		// words, whatever Kausality does.
		return c["status"] == "False" && (strings.Contains(m, squatted) || strings.Contains(m, "composition-resource-name")), cp.DescribeStore(ctx, key)
	})
	if got := counts(victim); got != [3]int{1, 0, 0} {
		t.Errorf("production bucket %s: Create/Update/Delete = %v, want only its own creation", victim, got)
	}

	// Alice removes the squatter: deleted by itself, the gated Bucket
	// orphans what it points at.
	if err := alice(t).Delete(ctx, squatter); err != nil && !kerrors.IsNotFound(err) {
		t.Fatalf("alice deletes Bucket %s: %v", squatted, err)
	}
	settleStore(t, key)
	bs := storeBuckets(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	if got := counts(victim); got != [3]int{1, 0, 0} {
		t.Errorf("production bucket %s: Create/Update/Delete = %v, want only its own creation", victim, got)
	}
}
