package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// poolsComposition applies testdata/composition-pools.yaml as the test's
// own Composition, its blocker in Namespace ns, so tests running in
// parallel do not block each other; it returns its name.
func poolsComposition(t *testing.T, ns string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "composition-pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "composition.yaml")
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(string(b), "namespace: rollout", "namespace: "+ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if err := cp.Composition(context.Background(), f, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// pools are the six pool buckets of a Claim in roll-out order.
func pools(t *testing.T, key client.ObjectKey) []*unstructured.Unstructured {
	t.Helper()
	bs := buckets(t, key)
	out := make([]*unstructured.Unstructured, 0, 6)
	for i := 1; i <= 6; i++ {
		b, ok := bs[fmt.Sprintf("pool-%d", i)]
		if !ok {
			t.Fatalf("no bucket pool-%d: %s", i, cp.Describe(context.Background(), key))
		}
		out = append(out, b)
	}
	return out
}

// aliceResizes is Alice's permitted change of the Claim's size.
func aliceResizes(t *testing.T, key client.ObjectKey, size string) {
	t.Helper()
	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, size, "spec", "size") }); err != nil {
		t.Fatalf("alice resizes to %s: %v", size, err)
	}
}

// createdPools creates the Claim pools in Namespace ns, composed by
// poolsComposition, and waits until all six pools exist in the cloud
// (creation is paced too: all six exist in Kubernetes at once, behind
// closed gates, and reach the cloud in batches) and the chain settled.
func createdPools(t *testing.T, ns string) (client.ObjectKey, []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	key := created(t, poolsComposition(t, ns), ns, "pools")
	fixture.Eventually(t, 3*settleTimeout, "all six pools created in the cloud", func() (bool, string) {
		bs := buckets(t, key)
		if len(bs) != 6 {
			return false, cp.Describe(ctx, key)
		}
		for _, b := range bs {
			if counts(b.GetName())[0] != 1 {
				return false, cp.Describe(ctx, key)
			}
		}
		return true, ""
	})
	settle(t, key)
	return key, pools(t, key)
}

// callOrder is the position of each pool's first external call of verb in
// the cloud's call log, -1 for none yet.
func callOrder(ps []*unstructured.Unstructured, verb string) []int {
	calls := cp.Cloud.Calls()
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = slices.IndexFunc(calls, func(c recorder.Call) bool { return c.Verb == verb && c.Name == p.GetName() })
	}
	return out
}

// updateOrder is callOrder of the Updates.
func updateOrder(ps []*unstructured.Unstructured) []int { return callOrder(ps, recorder.VerbUpdate) }

// batched reports whether the calls at positions o came in DESIGN §6's
// exponential batches of six: pool-1, pool-2, then pool-3 and pool-4, then
// pool-5 and pool-6, each batch after the one before.
func batched(o []int) bool {
	return o[0] < o[1] && o[1] < min(o[2], o[3]) && max(o[2], o[3]) < min(o[4], o[5])
}

func updated(order []int) int {
	n := 0
	for _, o := range order {
		if o >= 0 {
			n++
		}
	}
	return n
}

// TestRollOutInBatches is issue 12's scenario on real Crossplane: Alice's
// permitted resize reaches six buckets one batch at a time, a blocker set
// while the second batch is in flight halts it, and removing the blocker
// resumes it in DESIGN §6's exponential batches.
//
// It runs on its own, not beside other scenarios: it holds a cloud write
// in flight (Cloud.Hold), which ties up one of the recording provider's
// workers, and its batches are paced by time.
func TestRollOutInBatches(t *testing.T) {
	ctx := context.Background()
	key, ps := createdPools(t, "rollout")
	if o := callOrder(ps, recorder.VerbCreate); !batched(o) {
		t.Errorf("create order by pool = %v, want pool-1, pool-2, then pool-3 and pool-4, then pool-5 and pool-6", o)
	}
	for i, p := range ps {
		if got := counts(p.GetName()); got != [3]int{1, 0, 0} {
			t.Fatalf("pool-%d after creation: Create/Update/Delete = %v, want one Create", i+1, got)
		}
	}

	// Hold pool-2's cloud write in flight, so the blocker lands mid-roll-out.
	release := cp.Cloud.Hold(ps[1].GetName())
	defer release()
	aliceResizes(t, key, "large")
	fixture.Eventually(t, settleTimeout, "pool-1 updated and pool-2's gate open", func() (bool, string) {
		ps := pools(t, key)
		return updateOrder(ps)[0] >= 0 && slices.Contains(gate(ps[1]), "Update"), fmt.Sprintf("order %v, pool-2 gate %v", updateOrder(ps), gate(ps[1]))
	})
	if o := updateOrder(ps); updated(o) != 1 {
		t.Fatalf("before the second batch applied: updates %v, want pool-1 only", o)
	}

	alarm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rollout", Name: "rollout-alarm"}, Data: map[string]string{"why": "error rate"}}
	if err := as(t, "admin").Create(ctx, alarm); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the Claim to name the blocker", func() (bool, string) {
		cl, err := cp.Object(ctx, controlplane.ClaimGVK, key)
		if err != nil || cl == nil {
			return false, fmt.Sprint(err)
		}
		p := controlplane.Condition(cl, "Propagated")
		return p.Status == "False" && strings.Contains(p.Message, "blocker alarm (ConfigMap rollout-alarm) exists"), controlplane.Conditions(cl)
	})
	release()
	fixture.Eventually(t, settleTimeout, "pool-2's held write to land", func() (bool, string) {
		o := updateOrder(ps)
		return o[1] >= 0, fmt.Sprint(o)
	})
	// The blocker holds pool-3 to pool-6 for three of the function's
	// withheld TTLs and more, and every reconcile the buckets cause.
	time.Sleep(50 * time.Second)
	if o := updateOrder(ps); updated(o) != 2 {
		t.Fatalf("with the blocker set: updates %v, want pool-1 and pool-2 only", o)
	}

	if err := as(t, "admin").Delete(ctx, alarm); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 3*settleTimeout, "every pool updated", func() (bool, string) {
		o := updateOrder(ps)
		return updated(o) == 6, fmt.Sprint(o)
	})
	settle(t, key)
	if o := updateOrder(ps); !batched(o) {
		t.Errorf("update order by pool = %v, want pool-1, pool-2, then pool-3 and pool-4, then pool-5 and pool-6", o)
	}
	for i, p := range ps {
		if got := counts(p.GetName()); got != [3]int{1, 1, 0} {
			t.Errorf("pool-%d: Create/Update/Delete = %v, want one Create and one Update", i+1, got)
		}
		if s, _ := cp.Cloud.Get(p.GetName()); s.Size != 2 {
			t.Errorf("pool-%d: cloud size %d, want 2", i+1, s.Size)
		}
	}
	expectClosed(t, key)
	fixture.Eventually(t, settleTimeout, "the Claim to say all propagated", func() (bool, string) {
		cl, err := cp.Object(ctx, controlplane.ClaimGVK, key)
		if err != nil || cl == nil {
			return false, fmt.Sprint(err)
		}
		return controlplane.Condition(cl, "Propagated").Status == "True", controlplane.Conditions(cl)
	})
}

// TestRevertMidRollOut: Alice reverts her resize after the first batch.
// The roll-out converges to the reverted size, and no pool beyond the first
// two is ever written with the stale one.
func TestRevertMidRollOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key, ps := createdPools(t, "revert")
	aliceResizes(t, key, "large")
	fixture.Eventually(t, settleTimeout, "pool-1 updated", func() (bool, string) {
		o := updateOrder(ps)
		return o[0] >= 0, fmt.Sprint(o)
	})
	aliceResizes(t, key, "small")
	fixture.Eventually(t, 3*settleTimeout, "every pool back at size 1", func() (bool, string) {
		for i, p := range ps {
			if s, _ := cp.Cloud.Get(p.GetName()); s.Size != 1 {
				return false, fmt.Sprintf("pool-%d at %d; %s", i+1, s.Size, cp.Describe(ctx, key))
			}
		}
		return true, ""
	})
	settle(t, key)
	for _, c := range cp.Cloud.Calls() {
		for i, p := range ps[2:] {
			if c.Name == p.GetName() && c.Verb == recorder.VerbUpdate {
				t.Errorf("pool-%d was written (size %d) though it never took the reverted change", i+3, c.Size)
			}
		}
	}
	expectClosed(t, key)
}

// TestNamespaceFreezeOutlastsTheGate is issue 12's freeze defect on real
// Crossplane: Alice's resize lands while the Namespace is frozen for twice
// the longest a gate may stay open. Nothing reaches the cloud meanwhile,
// the Claim names the freeze and who set it, and once it lifts every pool
// takes the change exactly once.
func TestNamespaceFreezeOutlastsTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key, ps := createdPools(t, "frozen")

	freeze := func(on bool) {
		t.Helper()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}
		if err := controlplane.Update(as(t, "admin"), ns, func() {
			if !on {
				delete(ns.Annotations, v1alpha1.AnnotationFreeze)
				return
			}
			metav1.SetMetaDataAnnotation(&ns.ObjectMeta, v1alpha1.AnnotationFreeze, `{"user":"oncall@example.com","message":"incident 7"}`)
		}); err != nil {
			t.Fatal(err)
		}
	}
	freeze(true)
	aliceResizes(t, key, "large")
	fixture.Eventually(t, settleTimeout, "the Claim to name the freeze", func() (bool, string) {
		cl, err := cp.Object(ctx, controlplane.ClaimGVK, key)
		if err != nil || cl == nil {
			return false, fmt.Sprint(err)
		}
		p := controlplane.Condition(cl, "Propagated")
		return p.Status == "False" && p.Reason == "Frozen" && strings.Contains(p.Message, "oncall@example.com"), controlplane.Conditions(cl)
	})
	time.Sleep(2*controlplane.MaxGateOpen + 10*time.Second)
	if o := updateOrder(ps); updated(o) != 0 {
		t.Fatalf("during the freeze: updates %v, want none", o)
	}
	freeze(false)
	fixture.Eventually(t, 3*settleTimeout, "every pool updated after the freeze", func() (bool, string) {
		o := updateOrder(ps)
		return updated(o) == 6, fmt.Sprintf("%v — %s", o, cp.Describe(ctx, key))
	})
	settle(t, key)
	for i, p := range ps {
		if got := counts(p.GetName()); got != [3]int{1, 1, 0} {
			t.Errorf("pool-%d: Create/Update/Delete = %v, want one Create and exactly one Update", i+1, got)
		}
		if s, _ := cp.Cloud.Get(p.GetName()); s.Size != 2 {
			t.Errorf("pool-%d: cloud size %d, want 2", i+1, s.Size)
		}
	}
}
