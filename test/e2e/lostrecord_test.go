package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestV2LostRecordRidesNothing: the XR's record that a run left the logs
// bucket as stored is lost when a reconcile fails, and Bob, who may edit
// the XStore but start no change, can make one fail. The logs bucket is
// sized from the XStore's retention label. Alice's permitted resize
// reaches the data bucket once and leaves the logs bucket as stored. Bob
// sets a retention that does not convert: the pipeline fails, and
// Crossplane marks the XR's Kausality conditions Unknown. Bob then sets a
// retention of 5 at the same XR generation: Alice's allowance is used up
// for the logs bucket (the data bucket's write kept the record), so the
// change is withheld and never reaches the cloud.
func TestV2LostRecordRidesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := createdStore(t, compositionFrom(t, filepath.Join(v2Dir, "composition-labelled.yaml")), "v2-lost-record", "shop")
	bs := storeBuckets(t, key)
	bob := as(t, controlplane.Bob)
	xrNow := func() *unstructured.Unstructured {
		x, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}

	x := store(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes: %v", err)
	}
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	gen := xrNow().GetGeneration()

	label := func(v string) {
		t.Helper()
		if err := controlplane.Update(bob, x, func() {
			l := x.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l["retention"] = v
			x.SetLabels(l)
		}); err != nil {
			t.Fatalf("bob labels the XStore retention=%s: %v", v, err)
		}
	}
	label("forever")
	fixture.Eventually(t, settleTimeout, "the failed reconcile to mark the XR's record Unknown", func() (bool, string) {
		c := controlplane.Condition(xrNow(), v1alpha1.ConditionComposed)
		return c.Status == "Unknown", fmt.Sprintf("%s: %s %s %q — %s", v1alpha1.ConditionComposed, c.Status, c.Reason, c.Message, cp.DescribeStore(ctx, key))
	})

	label("5")
	fixture.Eventually(t, settleTimeout, "the logs bucket's new size to be withheld", func() (bool, string) {
		xr := xrNow()
		c := controlplane.Condition(xr, v1alpha1.ConditionAllowed)
		return c.Status == "False" && strings.Contains(c.Message, "resource logs") && strings.Contains(c.Message, "spec.forProvider.size"),
			fmt.Sprintf("%s: %s %q — %s", v1alpha1.ConditionAllowed, c.Status, c.Message, cp.DescribeStore(ctx, key))
	})
	if g := xrNow().GetGeneration(); g != gen {
		t.Fatalf("the XStore's generation moved from %d to %d: the change would not ride on Alice's allowance", gen, g)
	}
	// The XR's record stays Unknown: the data bucket's says all there is.
	time.Sleep(4 * controlplane.Poll)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	logs := storeBuckets(t, key)["logs"]
	if size, _, _ := unstructured.NestedInt64(logs.Object, "spec", "forProvider", "size"); size != 1 {
		t.Errorf("the logs bucket's spec.forProvider.size = %d, want 1: Bob's label rode on Alice's allowance", size)
	}
	if s, _ := cp.Cloud.Get(logs.GetName()); s.Size != 1 {
		t.Errorf("cloud size of the logs bucket %s = %d, want 1", logs.GetName(), s.Size)
	}
}
