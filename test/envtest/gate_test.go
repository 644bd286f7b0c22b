package envtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/provider/gatecontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

var (
	closed = []string{"Observe", "LateInitialize"}
	open   = []string{"Observe", "Update", "LateInitialize"}
)

// bucket is a gated recording-provider Bucket controlled by xr, as
// Crossplane composes it.
func bucket(name string, size int64, xr *unstructured.Unstructured) *unstructured.Unstructured {
	b := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"forProvider":        map[string]any{"size": size, "region": "eu"},
		"managementPolicies": []any{"Observe", "LateInitialize"},
	}}}
	b.SetAPIVersion("recorder.kausality.io/v1alpha1")
	b.SetKind("Bucket")
	b.SetName(name)
	b.SetLabels(map[string]string{v1alpha1.LabelGated: "true", "crossplane.io/composite": xr.GetName()})
	b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Name: xr.GetName(), UID: xr.GetUID(), Controller: ptr.To(true)}})
	// The creation grant the function stamps while the composite
	// initializes: its Create gate approves the spec created.
	now := allowance.Timestamp(time.Now())
	create := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbCreate, 1, allowance.Trace{
		{APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Name: xr.GetName(), Generation: xr.GetGeneration(), User: crossplane, Timestamp: now},
		{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: name, Generation: 1, Timestamp: now},
	})
	b.SetAnnotations(map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{create})})
	return b
}

func policiesOf(o *unstructured.Unstructured) []string {
	p, _ := fieldpath.Pave(o.Object).GetStringArray("spec.managementPolicies")
	return p
}

// waitReconciled waits until the recording provider has observed o's
// current generation.
func waitReconciled(t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	fixture.Eventually(t, 30*time.Second, fmt.Sprintf("%s to be reconciled", o.GetName()), func() (bool, string) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			return false, err.Error()
		}
		og, ok := allowance.ObservedGeneration(o.Object)
		return ok && og == o.GetGeneration(), fmt.Sprintf("generation %d, observed %d (%v)", o.GetGeneration(), og, ok)
	})
}

func gateCondition(o *unstructured.Unstructured) xpv2.Condition {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(o.Object).GetValueInto("status", cs)
	return cs.GetCondition(gatecontroller.ConditionGate)
}

func TestGateOpensForOneUpdateAndCloses(t *testing.T) {
	ctx := context.Background()
	waitForRules(t, "xdatabases")
	waitForRules(t, "buckets")
	aliceC, cp := as(t, alice, "platform-team"), as(t, crossplane, "system:serviceaccounts")

	cloud.Put("gated-1", recorder.State{Size: 1, Region: "eu"})
	xr := object("XDatabase", "", "gated-x", map[string]any{"size": "1"}, nil)
	if err := aliceC.Create(ctx, xr); err != nil {
		t.Fatal(err)
	}
	reconciled(t, xr)
	b := bucket("gated-1", 1, xr)
	if err := cp.Create(ctx, b); err != nil {
		t.Fatalf("Crossplane creates the gated Bucket: %v", err)
	}
	waitReconciled(t, cp, b)
	if n := cloud.Count(recorder.VerbUpdate, "gated-1") + cloud.Count(recorder.VerbCreate, "gated-1"); n != 0 {
		t.Fatalf("the cloud saw %d writes for an up-to-date resource", n)
	}

	// Alice raises the XR's size: the XR earns an External Update allowance.
	if err := controlplane.Update(aliceC, xr, func() { _ = unstructured.SetNestedField(xr.Object, "2", "spec", "size") }); err != nil {
		t.Fatalf("alice changes the XR: %v", err)
	}
	var xa allowance.Allowance
	for _, a := range fixture.Allowances(t, xr) {
		if a.Relation == v1alpha1.RelationExternal {
			xa = a
		}
	}
	if xa.Initiator != alice || !xa.HasVerb("Update") {
		t.Fatalf("XR External allowance = %+v, want Update initiated by %s", xa, alice)
	}

	// Crossplane, playing the function, stamps the Bucket with the size and
	// the allowance that chains to the XR's; the gate opens in that write.
	if err := controlplane.Update(cp, b, func() {
		_ = unstructured.SetNestedField(b.Object, int64(2), "spec", "forProvider", "size")
		gen := b.GetGeneration() + 1
		a := allowance.Allowance{Relation: v1alpha1.RelationExternal, Target: xa.Target, Verbs: xa.Verbs, Generation: gen, Initiator: xa.Initiator,
			Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
			Trace: append(slices.Clone(xa.Trace), allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "gated-1", Generation: gen,
				Field: "spec.forProvider.size", Timestamp: allowance.Timestamp(time.Now())})}
		ann := b.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v1alpha1.AnnotationAllowances] = allowance.Format([]allowance.Allowance{a})
		b.SetAnnotations(ann)
	}); err != nil {
		t.Fatalf("Crossplane stamps the allowance: %v", err)
	}
	if got := policiesOf(b); !slices.Equal(got, open) {
		t.Errorf("gate after stamping = %v, want %v", got, open)
	}
	stamped := b.GetGeneration()

	// The gate's life is told by its policies, the allowances and Events:
	// a change that goes as it should writes no GateOpen condition.
	fixture.Eventually(t, 30*time.Second, "one Update, the allowance consumed and the gate closed", func() (bool, string) {
		if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		as := fixture.Allowances(t, b)
		c := gateCondition(b)
		return cloud.Count(recorder.VerbUpdate, "gated-1") == 1 && len(as) == 1 && as[0].Consumed && slices.Equal(policiesOf(b), closed) && c.Reason == "",
			fmt.Sprintf("updates %d, allowances %+v, gate %v, condition %s/%s", cloud.Count(recorder.VerbUpdate, "gated-1"), as, policiesOf(b), c.Status, c.Reason)
	})
	if og, _ := allowance.ObservedGeneration(b.Object); og < stamped {
		t.Errorf("observed generation %d has not caught up with the allowance's %d", og, stamped)
	}
	if s, _ := cloud.Get("gated-1"); s.Size != 2 {
		t.Errorf("cloud size = %d, want 2", s.Size)
	}
	fixture.Eventually(t, 10*time.Second, "a Consumed event on the Bucket", func() (bool, string) {
		l := &eventsv1.EventList{}
		if err := cp.List(ctx, l); err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Regarding.Name == "gated-1" && e.Reason == string(gatecontroller.ReasonConsumed) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(l.Items))
	})

	// A later spec change without an allowance never reaches the cloud.
	if err := controlplane.Update(cp, b, func() { _ = unstructured.SetNestedField(b.Object, int64(3), "spec", "forProvider", "size") }); err != nil {
		t.Fatalf("Crossplane changes the size without an allowance: %v", err)
	}
	if got := policiesOf(b); !slices.Equal(got, closed) {
		t.Errorf("gate after a change without allowance = %v, want %v", got, closed)
	}
	waitReconciled(t, cp, b)
	time.Sleep(2 * poll) // a few more observations, none may write
	if n := cloud.Count(recorder.VerbUpdate, "gated-1"); n != 1 {
		t.Errorf("external Updates = %d, want still 1", n)
	}
	if s, _ := cloud.Get("gated-1"); s.Size != 2 {
		t.Errorf("cloud size = %d, want 2 (the unallowed 3 withheld)", s.Size)
	}
}

func TestUnchainedAllowanceIsDenied(t *testing.T) {
	ctx := context.Background()
	waitForRules(t, "buckets")
	aliceC, cp := as(t, alice, "platform-team"), as(t, crossplane, "system:serviceaccounts")
	xr := object("XDatabase", "", "unchained-x", map[string]any{"size": "1"}, nil)
	if err := aliceC.Create(ctx, xr); err != nil {
		t.Fatal(err)
	}
	b := bucket("unchained-1", 1, xr)
	if err := cp.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Its creation gate opens and closes first; the writes meanwhile
	// would only make the update below conflict.
	fixture.Eventually(t, 30*time.Second, "the creation gate closed", func() (bool, string) {
		if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		return slices.Equal(policiesOf(b), closed), fmt.Sprint(policiesOf(b))
	})
	err := controlplane.Update(cp, b, func() {
		a := allowance.Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}}, Verbs: []string{"Update"},
			Generation: b.GetGeneration() + 1, Initiator: "mallory",
			Trace: allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "unchained-x", Generation: 42}, {APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "unchained-1", Generation: b.GetGeneration() + 1, Timestamp: allowance.Timestamp(time.Now())}}}
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationAllowances] = allowance.Format([]allowance.Allowance{a})
		b.SetAnnotations(ann)
	})
	fixture.ErrorContains(t, err, "denied", "does not chain to an unconsumed allowance of XDatabase unchained-x")

	// And nobody but Kausality and Crossplane may stamp one.
	err = controlplane.Update(aliceC, b, func() {
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationAllowances] = "[]"
		b.SetAnnotations(ann)
	})
	fixture.ErrorContains(t, err, "denied", "only Kausality and Crossplane may change")
}
