package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// The Crossplane v2 shape: Alice and Bob have exactly what crossplane-edit
// gives them in their namespace (every verb on its XStores and namespaced
// Buckets, status subresources included) and write the namespaced XR
// directly; Crossplane composes namespaced Buckets of a ".m." API group
// into the same namespace.

var v2Dir = filepath.Join("testdata", "v2")

// storeComposition applies testdata/v2/composition.yaml as the test's own
// Composition and returns its name.
func storeComposition(t *testing.T) string {
	t.Helper()
	return compositionFrom(t, filepath.Join(v2Dir, "composition.yaml"))
}

func store(namespace, name, size string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
	u.SetGroupVersionKind(controlplane.StoreGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetAnnotations(annotations)
	return u
}

// createdStore has Alice create an XStore composed by comp in namespace
// ns (with crossplane-edit for Alice and Bob) and waits until it settled.
func createdStore(t *testing.T, comp, ns, name string) client.ObjectKey {
	t.Helper()
	namespace(t, ns)
	x := store(ns, name, "small", nil)
	_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
	if err := alice(t).Create(context.Background(), x); err != nil {
		t.Fatalf("alice creates XStore %s/%s: %v", ns, name, err)
	}
	key := client.ObjectKeyFromObject(x)
	settleStore(t, key)
	return key
}

func settleStore(t *testing.T, key client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	fixture.Eventually(t, settleTimeout, fmt.Sprintf("the chain of XStore %s to settle", key), func() (bool, string) {
		ok, why, err := cp.StoreSettled(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		return ok, why + " — " + cp.DescribeStore(ctx, key)
	})
}

func storeBuckets(t *testing.T, key client.ObjectKey) map[string]*unstructured.Unstructured {
	t.Helper()
	bs, err := cp.StoreBuckets(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// expectStoreCalls is expectCalls for an XStore's Buckets, named by the
// composed resources as they are now.
func expectStoreCalls(t *testing.T, key client.ObjectKey, bs map[string]*unstructured.Unstructured, want map[string][3]int) {
	t.Helper()
	fixture.Eventually(t, settleTimeout, "the cloud calls", func() (bool, string) {
		for res, w := range want {
			if got := counts(bs[res].GetName()); got != w {
				return false, fmt.Sprintf("bucket %s: Create/Update/Delete = %v, want %v — %s", res, got, w, cp.DescribeStore(context.Background(), key))
			}
		}
		return true, ""
	})
	time.Sleep(2 * controlplane.Poll)
	for res, w := range want {
		if got := counts(bs[res].GetName()); got != w {
			t.Errorf("%s bucket %s: external Create/Update/Delete = %v, want %v", key, res, got, w)
		}
	}
}

// TestV2PermittedAndWithheldChanges: Alice creates an XStore; both Buckets
// are created once, traced XStore → Bucket naming her. Her resize reaches
// the data bucket exactly once; Bob's resize (no policy lets him
// initiate) is denied and reaches nothing.
func TestV2PermittedAndWithheldChanges(t *testing.T) {
	t.Parallel()
	key := createdStore(t, storeComposition(t), "v2-change", "shop")
	bs := storeBuckets(t, key)
	if len(bs) != 2 || bs["data"] == nil || bs["logs"] == nil {
		t.Fatalf("buckets = %v, want data and logs", bs)
	}
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	for res, b := range bs {
		if b.GetNamespace() != key.Namespace {
			t.Errorf("bucket %s in namespace %q, want the XStore's %q", res, b.GetNamespace(), key.Namespace)
		}
		tr := traceOf(t, b)
		if got := strings.Join(kinds(tr), " → "); got != "XStore → Bucket" {
			t.Errorf("bucket %s trace = %s, want XStore → Bucket", res, got)
		}
		if tr.Initiator() != controlplane.Alice {
			t.Errorf("bucket %s trace starts with %q, want %s", res, tr.Initiator(), controlplane.Alice)
		}
	}

	x := store(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes: %v", err)
	}
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(bs["data"].GetName()); s.Size != 2 {
		t.Errorf("cloud size of the data bucket = %d, want 2", s.Size)
	}

	err := controlplane.Update(as(t, controlplane.Bob), x, func() { _ = unstructured.SetNestedField(x.Object, "small", "spec", "size") })
	fixture.ErrorContains(t, err, "spec.size", "AllowancePolicy xstores")
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
}

// TestV2BobWithCrossplaneEdit: everything crossplane-edit lets Bob write
// in his namespace that would move a gated Bucket without a cause is
// refused: retargeting it with crossplane.io/external-name, pointing its
// controller reference away from its XStore, forging its observed
// generation through /status, pointing it at another ProviderConfig,
// clearing the XStore's conditions so it looks initializing, swapping the
// composition resource names Crossplane matches observed resources by,
// creating a Bucket named as a composed one for Crossplane to adopt. Alice's permitted resize afterwards reaches the data
// bucket exactly once, and the cloud bucket Bob aimed at is untouched.
func TestV2BobWithCrossplaneEdit(t *testing.T) {
	t.Parallel()
	key := createdStore(t, storeComposition(t), "v2-bob", "shop")
	bs := storeBuckets(t, key)
	data := bs["data"]
	victim := bs["logs"].GetName()
	bob := as(t, controlplane.Bob)
	refused := func(what string, err error, want ...string) {
		t.Helper()
		if err == nil || !kerrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want a denial", what, err)
			return
		}
		fixture.ErrorContains(t, err, want...)
	}

	b := data.DeepCopy()
	refused("bob sets external-name", controlplane.Update(bob, b, func() {
		ann := b.GetAnnotations()
		ann["crossplane.io/external-name"] = victim
		b.SetAnnotations(ann)
	}), "crossplane.io/external-name", "may not change what a gated managed resource acts on")

	// Crossplane matches observed resources to the pipeline's by their
	// composition resource name: swapped, Alice's permitted resize of the
	// data bucket would reach the logs bucket.
	b = data.DeepCopy()
	refused("bob renames the data bucket logs", controlplane.Update(bob, b, func() {
		ann := b.GetAnnotations()
		ann["crossplane.io/composition-resource-name"] = "logs"
		b.SetAnnotations(ann)
	}), "crossplane.io/composition-resource-name", "may not change what a gated managed resource acts on")
	// A hand-made Bucket carrying a composition resource name and the
	// victim's external name, for Crossplane to adopt.
	forProvider, _, _ := unstructured.NestedMap(data.Object, "spec", "forProvider")
	impostor := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": forProvider}}}
	impostor.SetGroupVersionKind(data.GroupVersionKind())
	impostor.SetNamespace(key.Namespace)
	impostor.SetName("bobs-impostor")
	impostor.SetAnnotations(map[string]string{"crossplane.io/composition-resource-name": "data", "crossplane.io/external-name": victim})
	refused("bob creates a Bucket named as a composed one", bob.Create(context.Background(), impostor),
		"crossplane.io/composition-resource-name", "may not create a gated managed resource as a composed one")

	b = data.DeepCopy()
	refused("bob repoints the controller reference", controlplane.Update(bob, b, func() {
		b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: controlplane.StoreGVK.GroupVersion().String(), Kind: "XStore", Name: "scratch",
			UID: types.UID("00000000-0000-4000-8000-00000000dddd"), Controller: ptr.To(true)}})
	}), "controller reference")

	b = data.DeepCopy()
	refused("bob forges the Bucket's observed generation", controlplane.UpdateStatus(bob, b, func() {
		conds, _, _ := unstructured.NestedSlice(b.Object, "status", "conditions")
		for i := range conds {
			if c, ok := conds[i].(map[string]any); ok {
				c["observedGeneration"] = b.GetGeneration() + 3
			}
		}
		_ = unstructured.SetNestedSlice(b.Object, conds, "status", "conditions")
	}), "status of Bucket")

	// The boundary of what Kausality protects: ProviderConfigs and their
	// Secrets are Bob's to edit under crossplane-edit, but which one a
	// gated Bucket acts through is a spec field like any other.
	b = data.DeepCopy()
	refused("bob points the Bucket at another ProviderConfig", controlplane.Update(bob, b, func() {
		_ = unstructured.SetNestedMap(b.Object, map[string]any{"kind": "ProviderConfig", "name": "bobs-account"}, "spec", "providerConfigRef")
	}), "spec.providerConfigRef")

	x := store(key.Namespace, key.Name, "", nil)
	refused("bob clears the XStore's conditions", controlplane.UpdateStatus(bob, x, func() {
		unstructured.RemoveNestedField(x.Object, "status", "conditions")
	}), "status of XStore")

	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes: %v", err)
	}
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	if got := storeBuckets(t, key)["data"].GetAnnotations()["crossplane.io/external-name"]; got != data.GetName() {
		t.Errorf("external-name of the data bucket = %q, want %q", got, data.GetName())
	}
	if s, _ := cp.Cloud.Get(victim); s.Size != 1 {
		t.Errorf("cloud size of %s = %d, want 1: Bob's target was written", victim, s.Size)
	}
}

// TestV2DeletionWhileAWildcardGateIsOpen: a tier change is granted every
// External verb, so until it is applied the data bucket's gate includes
// Delete; the cloud API keeps refusing the change, so the gate stays open.
// Alice deletes the XStore then (allow-delete set); its deleting rules
// grant no external Delete. The wildcard gate was opened for a change, not
// this deletion: it is revoked before the deletion goes on, and both cloud
// buckets are orphaned.
func TestV2DeletionWhileAWildcardGateIsOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := createdStore(t, storeComposition(t), "v2-wildcard", "shop")
	bs := storeBuckets(t, key)
	data := bs["data"]
	restore := cp.Cloud.Fail(data.GetName())
	defer restore()

	x := store(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "gold", "spec", "tier") }); err != nil {
		t.Fatalf("alice changes the tier: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the data bucket's gate to include Delete while the cloud refuses the change", func() (bool, string) {
		b := &unstructured.Unstructured{}
		b.SetGroupVersionKind(controlplane.MBucketGVK)
		if err := alice(t).Get(ctx, client.ObjectKeyFromObject(data), b); err != nil {
			return false, err.Error()
		}
		g, s := gate(b), controlplane.Condition(b, "Synced")
		return slices.Contains(g, "Delete") && s.Status == "False", fmt.Sprintf("gate %v, Synced %s — %s", g, s.Status, cp.DescribeStore(ctx, key))
	})

	deleteProtected(t, alice(t), x)
	fixture.Eventually(t, settleTimeout, "the XStore and its Buckets to go", func() (bool, string) {
		left := storeBuckets(t, key)
		xs, err := cp.Object(ctx, controlplane.StoreGVK, key)
		return err == nil && xs == nil && len(left) == 0, fmt.Sprintf("%d buckets left — %s", len(left), cp.DescribeStore(ctx, key))
	})
	time.Sleep(2 * controlplane.Poll)
	for res, b := range bs {
		if got := counts(b.GetName()); got != [3]int{1, 0, 0} {
			t.Errorf("bucket %s: external Create/Update/Delete = %v, want [1 0 0] (orphaned)", res, got)
		}
		if _, ok := cp.Cloud.Get(b.GetName()); !ok {
			t.Errorf("cloud bucket %s (%s) is gone", b.GetName(), res)
		}
	}
}

// TestV2DependenciesComposedDuringCreation: a composition that orders
// creation as public ones do (a resource composed only once what it needs
// exists, a value wired from one resource's status into another's spec)
// finishes creating on real core under Kausality with no manual help: the
// replica bucket, composed after the XStore's first reconcile, is created
// once and traced to Alice's creation of the XStore; the region wired into
// the logs bucket reaches the cloud with one update. Then the creation is
// over (KausalityCreated), and from then on the same needs a cause: when
// the data bucket's region drifts, the rewired tag is withheld.
func TestV2DependenciesComposedDuringCreation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp := compositionFrom(t, filepath.Join(v2Dir, "ordered.yaml"))
	namespace(t, "v2-ordered")
	x := store("v2-ordered", "shop", "small", nil)
	_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
	if err := alice(t).Create(ctx, x); err != nil {
		t.Fatalf("alice creates the XStore: %v", err)
	}
	key := client.ObjectKeyFromObject(x)
	fixture.Eventually(t, 2*settleTimeout, "the XStore created: three Buckets settled and KausalityCreated", func() (bool, string) {
		bs, err := cp.StoreBuckets(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		if len(bs) != 3 {
			return false, fmt.Sprintf("%d Buckets — %s", len(bs), cp.DescribeStore(ctx, key))
		}
		ok, why, err := cp.StoreSettled(ctx, key)
		if err != nil || !ok {
			return false, fmt.Sprintf("%s %v — %s", why, err, cp.DescribeStore(ctx, key))
		}
		xr, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || xr == nil {
			return false, fmt.Sprintf("no XStore: %v", err)
		}
		if c := controlplane.Condition(xr, v1alpha1.ConditionCreated); c.Status != "True" {
			return false, "XStore conditions: " + controlplane.Conditions(xr)
		}
		return true, ""
	})
	bs := storeBuckets(t, key)
	// The logs bucket is created once; the region wired in afterwards
	// reaches the cloud with one update, or with the creation itself when
	// it arrived before the provider created the bucket.
	fixture.Eventually(t, settleTimeout, "the wired region in the cloud", func() (bool, string) {
		for _, res := range []string{"replica", "logs"} {
			if s, ok := cp.Cloud.Get(bs[res].GetName()); !ok || s.Tags["source"] != "eu" {
				return false, fmt.Sprintf("cloud bucket %s = %+v — %s", res, s, cp.DescribeStore(ctx, key))
			}
		}
		return true, ""
	})
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 0, 0}, "replica": {1, 0, 0}})
	if got := counts(bs["logs"].GetName()); got[0] != 1 || got[1] > 1 || got[2] != 0 {
		t.Errorf("logs bucket: Create/Update/Delete = %v, want one Create and at most one Update", got)
	}
	for _, res := range []string{"replica", "logs"} {
		tr := traceOf(t, bs[res])
		if got := strings.Join(kinds(tr), " → "); got != "XStore → Bucket" || tr.Initiator() != controlplane.Alice {
			t.Errorf("bucket %s trace = %s from %q, want XStore → Bucket from %s (the XStore's creation)", res, got, tr.Initiator(), controlplane.Alice)
		}
	}

	// After the creation the same wiring is a change like any other: the
	// data bucket's region drifts in the cloud (its closed gate observes
	// and corrects nothing), the XStore reports the new region, and the
	// pipeline's new tag for the logs bucket has no cause: it is withheld
	// and reaches no cloud bucket.
	logs := bs["logs"].GetName()
	before := counts(logs)
	drifted, _ := cp.Cloud.Get(bs["data"].GetName())
	drifted.Region = "us"
	cp.Cloud.Put(bs["data"].GetName(), drifted)
	fixture.Eventually(t, settleTimeout, "the XStore to withhold the rewired tag of the logs bucket", func() (bool, string) {
		xr, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || xr == nil {
			return false, fmt.Sprint(err)
		}
		c := controlplane.Condition(xr, v1alpha1.ConditionAllowed)
		return c.Status == "False" && strings.Contains(c.Message, "spec.forProvider.tags.source"), cp.DescribeStore(ctx, key)
	})
	time.Sleep(3 * controlplane.Poll)
	if s, _ := cp.Cloud.Get(logs); s.Tags["source"] != "eu" || counts(logs) != before {
		t.Errorf("logs bucket after the region drifted: cloud %+v, calls %v (were %v); want the tag eu and no call: the rewiring has no cause", s, counts(logs), before)
	}
	if b := storeBuckets(t, key)["logs"]; !slices.Equal(gate(b), controlplane.ClosedGate) {
		t.Errorf("logs bucket gate = %v, want it closed", gate(b))
	}
}

// TestV2PolicyFailingAtRuntimeLocksNothing: a policy whose
// initializing.when compiles but fails on every XStore (a v2 XR has no
// top-level status.observedGeneration) locks none of them. The phase is
// taken as Steady, the strictest, and the rules decide: Alice sets
// kausality.io/allow-delete (a metadata-only write nobody could make
// while the error was a violation), her permitted resize reaches the data
// bucket exactly once, and Bob's is refused. The policy is cluster-wide,
// so this runs alone.
func TestV2PolicyFailingAtRuntimeLocksNothing(t *testing.T) {
	ctx := context.Background()
	key := createdStore(t, storeComposition(t), "v2-runtime-error", "shop")
	bs := storeBuckets(t, key)
	// Runs after the policy's deletion (cleanups run last first): the
	// scenarios after this one must not meet it in a cache.
	t.Cleanup(func() {
		gone(t, "xstores-phase")
		fixture.Eventually(t, settleTimeout, "the function to stop naming the removed policy", func() (bool, string) {
			x, err := cp.Object(ctx, controlplane.StoreGVK, key)
			if err != nil || x == nil {
				return false, fmt.Sprint(err)
			}
			return policy.ConditionTrue(x.Object, "KausalityAnnotationsValid"), cp.DescribeStore(ctx, key)
		})
	})
	policyForTest(t, `
metadata: {name: xstores-phase}
spec:
  for: {apiGroup: v2.example.com, apiVersion: v1alpha1, kind: XStore}
  initializing:
    when: "object.status.observedGeneration < 1"
`)
	// The function reads the policy once Crossplane resolves its
	// requirement again, and names the error on the XStore.
	fixture.Eventually(t, settleTimeout, "the XStore to name the failing initializing.when", func() (bool, string) {
		x, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || x == nil {
			return false, fmt.Sprint(err)
		}
		c := policy.Condition(x.Object, "KausalityAnnotationsValid")
		m, _ := c["message"].(string)
		return strings.Contains(m, "spec.initializing.when"), cp.DescribeStore(ctx, key)
	})

	x := store(key.Namespace, key.Name, "", nil)
	if err := allowDelete(alice(t), x); err != nil {
		t.Fatalf("alice sets %s while a policy fails at runtime: %v", v1alpha1.AnnotationAllowDelete, err)
	}
	err := controlplane.Update(as(t, controlplane.Bob), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") })
	fixture.ErrorContains(t, err, "spec.size", "AllowancePolicy xstores")
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes while a policy fails at runtime: %v", err)
	}
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
}

// TestV2OrphaningDeletionOpensNoDeleteGate: the XStore's deleting rules let
// Alice delete its cloud buckets, but she deletes it with
// propagationPolicy Orphan to keep them. No Delete gate opens: Bob, whom
// no rule names, then deletes a kept Bucket and its cloud bucket stays.
// The deleting policy is cluster-wide, so this runs alone.
func TestV2OrphaningDeletionOpensNoDeleteGate(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { gone(t, "xstores-deleting") })
	policyForTest(t, `
metadata: {name: xstores-deleting}
spec:
  for: {apiGroup: v2.example.com, apiVersion: v1alpha1, kind: XStore}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  initializing:
    policies:
    - target: {apiGroup: recorder.m.kausality.io, apiVersion: v1alpha1, resource: buckets}
      relation: ControllerChild
      verbs: [Create]
      mutations:
      - {jsonPath: "*", verbs: [Insert, Mutate]}
    - target: {external: {apiGroup: recorder.m.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Create]
  deleting:
    policies:
    - target: {external: {apiGroup: recorder.m.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Delete]
`)
	key := createdStore(t, storeComposition(t), "v2-orphan", "shop")
	bs := storeBuckets(t, key)
	x := store(key.Namespace, key.Name, "", nil)
	if err := allowDelete(alice(t), x); err != nil {
		t.Fatal(err)
	}
	if err := alice(t).Delete(ctx, x, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatalf("alice deletes the XStore orphaning its Buckets: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the XStore to go", func() (bool, string) {
		xs, err := cp.Object(ctx, controlplane.StoreGVK, key)
		return err == nil && xs == nil, fmt.Sprint(err)
	})
	bob := as(t, controlplane.Bob)
	for res, b := range bs {
		kept := &unstructured.Unstructured{}
		kept.SetGroupVersionKind(controlplane.MBucketGVK)
		if err := bob.Get(ctx, client.ObjectKeyFromObject(b), kept); err != nil {
			if kerrors.IsNotFound(err) {
				continue
			}
			t.Fatal(err)
		}
		if g := gate(kept); slices.Contains(g, "Delete") || slices.Contains(g, "*") {
			t.Errorf("kept bucket %s: gate %v opens Delete after an orphaning deletion", res, g)
		}
		if err := bob.Delete(ctx, kept); err != nil {
			t.Fatalf("bob deletes the kept bucket %s: %v", res, err)
		}
	}
	fixture.Eventually(t, settleTimeout, "the Buckets to go", func() (bool, string) {
		left := 0
		for _, b := range bs {
			if err := bob.Get(ctx, client.ObjectKeyFromObject(b), &unstructured.Unstructured{Object: map[string]any{"apiVersion": b.GetAPIVersion(), "kind": b.GetKind()}}); err == nil {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d left", left)
	})
	time.Sleep(2 * controlplane.Poll)
	for res, b := range bs {
		if got := counts(b.GetName()); got != [3]int{1, 0, 0} {
			t.Errorf("bucket %s: external Create/Update/Delete = %v, want [1 0 0] (kept in the cloud)", res, got)
		}
		if _, ok := cp.Cloud.Get(b.GetName()); !ok {
			t.Errorf("cloud bucket %s (%s) is gone", b.GetName(), res)
		}
	}
}

// gone waits until the AllowancePolicy name is deleted, and a little
// longer, so that the scenarios after a cluster-wide policy's own do not
// meet it in the provider's cache.
func gone(t *testing.T, name string) {
	t.Helper()
	fixture.Eventually(t, settleTimeout, "AllowancePolicy "+name+" to be gone", func() (bool, string) {
		err := cp.AdminClient().Get(context.Background(), client.ObjectKey{Name: name}, &v1alpha1.AllowancePolicy{})
		return kerrors.IsNotFound(err), fmt.Sprint(err)
	})
	time.Sleep(2 * controlplane.Poll)
}

// TestV2ValueRaisedDuringCreation: the logs bucket starts with
// tags.source "pending" and the pipeline raises it to the data bucket's
// region once that bucket reports it (testdata/v2/raised.yaml, after
// upbound's configuration-aws-lb-controller). While the XStore is created
// and nobody changed it, that change of a value is part of the creation:
// it reaches the cloud once, and the creation ends. Afterwards the same
// field changing without a cause (the data bucket's region drifts in the
// cloud, so the pipeline wants a new source) is withheld: the cloud keeps
// "eu".
func TestV2ValueRaisedDuringCreation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp := compositionFrom(t, filepath.Join(v2Dir, "raised.yaml"))
	namespace(t, "v2-raised")
	x := store("v2-raised", "shop", "small", nil)
	_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
	if err := alice(t).Create(ctx, x); err != nil {
		t.Fatalf("alice creates the XStore: %v", err)
	}
	key := client.ObjectKeyFromObject(x)
	var bs map[string]*unstructured.Unstructured
	fixture.Eventually(t, 2*settleTimeout, "the XStore created with the raised value in the cloud", func() (bool, string) {
		var err error
		if bs, err = cp.StoreBuckets(ctx, key); err != nil || len(bs) != 2 {
			return false, fmt.Sprintf("%d Buckets %v — %s", len(bs), err, cp.DescribeStore(ctx, key))
		}
		if s, ok := cp.Cloud.Get(bs["logs"].GetName()); !ok || s.Tags["source"] != "eu" {
			return false, fmt.Sprintf("cloud logs bucket %+v — %s", s, cp.DescribeStore(ctx, key))
		}
		xr, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || xr == nil {
			return false, fmt.Sprintf("no XStore: %v", err)
		}
		return controlplane.Condition(xr, v1alpha1.ConditionCreated).Status == "True", "XStore conditions: " + controlplane.Conditions(xr)
	})
	settleStore(t, key)
	logs := bs["logs"].GetName()
	got := counts(logs)
	if got[0] != 1 || got[1] > 1 || got[2] != 0 {
		t.Errorf("logs bucket: Create/Update/Delete = %v, want one Create and at most one Update (none when the value arrived before the creation)", got)
	}

	// After the creation: the data bucket's region drifts in the cloud,
	// the pipeline wants the logs bucket's source to follow, and nothing
	// caused that.
	cp.Cloud.Put(bs["data"].GetName(), recorder.State{Size: 1, Region: "us"})
	fixture.Eventually(t, settleTimeout, "the XStore naming the withheld source", func() (bool, string) {
		xr, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || xr == nil {
			return false, fmt.Sprint(err)
		}
		c := controlplane.Condition(xr, v1alpha1.ConditionAllowed)
		return c.Status == "False" && strings.Contains(c.Message, "spec.forProvider.tags.source"), controlplane.Conditions(xr)
	})
	time.Sleep(2 * controlplane.Poll)
	if s, _ := cp.Cloud.Get(logs); s.Tags["source"] != "eu" {
		t.Errorf("cloud logs bucket source = %q after the creation, want eu: an uncaused change reached the cloud", s.Tags["source"])
	}
	if now := counts(logs); now != got {
		t.Errorf("logs bucket: Create/Update/Delete = %v after the creation, want %v unchanged", now, got)
	}
}
