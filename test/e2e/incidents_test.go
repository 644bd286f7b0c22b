package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

func TestS5HandEditOfManagedResource(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "s5", "orders")
	data := buckets(t, key)["data"]

	// Bob resizes the data bucket by hand. No policy permits it: denied,
	// as the edit would otherwise wait in the spec and reach the cloud
	// with the next change that opens the gate.
	err := controlplane.Update(as(t, controlplane.Bob), data, func() { _ = unstructured.SetNestedField(data.Object, int64(7), "spec", "forProvider", "size") })
	fixture.ErrorContains(t, err, "spec.forProvider.size", "hand edit of a gated managed resource")
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(data.GetName()); s.Size != 1 {
		t.Errorf("cloud size = %d, want 1", s.Size)
	}

	// A policy for Buckets lets Alice initiate exactly such an edit.
	policyForTest(t, fixture.BucketsPolicyNamed("buckets-by-hand"))
	logs := buckets(t, key)["logs"]
	fixture.Eventually(t, 30*time.Second, "the policy to apply to Bucket edits", func() (bool, string) {
		// Bob is not a subject: with the policy in place his edit is denied.
		probe := logs.DeepCopy()
		err := controlplane.Update(as(t, controlplane.Bob), probe, func() { _ = unstructured.SetNestedField(probe.Object, int64(9), "spec", "forProvider", "size") })
		return err != nil && strings.Contains(err.Error(), "AllowancePolicy buckets-by-hand"), fmt.Sprint(err)
	})
	if err := controlplane.Update(alice(t), logs, func() { _ = unstructured.SetNestedField(logs.Object, int64(3), "spec", "forProvider", "size") }); err != nil {
		t.Fatalf("alice's edit: %v", err)
	}
	if tr := traceOf(t, logs); len(tr) != 1 || tr[0].User != controlplane.Alice {
		t.Errorf("trace after alice's edit = %+v, want one origin hop by alice", tr)
	}
	settle(t, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 1, 0}})
	expectClosed(t, key)
	if s, _ := cp.Cloud.Get(logs.GetName()); s.Size != 3 {
		t.Errorf("cloud size of logs = %d, want alice's 3", s.Size)
	}
}

func TestS7AnnotationsAreProtected(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "s7", "orders")
	data := buckets(t, key)["data"]

	b := data.DeepCopy()
	err := controlplane.Update(as(t, controlplane.Bob), b, func() {
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationAllowances] = `[{"relation":"External","target":{"external":{"kind":"*"}},"verbs":["*"],"generation":99}]`
		b.SetAnnotations(ann)
	})
	fixture.ErrorContains(t, err, "annotation kausality.io/allowances", "only Kausality and Crossplane may change")
	c := claim(key.Namespace, key.Name, "", nil)
	err = controlplane.Update(alice(t), c, func() {
		ann := c.GetAnnotations()
		ann[v1alpha1.AnnotationTrace] = `[]`
		c.SetAnnotations(ann)
	})
	fixture.ErrorContains(t, err, "annotation kausality.io/trace", "only Kausality and Crossplane may change")

	// Even a trusted writer (Crossplane's service account) cannot store a
	// malformed annotation, and the stored one is kept.
	before := buckets(t, key)["data"].GetAnnotations()[v1alpha1.AnnotationAllowances]
	b = data.DeepCopy()
	err = controlplane.Update(as(t, controlplane.CrossplaneUser), b, func() {
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationAllowances] = `[{"relation":"External",`
		b.SetAnnotations(ann)
	})
	fixture.ErrorContains(t, err, "cannot parse annotation kausality.io/allowances on Bucket "+data.GetName())
	// Nothing of the malformed write is stored: what is stored still
	// parses and holds no allowance that was not there before. The next
	// pipeline run may meanwhile have pruned a consumed one, as it should.
	after := buckets(t, key)["data"]
	was, err := allowance.Parse(before)
	if err != nil {
		t.Fatalf("stored allowances before the write: %v", err)
	}
	for _, a := range fixture.Allowances(t, after) {
		if !slices.ContainsFunc(was, a.Same) {
			t.Errorf("allowances changed from %q to %q: %+v is new", before, after.GetAnnotations()[v1alpha1.AnnotationAllowances], a)
		}
	}
}

// deleteClaim deletes a protected Claim as Alice, with allow-delete, and
// waits until Crossplane deleted its XR and the garbage collector the
// composed Buckets.
func deleteClaim(t *testing.T, key client.ObjectKey) {
	t.Helper()
	deleteClaimAs(t, alice(t), key)
}

// deleteClaimAs is deleteClaim by another user.
func deleteClaimAs(t *testing.T, user client.Client, key client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	c := claim(key.Namespace, key.Name, "", nil)
	err := user.Delete(ctx, c.DeepCopy())
	fixture.ErrorContains(t, err, fmt.Sprintf("DatabaseClaim %s is protected from deletion by AllowancePolicy claims", key), `kausality.io/allow-delete: "true"`)

	deleteProtected(t, user, c)
	x := xr(t, key)
	fixture.Eventually(t, settleTimeout, "the XR and its Buckets to be deleted", func() (bool, string) {
		gone, err := cp.Object(ctx, controlplane.XRGVK, client.ObjectKeyFromObject(x))
		if err != nil {
			return false, err.Error()
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(controlplane.BucketGVK.GroupVersion().WithKind("BucketList"))
		if err := as(t, "admin").List(ctx, l, client.MatchingLabels{"crossplane.io/composite": x.GetName()}); err != nil {
			return false, err.Error()
		}
		return gone == nil && len(l.Items) == 0, fmt.Sprintf("XR there: %v, %d Buckets", gone != nil, len(l.Items))
	})
}

func TestS6DeletingAProtectedClaim(t *testing.T) {
	t.Parallel()
	key := created(t, composition(t, 1), "s6", "orders")
	bs := buckets(t, key)
	deleteClaim(t, key)
	// The XDatabase policy's deleting phase names no external Delete: the
	// cloud resources are orphaned, not destroyed.
	for res, b := range bs {
		if n := cp.Cloud.Count(recorder.VerbDelete, b.GetName()); n != 0 {
			t.Errorf("bucket %s: %d external Deletes, want 0", res, n)
		}
		if _, ok := cp.Cloud.Get(b.GetName()); !ok {
			t.Errorf("bucket %s is gone from the cloud", res)
		}
	}
}

// TestS6DeletingPolicyAllowsTheCloudDelete adds a deleting policy for every
// XDatabase, so it runs alone: Go starts the parallel scenarios only after
// it, and its policy is gone by then (TestS6DeletingAProtectedClaim must
// see no Delete).
func TestS6DeletingPolicyAllowsTheCloudDelete(t *testing.T) {
	policyForTest(t, `
metadata: {name: xdatabases-deleting}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XDatabase}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  initializing:
    policies:
    - target: {apiGroup: recorder.kausality.io, apiVersion: v1alpha1, resource: buckets}
      relation: ControllerChild
      verbs: [Create]
      mutations:
      - {jsonPath: "*", verbs: [Insert, Mutate]}
    - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Create]
  deleting:
    policies:
    - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Delete]
`)

	// Bob may delete a Claim in his namespace (he sets allow-delete
	// himself), but the deleting rules are the platform team's: the cloud
	// resources are orphaned, not deleted.
	bobs := created(t, composition(t, 1), "s6c", "orders")
	orphaned := buckets(t, bobs)
	deleteClaimAs(t, as(t, controlplane.Bob), bobs)
	for res, b := range orphaned {
		if n := cp.Cloud.Count(recorder.VerbDelete, b.GetName()); n != 0 {
			t.Errorf("bucket %s deleted by bob's deletion: %d external Deletes, want 0", res, n)
		}
	}

	key := created(t, composition(t, 1), "s6b", "orders")
	bs := buckets(t, key)
	deleteClaim(t, key)
	for res, b := range bs {
		if n := cp.Cloud.Count(recorder.VerbDelete, b.GetName()); n != 1 {
			t.Errorf("bucket %s: %d external Deletes, want exactly 1", res, n)
		}
		if _, ok := cp.Cloud.Get(b.GetName()); ok {
			t.Errorf("bucket %s is still in the cloud", res)
		}
		if n := cp.Cloud.Count(recorder.VerbUpdate, b.GetName()); n != 0 {
			t.Errorf("bucket %s: %d external Updates, want 0", res, n)
		}
	}
}

// policyForTest creates an AllowancePolicy for the rest of the test.
// policyForTest creates an AllowancePolicy until the test ends. Policies
// are cluster-wide: one that changes what other scenarios' kinds may do
// belongs in a test that does not run in parallel.
func policyForTest(t *testing.T, y string) {
	t.Helper()
	p := &v1alpha1.AllowancePolicy{}
	if err := yaml.Unmarshal([]byte(y), p); err != nil {
		t.Fatal(err)
	}
	admin := as(t, "admin")
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), p) })
}

func TestS4CompositionRevisionIncident(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp := composition(t, 1)
	key := created(t, comp, "s4", "orders")
	data := buckets(t, key)["data"].GetName()

	// The new revision changes the data bucket's tier and drops the logs
	// bucket while no Claim or XR field changed. Crossplane makes it
	// revision 2 of the Composition and moves the XR to it.
	if err := cp.Composition(ctx, filepath.Join("testdata", "composition-2.yaml"), comp); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the XR to report the withheld revision 2 output", func() (bool, string) {
		c := controlplane.Condition(xr(t, key), "KausalityAllowed")
		return c.Status == "False" && strings.Contains(c.Message, "spec.forProvider.tags.tier") && strings.Contains(c.Message, "resource logs"), c.Message
	})
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	if len(buckets(t, key)) != 2 {
		t.Errorf("buckets after revision 2 = %d, want both kept", len(buckets(t, key)))
	}
	if s, _ := cp.Cloud.Get(data); s.Tags["tier"] != "standard" {
		t.Errorf("cloud tier = %q, want standard", s.Tags["tier"])
	}

	// An UpgradeAllowance naming the Composition's revision 2 (its name is
	// a hash nobody types) lets exactly the tier change through; the logs
	// bucket stays, as nothing allows its deletion.
	u := upgradeAllowance(t, comp, "[Update]")
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	settle(t, key)
	expectClosed(t, key)
	if s, _ := cp.Cloud.Get(data); s.Tags["tier"] != "premium" {
		t.Errorf("cloud tier = %q, want premium", s.Tags["tier"])
	}
	if tr := traceOf(t, buckets(t, key)["data"]); tr[0].Kind != v1alpha1.UpgradeAllowanceKind || tr[0].Name != u.GetName() {
		t.Errorf("data bucket trace = %v, want it to start at UpgradeAllowance %s", kinds(tr), u.GetName())
	}
}

// TestS4UpgradeDeletesTheDroppedBucket is S4 with an UpgradeAllowance that
// also grants deleting what revision 2 drops: the logs bucket's Delete gate
// opens first, traced to the UpgradeAllowance, then Crossplane deletes it
// and the cloud sees exactly one Delete.
func TestS4UpgradeDeletesTheDroppedBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	comp := composition(t, 1)
	key := created(t, comp, "s4d", "orders")
	bs := buckets(t, key)
	data, logs := bs["data"].GetName(), bs["logs"].GetName()
	if err := cp.Composition(ctx, filepath.Join("testdata", "composition-2.yaml"), comp); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the XR to report the withheld deletion", func() (bool, string) {
		c := controlplane.Condition(xr(t, key), "KausalityAllowed")
		return c.Status == "False" && strings.Contains(c.Message, "resource logs") && strings.Contains(c.Message, "withheld Delete"), c.Message
	})
	if got := counts(logs); got != [3]int{1, 0, 0} {
		t.Fatalf("logs bucket calls before the UpgradeAllowance = %v, want one Create", got)
	}

	u := upgradeAllowance(t, comp, "[Update, Delete]")
	fixture.Eventually(t, settleTimeout, "the logs bucket deleted in the cloud and the data bucket's tier updated", func() (bool, string) {
		return counts(logs) == [3]int{1, 0, 1} && counts(data) == [3]int{1, 1, 0}, fmt.Sprintf("logs %v, data %v", counts(logs), counts(data))
	})
	fixture.Eventually(t, settleTimeout, "the logs Bucket gone", func() (bool, string) {
		_, ok := buckets(t, key)["logs"]
		return !ok, "still there"
	})
	time.Sleep(2 * controlplane.Poll)
	if got := counts(logs); got != [3]int{1, 0, 1} {
		t.Errorf("logs bucket calls = %v, want exactly one Create and one Delete", got)
	}
	if tr := traceOf(t, buckets(t, key)["data"]); tr[0].Kind != v1alpha1.UpgradeAllowanceKind || tr[0].Name != u.GetName() {
		t.Errorf("data bucket trace = %v, want it to start at UpgradeAllowance %s", kinds(tr), u.GetName())
	}
	// The provider reports what the UpgradeAllowance reached: it compiled,
	// and upgraded the data bucket (the logs bucket is gone).
	fixture.Eventually(t, settleTimeout, "the UpgradeAllowance's status", func() (bool, string) {
		got := &v1alpha1.UpgradeAllowance{}
		if err := as(t, "admin").Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && got.Status.Upgraded == 1 && got.Status.Waiting == 0, fmt.Sprintf("%+v", got.Status)
	})
}

// upgradeAllowance creates, as the admin, an UpgradeAllowance for revision 2
// of the Composition comp that lets it change Bucket tags and grants verbs
// on Buckets and their cloud resources; spec holds more of its spec, as
// YAML indented under spec.
func upgradeAllowance(t *testing.T, comp, verbs string, spec ...string) *v1alpha1.UpgradeAllowance {
	t.Helper()
	u := &v1alpha1.UpgradeAllowance{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
metadata: {name: %s-2}
spec:
  compositions: [{name: %s, revision: 2}]
  policies:
  - target: {apiGroup: recorder.kausality.io, apiVersion: v1alpha1, resource: buckets}
    relation: ControllerChild
    verbs: %s
    mutations:
    - {jsonPath: "spec.forProvider.tags[*]", verbs: [Mutate]}
  - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
    relation: External
    verbs: %s
%s`, comp, comp, verbs, verbs, strings.Join(spec, ""))), u); err != nil {
		t.Fatal(err)
	}
	if err := as(t, "admin").Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = as(t, "admin").Delete(context.Background(), u) })
	return u
}

// TestS8Faults kills provider-kausality, so it runs alone: Go starts the
// parallel scenarios only after it.
func TestS8Faults(t *testing.T) {
	key := created(t, composition(t, 1), "s8", "orders")
	// The cloud is slow: the Update is in flight when the provider dies
	// with the gate open.
	restart, _ := resizedWhileDown(t, key)
	c := claim(key.Namespace, key.Name, "", nil)

	// With the webhook unreachable, nothing is admitted.
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "small", "spec", "size") }); err == nil {
		t.Error("a Claim change was admitted with the webhook down")
	}
	// An administrator's way out while it stays down (docs/OPERATIONS.md):
	// removing the dynamic webhook configurations takes Kausality's
	// admission out of the write path; the provider writes them again when
	// it is back. Alice's label reaches the Claim.
	label := func() error {
		return controlplane.Update(alice(t), c, func() { c.SetLabels(map[string]string{"team": "orders"}) })
	}
	if err := label(); err == nil {
		t.Error("a Claim's label was admitted with the webhook down")
	}
	for _, o := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: policycontroller.DynamicName}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: policycontroller.DynamicName}},
	} {
		if err := as(t, "admin").Delete(context.Background(), o); err != nil {
			t.Fatalf("the administrator deletes %T %s: %v", o, policycontroller.DynamicName, err)
		}
	}
	fixture.Eventually(t, 30*time.Second, "the Claim's label admitted without Kausality's webhooks", func() (bool, string) {
		err := label()
		return err == nil, fmt.Sprint(err)
	})

	restart()
	// The allowance is consumed: marked by the restarted provider, or
	// already pruned by the function once the Bucket was observed at its
	// generation (Crossplane may reconcile first).
	fixture.Eventually(t, settleTimeout, "the gate closed after restart", func() (bool, string) {
		data := buckets(t, key)["data"]
		as := fixture.Allowances(t, data)
		consumed := !slices.ContainsFunc(as, func(a allowance.Allowance) bool { return !a.Consumed })
		return len(as) <= 1 && consumed && slices.Equal(gate(data), controlplane.ClosedGate), fmt.Sprintf("%+v %v", as, gate(data))
	})
	settle(t, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
}
