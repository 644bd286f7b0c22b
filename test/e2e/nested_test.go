package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

var platformGVK = schema.GroupVersionKind{Group: "v2.example.com", Version: "v1alpha1", Kind: "XPlatform"}

// createdPlatform installs the XPlatform chain (testdata/v2/nested: the
// XRD, its policy, and the Compositions of both layers), has Alice create an
// XPlatform in namespace ns, and waits until its XStore and their Buckets
// settled, each bucket created once in the cloud.
func createdPlatform(t *testing.T, ns string) (*unstructured.Unstructured, client.ObjectKey, map[string]*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(v2Dir, "nested")
	if err := cp.ApplyFile(ctx, filepath.Join(dir, "xrd.yaml")); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "Crossplane serves XPlatforms", func() (bool, string) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(platformGVK.GroupVersion().WithKind("XPlatformList"))
		if err := as(t, "admin").List(ctx, l); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if err := cp.ApplyFile(ctx, filepath.Join(dir, "policies.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.WaitForRules(ctx, as(t, "admin"), "xplatforms"); err != nil {
		t.Fatal(err)
	}
	if err := cp.Composition(ctx, filepath.Join(v2Dir, "composition.yaml"), "xstores-nested"); err != nil {
		t.Fatal(err)
	}
	if err := cp.Composition(ctx, filepath.Join(dir, "composition.yaml"), "xplatforms-nested"); err != nil {
		t.Fatal(err)
	}
	namespace(t, ns)
	p := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "small",
		"crossplane": map[string]any{"compositionRef": map[string]any{"name": "xplatforms-nested"}}}}}
	p.SetGroupVersionKind(platformGVK)
	p.SetNamespace(ns)
	p.SetName("plat")
	if err := alice(t).Create(ctx, p); err != nil {
		t.Fatalf("alice creates the XPlatform: %v", err)
	}

	// The XStore the XPlatform composed.
	var key client.ObjectKey
	fixture.Eventually(t, 2*settleTimeout, "the XPlatform's XStore and its Buckets settled", func() (bool, string) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(controlplane.StoreGVK.GroupVersion().WithKind("XStoreList"))
		if err := as(t, "admin").List(ctx, l, client.InNamespace(ns), client.MatchingLabels{"crossplane.io/composite": "plat"}); err != nil {
			return false, err.Error()
		}
		if len(l.Items) != 1 {
			return false, fmt.Sprintf("%d XStores composed by the XPlatform", len(l.Items))
		}
		key = client.ObjectKeyFromObject(&l.Items[0])
		ok, why, err := cp.StoreSettled(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		return ok, why + " — " + cp.DescribeStore(ctx, key)
	})
	bs := storeBuckets(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	return p, key, bs
}

// TestV2NestedXRCarriesTheChain: an XPlatform composes an XStore, which
// composes Buckets, Kausality in both pipelines. Alice's creation builds
// the whole tree; her permitted resize of the XPlatform reaches the data
// bucket's cloud resource exactly once, traced person → XPlatform → XStore
// → Bucket; the XStore is never gated. Bob can change neither layer.
func TestV2NestedXRCarriesTheChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, key, bs := createdPlatform(t, "v2-nested")

	if err := controlplane.Update(alice(t), p, func() { _ = unstructured.SetNestedField(p.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes the XPlatform: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the XStore resized", func() (bool, string) {
		x, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || x == nil {
			return false, fmt.Sprintf("no XStore: %v", err)
		}
		size, _, _ := unstructured.NestedString(x.Object, "spec", "size")
		return size == "large", "XStore size " + size + " — " + cp.DescribeStore(ctx, key)
	})
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(bs["data"].GetName()); s.Size != 2 {
		t.Errorf("cloud size of the data bucket = %d, want 2", s.Size)
	}
	data := storeBuckets(t, key)["data"]
	tr := traceOf(t, data)
	if got := strings.Join(kinds(tr), " → "); got != "XPlatform → XStore → Bucket" || tr.Initiator() != controlplane.Alice {
		t.Errorf("data bucket trace = %s from %q, want XPlatform → XStore → Bucket from %s", got, tr.Initiator(), controlplane.Alice)
	}
	x, err := cp.Object(ctx, controlplane.StoreGVK, key)
	if err != nil {
		t.Fatal(err)
	}
	if mp, ok, _ := unstructured.NestedFieldNoCopy(x.Object, "spec", "managementPolicies"); ok {
		t.Errorf("the XStore has managementPolicies %v; a composite is never gated", mp)
	}

	// Bob can change neither layer.
	bob := as(t, controlplane.Bob)
	err = controlplane.Update(bob, p, func() { _ = unstructured.SetNestedField(p.Object, "small", "spec", "size") })
	fixture.ErrorContains(t, err, "spec.size", "AllowancePolicy xplatforms")
	err = controlplane.Update(bob, x, func() { _ = unstructured.SetNestedField(x.Object, "small", "spec", "size") })
	fixture.ErrorContains(t, err, "spec.size", "AllowancePolicy xstores")
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
}

// TestV2FreezeOnTheParentXRHoldsTheTree: Alice freezes the XPlatform, not
// the XStore below it, and then resizes it. The change is carried down to
// the XStore and its data bucket, whose gate stays shut while any XR up
// the tree is frozen: nothing reaches the cloud until she lifts the
// freeze, then the resize reaches it exactly once.
func TestV2FreezeOnTheParentXRHoldsTheTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, key, bs := createdPlatform(t, "v2-freeze")
	freeze := func(on bool) {
		t.Helper()
		if err := controlplane.Update(alice(t), p, func() {
			ann := p.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			if on {
				ann[v1alpha1.AnnotationFreeze] = `{"message":"incident 9"}`
			} else {
				delete(ann, v1alpha1.AnnotationFreeze)
			}
			p.SetAnnotations(ann)
		}); err != nil {
			t.Fatalf("alice sets the freeze %t: %v", on, err)
		}
	}
	freeze(true)
	if err := controlplane.Update(alice(t), p, func() { _ = unstructured.SetNestedField(p.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes the frozen XPlatform: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the resize carried down to the data bucket's spec", func() (bool, string) {
		b := storeBuckets(t, key)["data"]
		size, _, _ := unstructured.NestedInt64(b.Object, "spec", "forProvider", "size")
		return size == 2, cp.DescribeStore(ctx, key)
	})
	time.Sleep(10 * time.Second)
	if got := counts(bs["data"].GetName()); got != [3]int{1, 0, 0} {
		t.Fatalf("while the XPlatform is frozen: data bucket Create/Update/Delete = %v, want no update", got)
	}
	expectCLI(t, "frozen", []string{"frozen by", "nothing held", "gate closed by a freeze"}, "trace", "xplatforms.v2.example.com/plat", "-n", "v2-freeze")
	freeze(false)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(bs["data"].GetName()); s.Size != 2 {
		t.Errorf("cloud size of the data bucket = %d, want 2", s.Size)
	}
}
