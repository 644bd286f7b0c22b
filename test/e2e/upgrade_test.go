package e2e

import (
	"context"
	"fmt"
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

// TestUpgradeRollsOutAcrossXRs is issue 13's roll-out on real Crossplane:
// revision 2 of a Composition with eight XRs changes the data bucket's tier.
// Without an UpgradeAllowance nothing reaches the cloud and every XR names
// the withheld change; with one that has a rollout, the Updates reach one
// XR, then two, then four, then the rest, in XR name order, each batch after
// the one before applied the upgrade and is Ready. An alarm (a blocker of
// the rollout) created while the second batch is in flight halts it until
// it is deleted.
//
// It runs on its own, not beside other scenarios: it holds a cloud write
// in flight (Cloud.Hold), which ties up one of the recording provider's
// workers, and its batches are paced by time.
func TestUpgradeRollsOutAcrossXRs(t *testing.T) {
	ctx := context.Background()
	comp := composition(t, 1)
	const ns = "upgrade"
	namespace(t, ns)
	keys := make([]client.ObjectKey, 8)
	for i := range keys {
		c := claim(ns, fmt.Sprintf("orders-%d", i), "small", map[string]string{"jira": "INFRA-1"})
		_ = unstructured.SetNestedField(c.Object, comp, "spec", "compositionRef", "name")
		if err := alice(t).Create(ctx, c); err != nil {
			t.Fatalf("alice creates Claim %s: %v", c.GetName(), err)
		}
		keys[i] = client.ObjectKeyFromObject(c)
	}
	for _, k := range keys {
		settle(t, k)
	}
	// The data buckets in the roll-out's order: their XRs' names.
	slices.SortFunc(keys, func(a, b client.ObjectKey) int { return strings.Compare(xr(t, a).GetName(), xr(t, b).GetName()) })
	data := make([]*unstructured.Unstructured, len(keys))
	for i, k := range keys {
		data[i] = buckets(t, k)["data"]
	}

	if err := cp.Composition(ctx, filepath.Join("testdata", "composition-2.yaml"), comp); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		fixture.Eventually(t, settleTimeout, "the XR to name the withheld revision 2 tier", func() (bool, string) {
			c := controlplane.Condition(xr(t, k), "KausalityAllowed")
			return c.Status == "False" && strings.Contains(c.Message, "spec.forProvider.tags.tier") && strings.Contains(c.Message, "Composition revision"), c.Message
		})
	}
	time.Sleep(2 * controlplane.Poll)
	if n := updated(callOrder(data, recorder.VerbUpdate)); n != 0 {
		t.Fatalf("%d data buckets updated without an UpgradeAllowance, want none", n)
	}

	// Hold the second XR's cloud write in flight, so the alarm lands
	// mid-roll-out.
	release := cp.Cloud.Hold(data[1].GetName())
	defer release()
	u := upgradeAllowance(t, comp, "[Update]", "  rollout:\n    blockers: [{name: alarm, apiVersion: v1, kind: ConfigMap, namespace: "+ns+", matchName: upgrade-alarm}]\n")
	fixture.Eventually(t, 2*settleTimeout, "the first XR updated and the second's gate open", func() (bool, string) {
		o := callOrder(data, recorder.VerbUpdate)
		return o[0] >= 0 && slices.Contains(gate(buckets(t, keys[1])["data"]), "Update"), fmt.Sprintf("update order %v", o)
	})
	alarm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upgrade-alarm"}, Data: map[string]string{"why": "error rate"}}
	if err := as(t, "admin").Create(ctx, alarm); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the third XR to name the blocker", func() (bool, string) {
		p := controlplane.Condition(xr(t, keys[2]), "Propagated")
		return p.Status == "False" && strings.Contains(p.Message, "blocker alarm (ConfigMap upgrade-alarm) exists"), p.Message
	})
	release()
	fixture.Eventually(t, settleTimeout, "the second XR's held write to land", func() (bool, string) {
		o := callOrder(data, recorder.VerbUpdate)
		return o[1] >= 0, fmt.Sprint(o)
	})
	// The alarm holds the other six for three of the function's withheld
	// TTLs and more.
	time.Sleep(50 * time.Second)
	if o := callOrder(data, recorder.VerbUpdate); updated(o) != 2 {
		t.Fatalf("with the alarm set: updates %v, want the first two XRs only", o)
	}
	if err := as(t, "admin").Delete(ctx, alarm); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 6*settleTimeout, "every data bucket updated", func() (bool, string) {
		o := callOrder(data, recorder.VerbUpdate)
		return updated(o) == len(data), fmt.Sprintf("update order %v", o)
	})
	o := callOrder(data, recorder.VerbUpdate)
	first, second, third, fourth := o[0], o[1], o[2:4], o[4:]
	if !(first < second && second < slices.Min(third) && slices.Max(third) < slices.Min(fourth)) {
		t.Errorf("updates at call positions %v (XR name order), want batches [1] [2] [3 4] [5 6 7 8], each after the one before", o)
	}
	time.Sleep(2 * controlplane.Poll)
	for i, b := range data {
		if got := counts(b.GetName()); got[1] != 1 {
			t.Errorf("data bucket of XR %d: external Create/Update/Delete = %v, want exactly one Update", i, got)
		}
		if tr := traceOf(t, buckets(t, keys[i])["data"]); tr[0].Kind != v1alpha1.UpgradeAllowanceKind || tr[0].Name != u.GetName() {
			t.Errorf("data bucket of XR %d: trace %v, want it to start at UpgradeAllowance %s", i, kinds(tr), u.GetName())
		}
	}
}
