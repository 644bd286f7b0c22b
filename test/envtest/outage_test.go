package envtest

// What the API server admits while the provider cannot be reached.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// TestOnlyClosingPassesWithoutTheProvider registers copies of the managed
// and the composites webhooks whose endpoint refuses connections, as the
// provider's does while it is down, for one gated Bucket with an open gate
// and its XDatabase. A write that only narrows the gate is admitted (the
// API server skips the webhook by its match condition); every other write
// is refused, the narrowing ones that also change the spec, an annotation
// or a label among them. A provider's write that records nothing but
// crossplane-runtime's creation bookkeeping is admitted too, Bob's is not,
// and refused are those that retarget, resize, drop an annotation or open
// the gate alongside. Of the
// XDatabase, a write that changes nothing
// (Crossplane's rewrite of its resource references before it applies what
// it composed) is admitted, a change of its spec refused. Once the
// endpoint is gone from the path, the gate controller opens the gate again
// by its formula: a write that closes it is never a way to lose a change.
func TestOnlyClosingPassesWithoutTheProvider(t *testing.T) {
	ctx := context.Background()
	admin, bobC := as(t, "admin"), as(t, bob)
	xr, b, xa := gatedPair(t, "outage-1", nil)
	stamp(t, b, 2, xa, map[string]string{"crossplane.io/paused": "true"})
	for _, o := range []*unstructured.Unstructured{b, xr} {
		if err := controlplane.Update(admin, o, func() { o.SetLabels(withLabel(o.GetLabels(), "outage-test", "true")) }); err != nil {
			t.Fatal(err)
		}
	}
	if got := policiesOf(b); !slices.Equal(got, open) {
		t.Fatalf("gate after stamping = %v, want %v", got, open)
	}

	down := unreachableHooks(ctx, t, admin, "managed.kausality.io", "composites.kausality.io")
	poke := func() error {
		return controlplane.Update(bobC, b, func() {
			ann := b.GetAnnotations()
			ann[v1alpha1.AnnotationTraceLabelPrefix+"poke"] = time.Now().Format(time.RFC3339Nano)
			b.SetAnnotations(ann)
		})
	}
	fixture.Eventually(t, 15*time.Second, "a write refused by the unreachable webhook", func() (bool, string) {
		err := poke()
		return err != nil, fmt.Sprint(err)
	})

	write := func(fn func()) error { return controlplane.Update(bobC, b, fn) }
	narrow := func() { _ = unstructured.SetNestedStringSlice(b.Object, closed, "spec", "managementPolicies") }
	refused := map[string]func(){
		"narrows and resizes":   func() { narrow(); _ = unstructured.SetNestedField(b.Object, int64(9), "spec", "forProvider", "size") },
		"narrows and annotates": func() { narrow(); b.SetAnnotations(withLabel(b.GetAnnotations(), "example.org/note", "x")) },
		"narrows and relabels":  func() { narrow(); b.SetLabels(withLabel(b.GetLabels(), "team", "x")) },
		"opens to everything":   func() { _ = unstructured.SetNestedStringSlice(b.Object, []string{"*"}, "spec", "managementPolicies") },
		"narrows below Observe": func() {
			_ = unstructured.SetNestedStringSlice(b.Object, []string{"LateInitialize"}, "spec", "managementPolicies")
		},
		"narrows to a new verb": func() {
			_ = unstructured.SetNestedStringSlice(b.Object, []string{"Observe", "Create"}, "spec", "managementPolicies")
		},
		"narrows and drops spec": func() { narrow(); unstructured.RemoveNestedField(b.Object, "spec", "forProvider") },
	}
	for what, fn := range refused {
		if err := write(fn); err == nil {
			t.Errorf("Bob's write that %s was admitted with the webhook unreachable: stored %v", what, b.Object["spec"])
		}
	}
	// Writes from a copy older than the stored object: the API server
	// answers them with the Conflict its resource version check gives,
	// without the webhook, so a client reads again and retries.
	stale := func(o *unstructured.Unstructured, fn func(*unstructured.Unstructured)) {
		t.Helper()
		old := o.DeepCopy()
		if err := admin.Get(ctx, client.ObjectKeyFromObject(o), old); err != nil {
			t.Fatal(err)
		}
		// A status write moves the stored object on without the
		// unreachable webhooks, which see only the main resource.
		if err := controlplane.UpdateStatus(admin, o, func() {
			cs, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			cs = append(cs, map[string]any{"type": "OutageTest" + old.GetResourceVersion(), "status": "True", "reason": "Test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
			_ = unstructured.SetNestedSlice(o.Object, cs, "status", "conditions")
		}); err != nil {
			t.Fatal(err)
		}
		fn(old)
		if err := bobC.Update(ctx, old); !apierrors.IsConflict(err) {
			t.Errorf("Bob's write of %s from resource version %s (stored %s) = %v, want a Conflict", old.GetName(), old.GetResourceVersion(), o.GetResourceVersion(), err)
		}
	}
	stale(b, func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringSlice(o.Object, closed, "spec", "managementPolicies")
	})
	stale(b, func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, int64(9), "spec", "forProvider", "size")
	})
	stale(xr, func(o *unstructured.Unstructured) { _ = unstructured.SetNestedField(o.Object, "3", "spec", "size") })
	if err := write(narrow); err != nil {
		t.Fatalf("a write that only closes the gate was refused with the webhook unreachable: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if got := policiesOf(b); !slices.Equal(got, closed) {
		t.Fatalf("gate after the closing write = %v, want %v", got, closed)
	}

	// crossplane-runtime's creation bookkeeping, written around the Create.
	bookkeeping := func(k string) func() {
		return func() { b.SetAnnotations(withLabel(b.GetAnnotations(), k, time.Now().UTC().Format(time.RFC3339))) }
	}
	// A provider's passes; Bob's does not: a pending marker stops
	// crossplane-runtime from reconciling the resource, and a user whom no
	// rule lets change Crossplane's metadata must not wedge it.
	providerC := as(t, "system:serviceaccount:crossplane-system:provider-recorder")
	for _, k := range []string{"crossplane.io/external-create-pending", "crossplane.io/external-create-succeeded"} {
		if err := write(bookkeeping(k)); err == nil {
			t.Errorf("Bob's write of only %s was admitted with the webhook unreachable", k)
		}
		if err := controlplane.Update(providerC, b, bookkeeping(k)); err != nil {
			t.Errorf("a provider's write of only %s was refused with the webhook unreachable: %v", k, err)
		}
	}
	for what, fn := range map[string]func(){
		"records a creation and retargets": func() {
			bookkeeping("crossplane.io/external-create-failed")()
			b.SetAnnotations(withLabel(b.GetAnnotations(), "crossplane.io/external-name", "victim"))
		},
		"records a creation and resizes": func() {
			bookkeeping("crossplane.io/external-create-failed")()
			_ = unstructured.SetNestedField(b.Object, int64(9), "spec", "forProvider", "size")
		},
		"records a creation and drops one": func() {
			bookkeeping("crossplane.io/external-create-failed")()
			ann := b.GetAnnotations()
			delete(ann, "crossplane.io/paused")
			b.SetAnnotations(ann)
		},
		"records a creation and opens gate": func() {
			bookkeeping("crossplane.io/external-create-failed")()
			_ = unstructured.SetNestedStringSlice(b.Object, []string{"*"}, "spec", "managementPolicies")
		},
	} {
		if err := write(fn); err == nil {
			t.Errorf("Bob's write that %s was admitted with the webhook unreachable: stored %v", what, b.Object["spec"])
		}
	}

	if err := admin.Update(ctx, xr); err != nil {
		t.Errorf("a write of the XDatabase that changes nothing was refused with the webhook unreachable: %v", err)
	}
	if err := controlplane.Update(admin, xr, func() { _ = unstructured.SetNestedField(xr.Object, "3", "spec", "size") }); err == nil {
		t.Error("a change of the XDatabase's spec was admitted with the webhook unreachable")
	}

	if err := admin.Delete(ctx, down); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 15*time.Second, "the gate controller opening the gate again by its formula", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		return slices.Equal(policiesOf(b), open), fmt.Sprint(policiesOf(b))
	})
}

// unreachableHooks registers the provider's dynamic mutating webhooks
// named again, for objects labelled outage-test only, at an address
// nothing listens on, and removes them when the test ends. The API server
// calls mutating webhooks in the order of their configurations' names:
// these come first, so they see each write as sent, not as the provider's
// own webhooks (up in this test) rewrote it.
func unreachableHooks(ctx context.Context, t *testing.T, admin client.Client, names ...string) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	dynamic := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := admin.Get(ctx, client.ObjectKey{Name: policycontroller.DynamicName}, dynamic); err != nil {
		t.Fatal(err)
	}
	down := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "a-kausality-envtest-unreachable"}}
	// A free port, closed again: nothing listens there.
	addr, err := render.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	down.Webhooks = unreachableCopies(t, dynamic.Webhooks, names, func(h *admissionregistrationv1.MutatingWebhook) *string { return &h.Name }, func(h *admissionregistrationv1.MutatingWebhook) {
		h.Name, h.ClientConfig, h.ObjectSelector, h.TimeoutSeconds = unreachableAt(addr, h.Name, h.ClientConfig, h.ObjectSelector)
	})
	if err := admin.Create(ctx, down); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), down) })
	return down
}

// unreachableCopies are copies of the webhooks of hooks named names, each
// made unreachable by down; a name the provider does not register fails
// the test.
func unreachableCopies[H any](t *testing.T, hooks []H, names []string, nameOf func(*H) *string, down func(*H)) []H {
	t.Helper()
	out := make([]H, 0, len(names))
	for _, name := range names {
		i := slices.IndexFunc(hooks, func(h H) bool { return *nameOf(&h) == name })
		if i < 0 {
			t.Fatalf("the provider registers no %s webhook", name)
		}
		h := hooks[i]
		down(&h)
		out = append(out, h)
	}
	return out
}

// unreachableAt is what a copy of the webhook name, with client config cc
// and object selector sel, gets to fail as the provider's does while it is
// down: a name of its own, addr (where nothing listens) as its endpoint,
// objects labelled outage-test only, and a short timeout.
func unreachableAt(addr, name string, cc admissionregistrationv1.WebhookClientConfig, sel *metav1.LabelSelector) (string, admissionregistrationv1.WebhookClientConfig, *metav1.LabelSelector, *int32) {
	out := &metav1.LabelSelector{MatchLabels: map[string]string{"outage-test": "true"}}
	if sel != nil {
		out = sel.DeepCopy()
		out.MatchLabels = withLabel(out.MatchLabels, "outage-test", "true")
	}
	return "unreachable." + name, admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + "/down"), CABundle: cc.CABundle}, out, ptr.To[int32](2)
}

// withLabel is m (labels or annotations) with k set to v.
func withLabel(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// TestStatusWritesWhileDown: with the status webhooks unreachable, as while
// every provider replica is down, Crossplane still writes an XR's status
// (its conditions stay current for `kubectl wait` and GitOps health
// checks), a provider still writes its managed resource's, and Bob's write
// of either, which the webhook would refuse, is refused: the match
// condition skips only the writers the webhook admits anyway.
func TestStatusWritesWhileDown(t *testing.T) {
	ctx := context.Background()
	admin := as(t, "admin")
	xr, b, _ := gatedPair(t, "outage-status", nil)
	for _, o := range []*unstructured.Unstructured{b, xr} {
		if err := controlplane.Update(admin, o, func() { o.SetLabels(withLabel(o.GetLabels(), "outage-test", "true")) }); err != nil {
			t.Fatal(err)
		}
	}
	dynamic := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := admin.Get(ctx, client.ObjectKey{Name: policycontroller.DynamicName}, dynamic); err != nil {
		t.Fatal(err)
	}
	addr, err := render.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	down := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "a-kausality-envtest-status-unreachable"}}
	down.Webhooks = unreachableCopies(t, dynamic.Webhooks, []string{"status.kausality.io", "managed-status.kausality.io"}, func(h *admissionregistrationv1.ValidatingWebhook) *string { return &h.Name }, func(h *admissionregistrationv1.ValidatingWebhook) {
		h.Name, h.ClientConfig, h.ObjectSelector, h.TimeoutSeconds = unreachableAt(addr, h.Name, h.ClientConfig, h.ObjectSelector)
	})
	if err := admin.Create(ctx, down); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), down) })

	condition := func(o *unstructured.Unstructured, reason string) func() {
		return func() {
			_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{"type": "Ready", "status": "False", "reason": reason, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
		}
	}
	bobC := as(t, bob)
	fixture.Eventually(t, 15*time.Second, "Bob's status write refused by the unreachable webhook", func() (bool, string) {
		err := controlplane.UpdateStatus(bobC, xr, condition(xr, "Forged"))
		return err != nil, fmt.Sprint(err)
	})
	if err := controlplane.UpdateStatus(as(t, crossplane, "system:serviceaccounts"), xr, condition(xr, "Creating")); err != nil {
		t.Errorf("Crossplane's status write of the XDatabase was refused with the webhook unreachable: %v", err)
	}
	provider := as(t, "system:serviceaccount:crossplane-system:provider-recorder", "system:serviceaccounts")
	if err := controlplane.UpdateStatus(provider, b, condition(b, "Creating")); err != nil {
		t.Errorf("a provider's status write of its gated Bucket was refused with the webhook unreachable: %v", err)
	}
	if err := controlplane.UpdateStatus(bobC, b, condition(b, "Forged")); err == nil {
		t.Error("Bob's status write of the gated Bucket was admitted with the webhook unreachable")
	}
}
