package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// Kausality only ever narrows what a Composition asks (docs/DESIGN.md §5).

// TestV2KeptAndImportedBuckets: a Composition keeps its data bucket in the
// cloud when the XStore goes (every management action but Delete) and
// imports an existing cloud bucket observe-only as its logs bucket, as
// Crossplane's docs show. Kausality never opens more: the import is never
// created, updated or deleted, although the XStore's creation grants
// Create and Alice's permitted resize reaches it; the data bucket is
// created and resized once, its gate never holds Delete, not even while a
// tier change granted every External verb (["*"]) keeps it open, and it
// survives the XStore's deletion in the cloud.
func TestV2KeptAndImportedBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const imported = "imported-logs"
	cp.Cloud.Put(imported, recorder.State{Size: 7, Region: "eu"})
	comp := compositionFrom(t, filepath.Join(v2Dir, "composition-kept-and-imported.yaml"))
	const ns = "v2-kept-imported"
	namespace(t, ns)
	x := store(ns, "shop", "small", nil)
	_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
	if err := alice(t).Create(ctx, x); err != nil {
		t.Fatalf("alice creates XStore: %v", err)
	}
	key := client.ObjectKeyFromObject(x)
	closed := map[string][]string{"data": {"Observe", "LateInitialize"}, "logs": {"Observe"}}
	settled := func(what string) map[string]*unstructured.Unstructured {
		t.Helper()
		var bs map[string]*unstructured.Unstructured
		fixture.Eventually(t, settleTimeout, what, func() (bool, string) {
			bs = storeBuckets(t, key)
			if len(bs) != 2 {
				return false, fmt.Sprintf("%d buckets — %s", len(bs), cp.DescribeStore(ctx, key))
			}
			for res, b := range bs {
				s := controlplane.Condition(b, "Synced")
				if s.Status != "True" || s.ObservedGeneration != b.GetGeneration() || !slices.Equal(gate(b), closed[res]) {
					return false, fmt.Sprintf("bucket %s Synced %s at %d of %d, gate %v — %s", res, s.Status, s.ObservedGeneration, b.GetGeneration(), gate(b), cp.DescribeStore(ctx, key))
				}
			}
			return true, ""
		})
		return bs
	}
	bs := settled("the XStore's buckets composed, observed and closed to what the Composition asks")
	if got := bs["logs"].GetAnnotations()[v1alpha1.AnnotationRequestedPolicies]; got != `["Observe"]` {
		t.Errorf("logs bucket %s = %q, want [\"Observe\"]", v1alpha1.AnnotationRequestedPolicies, got)
	}
	data := bs["data"].GetName()
	calls := func(want map[string][3]int) {
		t.Helper()
		names := map[string]string{"data": data, "logs": imported}
		fixture.Eventually(t, settleTimeout, "the cloud calls", func() (bool, string) {
			for res, w := range want {
				if got := counts(names[res]); got != w {
					return false, fmt.Sprintf("%s: Create/Update/Delete = %v, want %v — %s", res, got, w, cp.DescribeStore(ctx, key))
				}
			}
			return true, ""
		})
		time.Sleep(2 * controlplane.Poll)
		for res, w := range want {
			if got := counts(names[res]); got != w {
				t.Errorf("%s: external Create/Update/Delete = %v, want %v", res, got, w)
			}
		}
	}
	calls(map[string][3]int{"data": {1, 0, 0}, "logs": {0, 0, 0}})

	// Alice's permitted resize reaches the data bucket once and the
	// imported one not at all.
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes: %v", err)
	}
	settled("the resize settled")
	calls(map[string][3]int{"data": {1, 1, 0}, "logs": {0, 0, 0}})
	if s, _ := cp.Cloud.Get(imported); s.Size != 7 {
		t.Errorf("cloud size of the imported bucket = %d, want 7 as it was", s.Size)
	}

	// A tier change grants every External verb; the cloud refuses it, so
	// the data bucket's gate stays open while Alice deletes the XStore.
	seen := watchStoreGates(t, client.ObjectKey{Namespace: ns, Name: data})
	restore := cp.Cloud.Fail(data)
	defer restore()
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "gold", "spec", "tier") }); err != nil {
		t.Fatalf("alice changes the tier: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the data bucket's gate open for the tier change", func() (bool, string) {
		b := storeBuckets(t, key)["data"]
		return b != nil && slices.Contains(gate(b), "Update"), cp.DescribeStore(ctx, key)
	})
	deleteProtected(t, alice(t), x)
	fixture.Eventually(t, settleTimeout, "the XStore and its Buckets to go", func() (bool, string) {
		left := storeBuckets(t, key)
		xs, err := cp.Object(ctx, controlplane.StoreGVK, key)
		return err == nil && xs == nil && len(left) == 0, fmt.Sprintf("%d buckets left — %s", len(left), cp.DescribeStore(ctx, key))
	})
	calls(map[string][3]int{"data": {1, 1, 0}, "logs": {0, 0, 0}})
	for _, n := range []string{data, imported} {
		if _, ok := cp.Cloud.Get(n); !ok {
			t.Errorf("cloud bucket %s is gone", n)
		}
	}
	for _, g := range seen() {
		if slices.Contains(g, "Delete") || slices.Contains(g, "*") {
			t.Errorf("the data bucket's gate was %v: its Composition keeps it on deletion", g)
		}
	}
}

// watchStoreGates polls a namespaced Bucket's gate until the test ends and
// returns a function listing the distinct gates seen.
func watchStoreGates(t *testing.T, key client.ObjectKey) func() [][]string {
	t.Helper()
	return watchGatesOf(t, func() *unstructured.Unstructured {
		b := &unstructured.Unstructured{}
		b.SetGroupVersionKind(controlplane.MBucketGVK)
		if err := cp.AdminClient().Get(context.Background(), key, b); err != nil {
			return nil
		}
		return b
	})
}

// TestNarrowedGateWhileDown: Alice's permitted resize opens the data
// bucket's gate and the cloud refuses it for a while. With every
// provider-kausality replica down, Bob (edit rights on Buckets, no policy)
// narrows the gate back to closed, a write the API server admits without
// the provider; the bucket's provider then reports the new generation
// Synced behind the closed gate, having written nothing. Once the cloud
// recovers and provider-kausality is back, the resize is not counted as
// applied: the gate opens again and the resize reaches the cloud exactly
// once. It kills the provider, so it runs alone.
func TestNarrowedGateWhileDown(t *testing.T) {
	ctx := context.Background()
	key, data, restore := resizeRefused(t, composition(t, 1), "narrowed")
	defer restore()
	restart := killProvider(t)

	bob := as(t, controlplane.Bob)
	b := &unstructured.Unstructured{}
	b.SetGroupVersionKind(controlplane.BucketGVK)
	b.SetName(data.GetName())
	if err := controlplane.Update(bob, b, func() {
		_ = unstructured.SetNestedStringSlice(b.Object, controlplane.ClosedGate, "spec", "managementPolicies")
	}); err != nil {
		t.Fatalf("bob narrows the gate while the provider is down: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the bucket's provider to report the narrowed generation Synced", func() (bool, string) {
		if err := bob.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		s := controlplane.Condition(b, "Synced")
		return slices.Equal(gate(b), controlplane.ClosedGate) && s.Status == "True" && s.ObservedGeneration == b.GetGeneration(),
			fmt.Sprintf("gate %v Synced %s at %d of %d", gate(b), s.Status, s.ObservedGeneration, b.GetGeneration())
	})
	if n := cp.Cloud.Count(recorder.VerbUpdate, data.GetName()); n != 0 {
		t.Fatalf("%d Updates reached the refusing cloud", n)
	}

	restore()
	restart()
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(data.GetName()); s.Size != 2 {
		t.Errorf("cloud size of the data bucket = %d, want 2: Alice's resize was lost to Bob's narrowing", s.Size)
	}
	expectClosed(t, key)
}

// TestV2BobCannotWedge: Bob (crossplane-edit in his namespace, no policy)
// marks a created gated Bucket's creation as pending, which would stop
// crossplane-runtime from reconciling it ("cannot determine creation
// result"), and removes the record of its creation: both are refused, and
// Alice's permitted resize afterwards reaches the cloud once.
func TestV2BobCannotWedge(t *testing.T) {
	t.Parallel()
	key := createdStore(t, storeComposition(t), "v2-wedge", "shop")
	bs := storeBuckets(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	bob := as(t, controlplane.Bob)
	data := bs["data"].DeepCopy()
	mark := func(fn func(map[string]string)) error {
		return controlplane.Update(bob, data, func() {
			ann := data.GetAnnotations()
			fn(ann)
			data.SetAnnotations(ann)
		})
	}
	err := mark(func(a map[string]string) {
		a["crossplane.io/external-create-pending"] = time.Now().UTC().Format(time.RFC3339)
	})
	fixture.ErrorContains(t, err, "crossplane.io/external-create-pending")
	err = mark(func(a map[string]string) { delete(a, "crossplane.io/external-create-succeeded") })
	fixture.ErrorContains(t, err, "crossplane.io/external-create-succeeded")

	x := store(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes: %v", err)
	}
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
}

// TestNarrowedCreateGateWhileDown: Alice's Claim composes two Buckets
// whose Create gates open; the cloud refuses their creation for a while.
// With every provider-kausality replica down, Bob narrows the data
// bucket's Create gate, which crossplane-runtime then skips, reporting the
// bucket Synced although nothing was created. Once the cloud and the
// provider are back, the creation is not counted as done: the gate opens
// again and each bucket is created exactly once. It kills the provider, so
// it runs alone.
func TestNarrowedCreateGateWhileDown(t *testing.T) {
	ctx := context.Background()
	const ns, name = "narrowed-create", "midcreate"
	comp := composition(t, 1)
	namespace(t, ns)
	key, restore := createsRefused(t, comp, ns, name)
	defer restore()
	restart := killProvider(t)

	bob := as(t, controlplane.Bob)
	b := buckets(t, key)["data"]
	if err := controlplane.Update(bob, b, func() {
		_ = unstructured.SetNestedStringSlice(b.Object, controlplane.ClosedGate, "spec", "managementPolicies")
	}); err != nil {
		t.Fatalf("bob narrows the Create gate while the provider is down: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the bucket's provider to report the narrowed generation Synced, uncreated", func() (bool, string) {
		if err := bob.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		s := controlplane.Condition(b, "Synced")
		return slices.Equal(gate(b), controlplane.ClosedGate) && s.Status == "True" && s.ObservedGeneration == b.GetGeneration(),
			fmt.Sprintf("gate %v Synced %s at %d of %d", gate(b), s.Status, s.ObservedGeneration, b.GetGeneration())
	})
	if _, ok := cp.Cloud.Get(b.GetName()); ok {
		t.Fatalf("the data bucket exists in the refusing cloud")
	}

	restore()
	restart()
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
}

// TestNarrowedGatesProviderUp: as TestNarrowedGateWhileDown and
// TestNarrowedCreateGateWhileDown with every provider-kausality replica
// up. Bob narrows an open Update gate and an open Create gate while the
// cloud refuses the writes behind them (the match condition that lets a
// narrowing through without the provider admits his writes either way);
// the gate controller reopens each for the change it was opened for, and
// once the cloud recovers Alice's resize reaches it once and the new
// bucket is created once.
func TestNarrowedGatesProviderUp(t *testing.T) {
	t.Parallel()
	comp := composition(t, 1)
	bob := as(t, controlplane.Bob)
	narrow := func(b *unstructured.Unstructured) {
		t.Helper()
		if err := controlplane.Update(bob, b, func() {
			_ = unstructured.SetNestedStringSlice(b.Object, controlplane.ClosedGate, "spec", "managementPolicies")
		}); err != nil {
			t.Fatalf("bob narrows the gate of %s: %v", b.GetName(), err)
		}
	}

	// An Update gate.
	key, data, restoreUpdate := resizeRefused(t, comp, "narrowed-up")
	defer restoreUpdate()
	narrow(buckets(t, key)["data"])

	// A Create gate.
	const ns, name = "narrowed-create-up", "midcreate-up"
	namespace(t, ns)
	nkey, restoreCreate := createsRefused(t, comp, ns, name)
	defer restoreCreate()
	narrow(buckets(t, nkey)["data"])

	time.Sleep(3 * controlplane.Poll)
	if n := cp.Cloud.Count(recorder.VerbUpdate, data.GetName()); n != 0 {
		t.Fatalf("%d Updates reached the refusing cloud", n)
	}
	restoreUpdate()
	restoreCreate()
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(data.GetName()); s.Size != 2 {
		t.Errorf("cloud size of the data bucket = %d, want 2: Alice's resize was lost to Bob's narrowing", s.Size)
	}
	expectCalls(t, nkey, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
	expectClosed(t, nkey)
}

// createsRefused has Alice create a Claim composed by comp in ns, whose
// Buckets' creation the cloud refuses until restore is called, and waits
// until both Buckets' Create gates are open behind the refusal.
func createsRefused(t *testing.T, comp, ns, name string) (key client.ObjectKey, restore func()) {
	t.Helper()
	ctx := context.Background()
	restore = cp.Cloud.FailPrefix(name + "-")
	c := claim(ns, name, "small", map[string]string{"jira": "INFRA-1"})
	_ = unstructured.SetNestedField(c.Object, comp, "spec", "compositionRef", "name")
	if err := alice(t).Create(ctx, c); err != nil {
		restore()
		t.Fatal(err)
	}
	key = client.ObjectKeyFromObject(c)
	fixture.Eventually(t, settleTimeout, "both Buckets' Create gates open while the cloud refuses them", func() (bool, string) {
		bs, err := cp.Buckets(ctx, key)
		if err != nil || len(bs) != 2 {
			return false, fmt.Sprint(len(bs), " buckets ", err)
		}
		for res, b := range bs {
			if s := controlplane.Condition(b, "Synced"); !slices.Contains(gate(b), "Create") || s.Status != "False" {
				return false, fmt.Sprintf("%s gate %v Synced %s", res, gate(b), s.Status)
			}
		}
		return true, ""
	})
	return key, restore
}

// resizeRefused has Alice create a Claim named orders composed by comp in
// ns and resize it while the cloud refuses every write to its data bucket
// (until restore is called), and waits until the data bucket's gate is
// open for the Update the cloud refuses.
func resizeRefused(t *testing.T, comp, ns string) (key client.ObjectKey, data *unstructured.Unstructured, restore func()) {
	t.Helper()
	key = created(t, comp, ns, "orders")
	data = buckets(t, key)["data"]
	restore = cp.Cloud.Fail(data.GetName())
	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		restore()
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the data bucket's gate open for the Update the cloud refuses", func() (bool, string) {
		b := buckets(t, key)["data"]
		s := controlplane.Condition(b, "Synced")
		return slices.Contains(gate(b), "Update") && s.Status == "False", fmt.Sprintf("gate %v Synced %s", gate(b), s.Status)
	})
	return key, data, restore
}
