package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestV2AdoptAuditThenEnforce adopts Kausality on a Namespace the way
// docs/OPERATIONS.md says: in Audit mode first, then Enforce. In Audit,
// fifty XStores are composed with no gate (their Buckets keep the
// management policies of the Composition), Bob's resize, which no policy
// permits, is admitted and reaches the cloud while the XStore names what
// Enforce would have withheld, and a Bucket Bob creates by hand stays
// ungated. Switching the Namespace to Enforce makes no cloud call: each
// composed Bucket gets its closed gate in one spec write, the hand-made
// one with its next write, and Bob's next resizes are refused.
func TestV2AdoptAuditThenEnforce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "v2-adopt"
	namespace(t, ns)
	namespaceMode(t, ns, string(v1alpha1.ModeAudit))
	comp := storeComposition(t)

	// Fifty XRs of a running Namespace, as the adoption of a real one.
	keys := make([]client.ObjectKey, 50)
	for i := range keys {
		x := store(ns, fmt.Sprintf("shop-%d", i), "small", nil)
		_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
		if err := alice(t).Create(ctx, x); err != nil {
			t.Fatalf("alice creates XStore %s: %v", x.GetName(), err)
		}
		keys[i] = client.ObjectKeyFromObject(x)
	}
	composed := map[client.ObjectKey]map[string]*unstructured.Unstructured{}
	for _, key := range keys {
		fixture.Eventually(t, settleTimeout, fmt.Sprintf("XStore %s composed in Audit mode", key), func() (bool, string) {
			bs := storeBuckets(t, key)
			if len(bs) != 2 {
				return false, cp.DescribeStore(ctx, key)
			}
			for res, b := range bs {
				if b.GetLabels()[v1alpha1.LabelGated] == "true" || !slices.Equal(controlplane.Gate(b), []string{"*"}) || counts(b.GetName()) != [3]int{1, 0, 0} {
					return false, fmt.Sprintf("%s: gated %q, gate %v, calls %v — %s", res, b.GetLabels()[v1alpha1.LabelGated], controlplane.Gate(b), counts(b.GetName()), cp.DescribeStore(ctx, key))
				}
			}
			composed[key] = bs
			return true, ""
		})
	}

	// Bob's resize: admitted, reaches the cloud, and is named.
	x := store(ns, keys[0].Name, "", nil)
	if err := controlplane.Update(as(t, controlplane.Bob), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("bob resizes %s in Audit mode: %v, want it admitted", keys[0], err)
	}
	data := composed[keys[0]]["data"].GetName()
	// The function names it in its results, which Crossplane records as
	// Events of the XStore; its KausalityAllowed condition says so only
	// for the run that let it through.
	fixture.Eventually(t, settleTimeout, "Bob's resize to reach the cloud and be named on the XStore", func() (bool, string) {
		named := false
		evs := &corev1.EventList{}
		if err := cp.AdminClient().List(ctx, evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == keys[0].Name && strings.Contains(e.Message, "(Audit mode, let through)") && strings.Contains(e.Message, "spec.forProvider.size") {
				named = true
			}
		}
		return counts(data) == [3]int{1, 1, 0} && named, fmt.Sprintf("calls %v, named in an Event: %t", counts(data), named)
	})

	// A Bucket made by hand with every management policy stays ungated.
	hand := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(1), "region": "eu"}}}}
	hand.SetGroupVersionKind(controlplane.MBucketGVK)
	hand.SetNamespace(ns)
	hand.SetName("bobs-own")
	if err := as(t, controlplane.Bob).Create(ctx, hand); err != nil {
		t.Fatalf("bob creates Bucket bobs-own: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "Bob's own Bucket created in the cloud, ungated", func() (bool, string) {
		o, err := cp.Object(ctx, controlplane.MBucketGVK, client.ObjectKeyFromObject(hand))
		if err != nil || o == nil {
			return false, fmt.Sprint(err)
		}
		return counts("bobs-own") == [3]int{1, 0, 0} && o.GetLabels()[v1alpha1.LabelGated] != "true", fmt.Sprintf("calls %v, labels %v", counts("bobs-own"), o.GetLabels())
	})

	// Enforce: every composed Bucket gets its closed gate, with one spec
	// write each and no cloud call.
	calls := map[string][3]int{"bobs-own": counts("bobs-own")}
	generations := map[string]int64{}
	for _, key := range keys {
		for _, b := range storeBuckets(t, key) {
			calls[b.GetName()] = counts(b.GetName())
			generations[b.GetName()] = b.GetGeneration()
		}
	}
	namespaceMode(t, ns, string(v1alpha1.ModeEnforce))
	for _, key := range keys {
		fixture.Eventually(t, 3*time.Minute, fmt.Sprintf("the Buckets of %s gated closed", key), func() (bool, string) {
			for res, b := range storeBuckets(t, key) {
				if b.GetLabels()[v1alpha1.LabelGated] != "true" || !slices.Equal(controlplane.Gate(b), controlplane.ClosedGate) {
					return false, fmt.Sprintf("%s: gated %q, gate %v", res, b.GetLabels()[v1alpha1.LabelGated], controlplane.Gate(b))
				}
			}
			return true, ""
		})
		for res, b := range storeBuckets(t, key) {
			if d := b.GetGeneration() - generations[b.GetName()]; d != 1 {
				t.Errorf("%s bucket %s: %d spec writes while it was gated, want 1 (the gate closing)", key, res, d)
			}
		}
	}
	// Bob's own Bucket is gated closed by his next write; a resize of it
	// is then a hand edit no policy permits.
	if err := controlplane.Update(as(t, controlplane.Bob), hand, func() { hand.SetLabels(map[string]string{"team": "bob"}) }); err != nil {
		t.Fatalf("bob labels Bucket bobs-own: %v", err)
	}
	o, err := cp.Object(ctx, controlplane.MBucketGVK, client.ObjectKeyFromObject(hand))
	if err != nil || o == nil || o.GetLabels()[v1alpha1.LabelGated] != "true" || !slices.Equal(controlplane.Gate(o), controlplane.ClosedGate) {
		t.Errorf("Bucket bobs-own after Bob's write under Enforce = %v (%v), want gated closed", o, err)
	}
	err = controlplane.Update(as(t, controlplane.Bob), hand, func() {
		_ = unstructured.SetNestedField(hand.Object, int64(9), "spec", "forProvider", "size")
	})
	fixture.ErrorContains(t, err, "spec.forProvider.size", "is not permitted")
	err = controlplane.Update(as(t, controlplane.Bob), x, func() { _ = unstructured.SetNestedField(x.Object, "small", "spec", "size") })
	fixture.ErrorContains(t, err, "spec.size", "AllowancePolicy xstores")

	time.Sleep(2 * controlplane.Poll)
	for name, want := range calls {
		if got := counts(name); got != want {
			t.Errorf("bucket %s: cloud Create/Update/Delete %v after the switch to Enforce, want %v (no call)", name, got, want)
		}
	}
}
