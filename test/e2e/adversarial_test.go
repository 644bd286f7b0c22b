package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// The adversarial suite: Bob has Crossplane's edit role in his namespace
// (Claims) and, cluster-wide, the edit role Crossplane's RBAC manager
// generates for the recording provider (Buckets and their status), and no
// policy lets him initiate anything (DESIGN §4a). Each
// scenario is a route to the cloud that was open before Kausality closed it
// and asserts the cloud calls exactly.

// TestBobAdoptsAProductionBucket: Bob creates his own Bucket naming Alice's
// cloud bucket as its external name, with managementPolicies ["*"] and
// another size. Created outside any pipeline, it was never gated; a
// restricted kind is now gated on creation, so it only observes, and
// deleting it orphans the cloud bucket.
func TestBobAdoptsAProductionBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := created(t, composition(t, 1), "adopt", "orders")
	data := buckets(t, key)["data"].GetName()

	b := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"forProvider":        map[string]any{"size": int64(9), "region": "eu"},
		"managementPolicies": []any{"*"},
	}}}
	b.SetGroupVersionKind(controlplane.BucketGVK)
	b.SetName("bobs-" + data)
	b.SetAnnotations(map[string]string{"crossplane.io/external-name": data})
	bob := as(t, controlplane.Bob)
	// The provider's edit role includes status: forging what the provider
	// observed on Alice's gated Bucket would count allowances consumed.
	alices := buckets(t, key)["data"]
	err := controlplane.UpdateStatus(bob, alices, func() {
		_ = unstructured.SetNestedField(alices.Object, alices.GetGeneration()+3, "status", "observedGeneration")
	})
	if !kerrors.IsForbidden(err) {
		t.Errorf("bob writes the status of Alice's gated Bucket: got %v, want a denial", err)
	}
	fixture.ErrorContains(t, err, "status of Bucket")
	if err := bob.Create(ctx, b); err != nil {
		t.Fatalf("bob creates his Bucket: %v", err)
	}
	if g := gate(b); !slices.Equal(g, controlplane.ClosedGate) || b.GetLabels()[v1alpha1.LabelGated] != "true" {
		t.Fatalf("bob's Bucket as stored: gate %v, labels %v; want gated %v", g, b.GetLabels(), controlplane.ClosedGate)
	}
	if tr := traceOf(t, b); len(tr) != 1 || tr[0].User != controlplane.Bob {
		t.Errorf("bob's Bucket trace = %v, want one hop naming %s", tr, controlplane.Bob)
	}
	fixture.Eventually(t, settleTimeout, "the provider to observe bob's Bucket", func() (bool, string) {
		if err := bob.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		s := controlplane.Condition(b, "Synced")
		return s.Status == "True" && s.ObservedGeneration == b.GetGeneration(), controlplane.Conditions(b)
	})
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(data); s.Size != 1 {
		t.Errorf("cloud size of %s = %d, want 1", data, s.Size)
	}

	if err := bob.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "bob's Bucket to go", func() (bool, string) {
		err := bob.Get(ctx, client.ObjectKeyFromObject(b), b)
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	if _, ok := cp.Cloud.Get(data); !ok {
		t.Errorf("cloud bucket %s is gone", data)
	}
}

// TestBobSwitchesTheComposition: Bob points Alice's Claim at a Composition
// without the kausality step. The switch is a watched change no rule
// permits: denied, and nothing reaches the cloud.
func TestBobSwitchesTheComposition(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "switch", "orders")
	ungated := ungatedComposition(t)
	c := claim(key.Namespace, key.Name, "", nil)
	err := controlplane.Update(as(t, controlplane.Bob), c, func() {
		_ = unstructured.SetNestedField(c.Object, ungated, "spec", "compositionRef", "name")
	})
	fixture.ErrorContains(t, err, "spec.compositionRef", "AllowancePolicy claims", "chooses what composes the object")
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
}

// TestBobRepointsTheClaim: Bob points Alice's Claim at an XR name that
// does not exist, for the claim controller to create an XR (and its cloud
// buckets) under Alice's trace. Only Crossplane binds a Claim: refused,
// and nothing reaches the cloud.
func TestBobRepointsTheClaim(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "repoint", "orders")
	c := claim(key.Namespace, key.Name, "", nil)
	err := controlplane.Update(as(t, controlplane.Bob), c, func() {
		_ = unstructured.SetNestedField(c.Object, "ghost-xr", "spec", "resourceRef", "name")
	})
	fixture.ErrorContains(t, err, "spec.resourceRef", "only Crossplane binds a Claim and its composite")
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
}

// TestPermittedSwitchKeepsGates: a policy lets Alice switch compositions,
// and she points her Claim at one without the kausality step. Crossplane
// applies its output, which drops the gated label and the gate; the
// resources stay gated and closed, so the new region never reaches the
// cloud. The policy is cluster-wide, so this runs alone.
func TestPermittedSwitchKeepsGates(t *testing.T) {
	policyForTest(t, `
metadata: {name: claims-switch}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: DatabaseClaim}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  rules:
  - trigger: spec.compositionRef
    policies:
    - target: {apiGroup: example.com, apiVersion: v1alpha1, resource: xdatabases}
      relation: ControllerChild
      verbs: [Update]
      mutations: [{jsonPath: spec.compositionRef, verbs: [Mutate]}]
`)
	key := created(t, composition(t, 1), "switched", "orders")
	ungated := ungatedComposition(t)
	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() {
		_ = unstructured.SetNestedField(c.Object, ungated, "spec", "compositionRef", "name")
	}); err != nil {
		t.Fatalf("alice's permitted switch: %v", err)
	}
	ctx := context.Background()
	fixture.Eventually(t, settleTimeout, "Crossplane to apply the ungated Composition's output", func() (bool, string) {
		for _, b := range buckets(t, key) {
			if r, _, _ := unstructured.NestedString(b.Object, "spec", "forProvider", "region"); r != "us" {
				return false, cp.Describe(ctx, key)
			}
		}
		return true, ""
	})
	for res, b := range buckets(t, key) {
		if b.GetLabels()[v1alpha1.LabelGated] != "true" || !slices.Equal(gate(b), controlplane.ClosedGate) {
			t.Errorf("bucket %s: labels %v, gate %v; want it gated and closed", res, b.GetLabels(), gate(b))
		}
	}
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	for res, b := range buckets(t, key) {
		if s, _ := cp.Cloud.Get(b.GetName()); s.Region != "eu" {
			t.Errorf("bucket %s cloud region = %q, want eu", res, s.Region)
		}
	}
}

// ungatedComposition applies testdata/composition-ungated.yaml as the
// test's own and returns its name.
func ungatedComposition(t *testing.T) string {
	t.Helper()
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-") + "-ungated"
	if err := cp.Composition(context.Background(), filepath.Join("testdata", "composition-ungated.yaml"), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestBobCannotWritePolicies: whoever may write AllowancePolicies and
// UpgradeAllowances may grant everything. They are cluster-scoped, so
// Crossplane's edit role, bound in a namespace, does not reach them:
// Bob can neither create one nor loosen the existing ones.
func TestBobCannotWritePolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bob := as(t, controlplane.Bob)
	p := &v1alpha1.AllowancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "bobs"},
		Spec: v1alpha1.AllowancePolicySpec{For: v1alpha1.ObjectKind{APIGroup: "example.com", Kind: "DatabaseClaim"}}}
	if err := bob.Create(ctx, p); !kerrors.IsForbidden(err) {
		t.Errorf("bob creates an AllowancePolicy: got %v, want Forbidden", err)
	}
	u := &v1alpha1.UpgradeAllowance{ObjectMeta: metav1.ObjectMeta{Name: "bobs"},
		Spec: v1alpha1.UpgradeAllowanceSpec{CompositionRevisions: []string{"*"}}}
	if err := bob.Create(ctx, u); !kerrors.IsForbidden(err) {
		t.Errorf("bob creates an UpgradeAllowance for every revision: got %v, want Forbidden", err)
	}
	if err := bob.Delete(ctx, &v1alpha1.AllowancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "claims"}}); !kerrors.IsForbidden(err) {
		t.Errorf("bob deletes AllowancePolicy claims: got %v, want Forbidden", err)
	}
}

// TestLoggedChangeDoesNotRideAlong: while an administrator has the
// Namespace in Log mode, a new Composition revision changes the data
// bucket's tier; Log mode lets it into the Bucket's spec, and no allowance
// opens the gate. Back in Enforce, Alice's permitted resize must not carry
// the tier to the cloud under her trace (DESIGN §4a: an Update gate never
// ships an unrelated pending spec difference): the gate stays closed, and
// the Claim says which field holds it.
func TestLoggedChangeDoesNotRideAlong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp := composition(t, 1)
	key := created(t, comp, "ride", "orders")
	mode := func(m string) { namespaceMode(t, key.Namespace, m) }
	mode(string(v1alpha1.ModeLog))
	if err := cp.Composition(ctx, filepath.Join("testdata", "composition-3.yaml"), comp); err != nil {
		t.Fatal(err)
	}
	tier := func() string {
		s, _, _ := unstructured.NestedString(buckets(t, key)["data"].Object, "spec", "forProvider", "tags", "tier")
		return s
	}
	fixture.Eventually(t, settleTimeout, "Log mode to let the tier into the data bucket", func() (bool, string) {
		return tier() == "premium", cp.Describe(ctx, key)
	})
	mode("")

	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice's permitted change: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the Claim to name the pending tier that holds the gate", func() (bool, string) {
		cl, err := cp.Object(ctx, controlplane.ClaimGVK, key)
		if err != nil || cl == nil {
			return false, fmt.Sprint(err)
		}
		a := controlplane.Condition(cl, "KausalityAllowed")
		size, _, _ := unstructured.NestedInt64(buckets(t, key)["data"].Object, "spec", "forProvider", "size")
		return size == 2 && a.Status == "False" && strings.Contains(a.Message, "spec.forProvider.tags.tier") && strings.Contains(a.Message, "no open allowance covers it"),
			a.Message + " | " + cp.Describe(ctx, key)
	})
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	expectClosed(t, key)
	if s, _ := cp.Cloud.Get(buckets(t, key)["data"].GetName()); s.Tags["tier"] != "standard" || s.Size != 1 {
		t.Errorf("cloud = tier %q size %d, want standard and 1: the pending tier rode along", s.Tags["tier"], s.Size)
	}
	fixture.Eventually(t, settleTimeout, "the data bucket's gate to say why it stays closed", func() (bool, string) {
		c := controlplane.Condition(buckets(t, key)["data"], "GateOpen")
		return c.Reason == "UncoveredChange" && strings.Contains(c.Message, "spec.forProvider.tags.tier"), string(c.Reason) + ": " + c.Message
	})
}
