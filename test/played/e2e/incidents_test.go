package played_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/played"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

func xrCondition(t *testing.T, key client.ObjectKey, typ string) xpv2.Condition {
	t.Helper()
	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(played.XRGVK)
	if err := as(t, "admin").Get(context.Background(), client.ObjectKey{Name: played.XRName(key)}, xr); err != nil {
		t.Fatal(err)
	}
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(xr.Object).GetValueInto("status", cs)
	return cs.GetCondition(xpv2.ConditionType(typ))
}

func TestS8Faults(t *testing.T) {
	ctx := context.Background()
	x := crossplane(t, 1)
	key := created(t, x, "s8", "orders")
	data := buckets(t, key)["data"]
	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := x.SyncClaim(ctx, key); err != nil {
		t.Fatal(err)
	}
	// The cloud is slow: the Update is in flight when the provider dies
	// with the gate open.
	release := cp.Cloud.Hold(data.GetName())
	defer release()
	if _, err := x.Composite(ctx, played.XRName(key)); err != nil {
		t.Fatal(err)
	}
	cp.KillProvider()
	release()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = cp.StartProvider()
		}
	})
	controlplane.Eventually(t, 30*time.Second, "the external Update", func() (bool, string) {
		n := cp.Cloud.Count(recorder.VerbUpdate, data.GetName())
		return n == 1, fmt.Sprint(n, " updates")
	})
	if err := as(t, "admin").Get(ctx, client.ObjectKeyFromObject(data), data); err != nil {
		t.Fatal(err)
	}
	if as := allowancesOf(t, data); len(as) != 1 || as[0].Consumed {
		t.Fatalf("allowances while the provider is down = %+v, want the open one, unmarked", as)
	}

	// With the webhook unreachable, nothing propagates and the XR says why.
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "small", "spec", "size") }); err == nil {
		t.Error("a Claim change was admitted with the webhook down")
	}

	if err := cp.StartProvider(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	controlplane.Eventually(t, 30*time.Second, "the gate closed after restart", func() (bool, string) {
		if err := as(t, "admin").Get(ctx, client.ObjectKeyFromObject(data), data); err != nil {
			return false, err.Error()
		}
		as := allowancesOf(t, data)
		return len(as) == 1 && as[0].Consumed && slices.Equal(gate(data), closed), fmt.Sprintf("%+v %v", as, gate(data))
	})
	settle(t, x, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})

	// A Claim change admitted before the provider went down cannot reach
	// the XR while it is down, and the XR says why.
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "small", "spec", "size") }); err != nil {
		t.Fatal(err)
	}
	cp.KillProvider()
	restarted = false
	_, _, err := x.SyncClaim(ctx, key)
	controlplane.ErrorContains(t, err, "failed calling webhook")
	if c := xrCondition(t, key, "Synced"); c.Status != "False" || !strings.Contains(c.Message, "failed calling webhook") {
		t.Errorf("XR Synced = %s %q, want False saying the webhook could not be called", c.Status, c.Message)
	}
	if n := cp.Cloud.Count(recorder.VerbUpdate, data.GetName()); n != 1 {
		t.Errorf("external Updates with the webhook down = %d, want still 1", n)
	}
	if err := cp.StartProvider(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	settle(t, x, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 2, 0}, "logs": {1, 0, 0}})
}
