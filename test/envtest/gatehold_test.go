package envtest

// A gate held against stale writers, freezes, expiry and conflicts.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/provider/gatecontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// gatedPair creates an XR changed by alice (so it holds an External Update
// allowance) and a reconciled gated Bucket it controls, whose external
// resource exists.
func gatedPair(t *testing.T, name string, xrAnnotations map[string]string) (*unstructured.Unstructured, *unstructured.Unstructured, allowance.Allowance) {
	t.Helper()
	ctx := context.Background()
	waitForRules(t, "xdatabases")
	waitForRules(t, "buckets")
	aliceC, cp := as(t, alice, "platform-team"), as(t, crossplane, "system:serviceaccounts")
	cloud.Put(name, recorder.State{Size: 1, Region: "eu"})
	xr := object("XDatabase", "", name+"-x", map[string]any{"size": "1"}, xrAnnotations)
	if err := aliceC.Create(ctx, xr); err != nil {
		t.Fatal(err)
	}
	reconciled(t, xr)
	b := bucket(name, 1, xr)
	if err := cp.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitReconciled(t, cp, b)
	if err := controlplane.Update(aliceC, xr, func() { _ = unstructured.SetNestedField(xr.Object, "2", "spec", "size") }); err != nil {
		t.Fatal(err)
	}
	for _, a := range fixture.Allowances(t, xr) {
		if a.Relation == v1alpha1.RelationExternal {
			return xr, b, a
		}
	}
	t.Fatalf("XR %s earned no External allowance", xr.GetName())
	return nil, nil, allowance.Allowance{}
}

// updates are the allowances of as that grant Update.
func updates(as []allowance.Allowance) []allowance.Allowance {
	return slices.DeleteFunc(slices.Clone(as), func(a allowance.Allowance) bool { return !a.HasVerb(v1alpha1.VerbUpdate) })
}

// stamp writes size and an allowance chained to xa onto b as Crossplane.
func stamp(t *testing.T, b *unstructured.Unstructured, size int64, xa allowance.Allowance, annotations map[string]string) {
	t.Helper()
	if err := controlplane.Update(as(t, crossplane, "system:serviceaccounts"), b, func() {
		_ = unstructured.SetNestedField(b.Object, size, "spec", "forProvider", "size")
		gen := b.GetGeneration() + 1
		a := allowance.Allowance{Relation: v1alpha1.RelationExternal, Target: xa.Target, Verbs: xa.Verbs, Generation: gen, Initiator: xa.Initiator,
			Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
			Trace: append(slices.Clone(xa.Trace), allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: b.GetName(), Generation: gen,
				Field: "spec.forProvider.size", Timestamp: allowance.Timestamp(clock.Now())})}
		ann := b.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		for k, v := range annotations {
			ann[k] = v
		}
		ann[v1alpha1.AnnotationAllowances] = allowance.Format([]allowance.Allowance{a})
		b.SetAnnotations(ann)
	}); err != nil {
		t.Fatalf("Crossplane stamps %s: %v", b.GetName(), err)
	}
}

func waitForEvent(t *testing.T, name, reason, eventType string) {
	t.Helper()
	fixture.Eventually(t, 15*time.Second, fmt.Sprintf("a %s event %s on %s", eventType, reason, name), func() (bool, string) {
		l := &eventsv1.EventList{}
		if err := as(t, "admin").List(context.Background(), l); err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == eventType {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(l.Items))
	})
}

// poke makes Bob write b without changing its spec (a trace label, which
// users may set), so the gate controller and admission look at it again.
func poke(t *testing.T, b *unstructured.Unstructured) {
	t.Helper()
	if err := controlplane.Update(as(t, bob), b, func() {
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationTraceLabelPrefix+"poke"] = time.Now().Format(time.RFC3339Nano)
		b.SetAnnotations(ann)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestStaleWriteCannotReopenAConsumedGate(t *testing.T) {
	ctx := context.Background()
	_, b, xa := gatedPair(t, "stale-1", nil)
	stamp(t, b, 2, xa, nil)
	stale := b.DeepCopy() // what a pipeline run that started now would emit
	fixture.Eventually(t, 30*time.Second, "consumption", func() (bool, string) {
		if err := as(t, "admin").Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		as := fixture.Allowances(t, b)
		return len(as) == 1 && as[0].Consumed, fmt.Sprintf("%+v", as)
	})

	// The stale run applies its output: the allowance unconsumed, the gate
	// open. Admission settles it against the stored object.
	cp := as(t, crossplane, "system:serviceaccounts")
	if err := controlplane.Update(cp, b, func() {
		b.SetAnnotations(stale.GetAnnotations())
		_ = unstructured.SetNestedStringSlice(b.Object, open, "spec", "managementPolicies")
	}); err != nil {
		t.Fatalf("stale write: %v", err)
	}
	if got := policiesOf(b); !slices.Equal(got, closed) {
		t.Errorf("gate after a stale write = %v, want %v", got, closed)
	}
	if as := fixture.Allowances(t, b); len(as) != 1 || !as[0].Consumed {
		t.Errorf("allowances after a stale write = %+v, want the one marked consumed", as)
	}
	waitReconciled(t, cp, b)
	time.Sleep(2 * poll)
	if n := cloud.Count(recorder.VerbUpdate, "stale-1"); n != 1 {
		t.Errorf("external Updates = %d, want exactly 1", n)
	}
}

func TestFreezeHoldsTheChangeUntilLifted(t *testing.T) {
	ctx := context.Background()
	freeze := map[string]string{v1alpha1.AnnotationFreeze: `{"user":"oncall@example.com","message":"incident 42"}`}
	xr, b, xa := gatedPair(t, "frozen-1", freeze)
	stamp(t, b, 2, xa, nil)
	if got := policiesOf(b); !slices.Equal(got, closed) {
		t.Errorf("gate under a frozen XR = %v, want %v", got, closed)
	}
	cp := as(t, crossplane, "system:serviceaccounts")
	waitReconciled(t, cp, b)
	fixture.Eventually(t, 15*time.Second, "the Frozen condition", func() (bool, string) {
		if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		c := gateCondition(b)
		return c.Reason == gatecontroller.ReasonFrozen && c.Status == corev1.ConditionFalse, string(c.Reason) + ": " + c.Message
	})
	waitForEvent(t, "frozen-1", string(gatecontroller.ReasonFrozen), corev1.EventTypeWarning)
	if n := cloud.Count(recorder.VerbUpdate, "frozen-1"); n != 0 {
		t.Errorf("external Updates under a freeze = %d, want 0", n)
	}
	// The freeze holds the Bucket's creation grant too: the XR was frozen
	// from the start.
	if as := updates(fixture.Allowances(t, b)); len(as) != 1 || as[0].Consumed {
		t.Fatalf("Update allowances under a freeze = %+v, want the one held, unconsumed", as)
	}

	// Lifting the freeze lets the held change through, exactly once.
	aliceC := as(t, alice, "platform-team")
	if err := controlplane.Update(aliceC, xr, func() {
		ann := xr.GetAnnotations()
		delete(ann, v1alpha1.AnnotationFreeze)
		xr.SetAnnotations(ann)
	}); err != nil {
		t.Fatal(err)
	}
	// The controller rechecks frozen gates periodically; a write to the
	// resource makes it look at once.
	poke(t, b)
	fixture.Eventually(t, 30*time.Second, "the held change applied and the gate closed", func() (bool, string) {
		if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		as := fixture.Allowances(t, b)
		return cloud.Count(recorder.VerbUpdate, "frozen-1") == 1 && len(updates(as)) == 1 && !slices.ContainsFunc(as, func(a allowance.Allowance) bool { return !a.Consumed }) && slices.Equal(policiesOf(b), closed),
			fmt.Sprintf("updates %d, allowances %+v, gate %v", cloud.Count(recorder.VerbUpdate, "frozen-1"), as, policiesOf(b))
	})
	if s, _ := cloud.Get("frozen-1"); s.Size != 2 {
		t.Errorf("cloud size after the freeze = %d, want 2", s.Size)
	}
}

func TestGateOpenTooLongExpires(t *testing.T) {
	ctx := context.Background()
	// A paused resource is never reconciled, so its allowance is never
	// consumed and only the limit closes the gate.
	_, b, xa := gatedPair(t, "expiring-1", nil)
	stamp(t, b, 2, xa, map[string]string{"crossplane.io/paused": "true"})
	if got := policiesOf(b); !slices.Equal(got, open) {
		t.Fatalf("gate after stamping = %v, want %v", got, open)
	}
	admin := as(t, "admin")
	// The controller saw it open: it says so in an Event, not in the
	// status.
	waitForEvent(t, "expiring-1", string(gatecontroller.ReasonOpened), corev1.EventTypeNormal)

	clock.Advance(11 * time.Minute)
	defer clock.Advance(-11 * time.Minute)
	// Any write makes the controller look again (it also comes back on its
	// own once the limit passes in real time).
	poke(t, b)
	fixture.Eventually(t, 15*time.Second, "the gate closed as expired", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		c := gateCondition(b)
		return slices.Equal(policiesOf(b), closed) && c.Reason == gatecontroller.ReasonExpired, fmt.Sprintf("%v %s", policiesOf(b), c.Reason)
	})
	waitForEvent(t, "expiring-1", string(gatecontroller.ReasonExpired), corev1.EventTypeWarning)
	if n := cloud.Count(recorder.VerbUpdate, "expiring-1"); n != 0 {
		t.Errorf("external Updates of a paused resource = %d, want 0", n)
	}
}

// TestStaleCopyIsAConflict: Bob writes a Bucket from a copy older than a
// Crossplane write that changed a protected annotation. He gets a
// Conflict, which clients retry, not a refusal for annotations he never
// touched.
func TestStaleCopyIsAConflict(t *testing.T) {
	ctx := context.Background()
	_, b, _ := gatedPair(t, "stale-copy-1", nil)
	bobC, cp := as(t, bob), as(t, crossplane, "system:serviceaccounts")
	stale := b.DeepCopy()
	if err := cp.Get(ctx, client.ObjectKeyFromObject(stale), stale); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.Update(cp, b, func() {
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationCompositionRevision] = "xdatabases-buckets-2"
		b.SetAnnotations(ann)
	}); err != nil {
		t.Fatal(err)
	}
	ann := stale.GetAnnotations()
	ann[v1alpha1.AnnotationTraceLabelPrefix+"team"] = "a"
	stale.SetAnnotations(ann)
	if err := bobC.Update(ctx, stale); !kerrors.IsConflict(err) {
		t.Errorf("bob's write from a stale copy: got %v, want a Conflict", err)
	}
}
