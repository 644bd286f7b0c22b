package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestReplicasLeaderKilled kills the leading provider-kausality replica
// (SIGKILL: its lease is not released) while Alice resizes several
// XStores at once; the control plane runs the replicas as the install
// does, behind the webhook Service, with leader election. The other
// replica answers admission throughout: a write in flight to the dying
// one is refused at most once and goes through when retried, Bob's resize
// is still refused, every permitted resize reaches its data bucket exactly
// once and nothing else reaches the cloud, and every gate closes once a
// replica holds the lease again. It kills a replica, so it runs alone: Go
// starts the parallel scenarios only after it.
func TestReplicasLeaderKilled(t *testing.T) {
	if controlplane.Replicas < 2 {
		t.Fatalf("the control plane runs %d provider replica(s); this scenario needs two", controlplane.Replicas)
	}
	comp := storeComposition(t)
	const n = 4
	keys := make([]client.ObjectKey, n)
	for i := range keys {
		keys[i] = createdStore(t, comp, "replicas", fmt.Sprintf("shop-%d", i))
	}
	before := make([]map[string]*unstructured.Unstructured, n)
	for i, key := range keys {
		before[i] = storeBuckets(t, key)
		expectStoreCalls(t, key, before[i], map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	}

	leader := -1
	fixture.Eventually(t, time.Minute, "a provider replica to hold the lease", func() (bool, string) {
		leader = cp.Leader()
		return leader >= 0, "no replica logged acquiring the lease"
	})

	// Alice's resizes race the kill.
	resize := func(key client.ObjectKey) error {
		x := store(key.Namespace, key.Name, "", nil)
		return controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") })
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = resize(key)
		}()
	}
	cp.KillReplica(leader)
	wg.Wait()
	refused := 0
	for i, key := range keys {
		if errs[i] == nil {
			continue
		}
		refused++
		t.Logf("alice's resize of %s was refused while the leader died (%v); she retries once", key, errs[i])
		if err := resize(key); err != nil {
			t.Errorf("alice's retried resize of %s: %v, want it admitted by the replica still running", key, err)
		}
	}
	t.Logf("%d of %d resizes needed their one retry", refused, n)

	// Admission goes on without a leader: Bob is still refused.
	x := store(keys[0].Namespace, keys[0].Name, "", nil)
	err := controlplane.Update(as(t, controlplane.Bob), x, func() { _ = unstructured.SetNestedField(x.Object, "small", "spec", "size") })
	fixture.ErrorContains(t, err, "spec.size", "AllowancePolicy xstores")

	fixture.Eventually(t, 2*time.Minute, "a provider replica to hold the lease again", func() (bool, string) {
		return cp.Leader() >= 0, "no running replica logged acquiring the lease since it started"
	})
	var settled sync.WaitGroup
	for i, key := range keys {
		settled.Add(1)
		go func() {
			defer settled.Done()
			settleStore(t, key)
			expectStoreCalls(t, key, before[i], map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
			if s, _ := cp.Cloud.Get(before[i]["data"].GetName()); s.Size != 2 {
				t.Errorf("cloud size of %s's data bucket = %d, want 2", key, s.Size)
			}
		}()
	}
	settled.Wait()
	if t.Failed() {
		t.Log(cp.DescribeStore(context.Background(), keys[0]))
	}
}

// TestWebhookRefusesThenHangs: the webhook Service refuses every
// connection for 15 s, then accepts them and never answers for 15 s,
// while Alice creates an XStore and resizes another. Every write that
// needs Kausality fails closed meanwhile (none is admitted unchecked);
// once the Service answers again her retried writes are admitted, each
// Bucket is created once, the resize reaches its bucket once, nothing else
// reaches the cloud, and nothing is left stuck: every gate closes. It
// breaks the webhook for everyone, so it runs alone.
func TestWebhookRefusesThenHangs(t *testing.T) {
	ctx := context.Background()
	comp := storeComposition(t)
	resized := createdStore(t, comp, "webhook-faults", "resized")
	bs := storeBuckets(t, resized)
	expectStoreCalls(t, resized, bs, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})

	resize := func() error {
		x := store(resized.Namespace, resized.Name, "", nil)
		return controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") })
	}
	fresh := store(resized.Namespace, "fresh", "small", nil)
	_ = unstructured.SetNestedField(fresh.Object, comp, "spec", "crossplane", "compositionRef", "name")
	create := func() error { return alice(t).Create(ctx, fresh.DeepCopy()) }

	defer cp.WebhookFault(controlplane.FaultNone)
	for _, f := range []struct {
		name  string
		fault controlplane.Fault
	}{{"refuses connections", controlplane.FaultRefuse}, {"accepts and never answers", controlplane.FaultHang}} {
		cp.WebhookFault(f.fault)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if err := resize(); err == nil {
				t.Fatalf("while the webhook %s, Alice's resize was admitted", f.name)
			}
			if err := create(); err == nil {
				t.Fatalf("while the webhook %s, Alice's new XStore was admitted", f.name)
			}
			time.Sleep(time.Second)
		}
	}
	cp.WebhookFault(controlplane.FaultNone)
	fixture.Eventually(t, time.Minute, "Alice's resize and new XStore admitted once the webhook answers", func() (bool, string) {
		errR, errC := resize(), create()
		if kerrors.IsAlreadyExists(errC) {
			errC = nil
		}
		return errR == nil && errC == nil, fmt.Sprintf("resize: %v; create: %v", errR, errC)
	})
	settleStore(t, resized)
	expectStoreCalls(t, resized, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	key := client.ObjectKeyFromObject(fresh)
	settleStore(t, key)
	expectStoreCalls(t, key, storeBuckets(t, key), map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
}

// TestReplicasLeaderStopped stops the leading provider-kausality replica as
// Kubernetes stops a pod it drains or replaces in a rolling upgrade
// (SIGTERM): it releases the lease as it shuts down, and the other
// replica leads within a second of its exit, not after the lease's 15 s.
// Alice's resize made just after reaches the cloud once and its gate
// closes. It stops a replica, so it runs alone.
func TestReplicasLeaderStopped(t *testing.T) {
	if controlplane.Replicas < 2 {
		t.Fatalf("the control plane runs %d provider replica(s); this scenario needs two", controlplane.Replicas)
	}
	key := createdStore(t, storeComposition(t), "replicas-stopped", "shop")
	bs := storeBuckets(t, key)
	leader := -1
	fixture.Eventually(t, time.Minute, "a provider replica to hold the lease", func() (bool, string) {
		leader = cp.Leader()
		return leader >= 0, "no replica logged acquiring the lease"
	})
	cp.StopReplica(leader)
	exited := time.Now()
	next := -1
	fixture.EventuallyEvery(t, 20*time.Second, 50*time.Millisecond, "another replica to lead", func() (bool, string) {
		next = cp.Leader()
		return next >= 0 && next != leader, fmt.Sprintf("leader %d", next)
	})
	if handover := time.Since(exited); handover > time.Second {
		t.Errorf("replica %d led %s after the stopped leader exited, want within a second: did the stopped leader not release the lease?", next, handover.Round(10*time.Millisecond))
	} else {
		t.Logf("replica %d led %s after the stopped leader exited", next, handover.Round(10*time.Millisecond))
	}

	x := store(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes after the hand-over: %v", err)
	}
	settleStore(t, key)
	expectStoreCalls(t, key, bs, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
}
