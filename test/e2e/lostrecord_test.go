package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
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
	key := createdStore(t, compositionFrom(t, filepath.Join(v2Dir, "composition-labelled.yaml")), "v2-lost-record", "shop")
	bs := storeBuckets(t, key)
	aliceEnlargesStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	bobRetainsAfterAFailure(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
}

// TestV2NothingWrittenCarriesTheRecord is TestV2LostRecordRidesNothing
// with a data bucket that does not follow the XStore's size: Alice's
// permitted resize changes no composed resource, so no write carries the
// record for the run, and the first bucket left as stored is written for
// it alone. Crossplane's write of it is admitted (the XStore stays
// Synced), and Bob's retention is withheld as before.
func TestV2NothingWrittenCarriesTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := createdStore(t, compositionFrom(t, filepath.Join(v2Dir, "composition-unsized.yaml")), "v2-carried-record", "shop")
	bs := storeBuckets(t, key)
	gen := aliceEnlargesStore(t, key)
	want := allowance.Composed{Generation: gen, Untouched: []string{"data", "logs"}}.String()
	fixture.Eventually(t, settleTimeout, "the data bucket to carry the record of the resize", func() (bool, string) {
		got := storeBuckets(t, key)["data"].GetAnnotations()[v1alpha1.AnnotationLeftAsStored]
		return got == want, fmt.Sprintf("%s = %q, want %q — %s", v1alpha1.AnnotationLeftAsStored, got, want, cp.DescribeStore(ctx, key))
	})
	settleStore(t, key)
	if c := controlplane.Condition(storeNow(t, key), "Synced"); c.Status != "True" {
		t.Errorf("XStore Synced = %s %s %q, want True: Crossplane's write of the record was refused", c.Status, c.Reason, c.Message)
	}
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	bobRetainsAfterAFailure(t, key, bs, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
}

// storeNow is the XStore key names as stored.
func storeNow(t *testing.T, key client.ObjectKey) *unstructured.Unstructured {
	t.Helper()
	x, err := cp.Object(context.Background(), controlplane.StoreGVK, key)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// aliceEnlargesStore has Alice make the XStore large, a change a rule permits
// her, waits until it settled, and returns the XStore's generation.
func aliceEnlargesStore(t *testing.T, key client.ObjectKey) int64 {
	t.Helper()
	x := store(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes: %v", err)
	}
	settleStore(t, key)
	return storeNow(t, key).GetGeneration()
}

// bobRetainsAfterAFailure has Bob set the XStore's retention label to a
// value the pipeline cannot convert, waits until the failed reconcile
// marked the XR's record Unknown, then has him set a retention of 5 at the
// same generation, and expects the logs bucket's new size withheld: the
// cloud calls stay calls, and the bucket and its cloud resource keep size 1.
func bobRetainsAfterAFailure(t *testing.T, key client.ObjectKey, bs map[string]*unstructured.Unstructured, calls map[string][3]int) {
	t.Helper()
	ctx := context.Background()
	gen := storeNow(t, key).GetGeneration()
	bob := as(t, controlplane.Bob)
	x := store(key.Namespace, key.Name, "", nil)
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
		c := controlplane.Condition(storeNow(t, key), v1alpha1.ConditionComposed)
		return c.Status == "Unknown", fmt.Sprintf("%s: %s %s %q — %s", v1alpha1.ConditionComposed, c.Status, c.Reason, c.Message, cp.DescribeStore(ctx, key))
	})

	label("5")
	fixture.Eventually(t, settleTimeout, "the logs bucket's new size to be withheld", func() (bool, string) {
		c := controlplane.Condition(storeNow(t, key), v1alpha1.ConditionAllowed)
		return c.Status == "False" && strings.Contains(c.Message, "resource logs") && strings.Contains(c.Message, "spec.forProvider.size"),
			fmt.Sprintf("%s: %s %q — %s", v1alpha1.ConditionAllowed, c.Status, c.Message, cp.DescribeStore(ctx, key))
	})
	if g := storeNow(t, key).GetGeneration(); g != gen {
		t.Fatalf("the XStore's generation moved from %d to %d: the change would not ride on Alice's allowance", gen, g)
	}
	time.Sleep(4 * controlplane.Poll)
	expectStoreCalls(t, key, bs, calls)
	logs := storeBuckets(t, key)["logs"]
	if size, _, _ := unstructured.NestedInt64(logs.Object, "spec", "forProvider", "size"); size != 1 {
		t.Errorf("the logs bucket's spec.forProvider.size = %d, want 1: Bob's label rode on Alice's allowance", size)
	}
	if s, _ := cp.Cloud.Get(logs.GetName()); s.Size != 1 {
		t.Errorf("cloud size of the logs bucket %s = %d, want 1", logs.GetName(), s.Size)
	}
}
