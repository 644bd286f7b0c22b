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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// outageGateOpen is the maxGateOpen of the Composition TestGateClosesWhileDown
// composes with: the provider's, as docs/OPERATIONS.md asks (a provider with
// a longer limit would open again, once back, a gate the function closed).
const outageGateOpen = controlplane.MaxGateOpen

// TestGateClosesWhileDown: Alice's permitted resize opens the data
// bucket's gate, its provider applies it, and provider-kausality is killed
// before it closes the gate. Past maxGateOpen the function closes the gate
// on its own (a write that only narrows the gate, which the API server
// admits without the provider), within maxGateOpen plus the time Crossplane
// takes to run the pipeline again. The cloud then drifts: with the gate
// closed, the drift is observed and not corrected, so exactly one Update
// reached the cloud. When the provider is back the allowance is used up
// and the gate stays closed. It kills the provider, so it runs alone.
func TestGateClosesWhileDown(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "composition-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "composition.yaml")
	// The kausality step's Input is the file's last line.
	if err := os.WriteFile(file, append(raw, []byte(fmt.Sprintf("      maxGateOpen: %s\n", outageGateOpen))...), 0o600); err != nil {
		t.Fatal(err)
	}
	key := created(t, compositionFrom(t, file), "outage", "orders")
	restart, open := resizedWhileDown(t, key)
	data := buckets(t, key)["data"]
	stamped, _ := open.StampedAt()

	// Crossplane runs the pipeline again within its poll interval (a
	// minute) or sooner, when a composed resource changes.
	bound := outageGateOpen + 90*time.Second
	fixture.Eventually(t, bound+30*time.Second, "the gate closed by the function while the provider is down", func() (bool, string) {
		data = buckets(t, key)["data"]
		return slices.Equal(gate(data), controlplane.ClosedGate), fmt.Sprint(gate(data))
	})
	if open := time.Since(stamped); open > bound {
		t.Errorf("the gate closed %s after its allowance was stamped, more than maxGateOpen %s plus %s", open.Round(time.Second), outageGateOpen, bound-outageGateOpen)
	}
	if got := fixture.Allowances(t, data); len(got) != 1 || !got[0].Same(open) {
		t.Errorf("allowances after the closing write = %+v, want the stored one untouched %+v", got, open)
	}

	// The cloud drifts; the closed gate observes it and corrects nothing.
	drifted := recorder.State{Size: 7, Region: "eu"}
	cp.Cloud.Put(data.GetName(), drifted)
	time.Sleep(10 * time.Second)
	if s, _ := cp.Cloud.Get(data.GetName()); s.Size != drifted.Size {
		t.Errorf("the drifted size %d was corrected to %d through a gate that should be closed", drifted.Size, s.Size)
	}

	restart()
	fixture.Eventually(t, settleTimeout, "the allowance used up and the gate closed after restart", func() (bool, string) {
		data = buckets(t, key)["data"]
		as := fixture.Allowances(t, data)
		used := !slices.ContainsFunc(as, func(a allowance.Allowance) bool { return !a.Consumed })
		return used && slices.Equal(gate(data), controlplane.ClosedGate), fmt.Sprintf("%+v %v", as, gate(data))
	})
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(data.GetName()); s.Size != drifted.Size {
		t.Errorf("after the restart the drifted size %d became %d: the expired allowance's change was shipped again", drifted.Size, s.Size)
	}
}

// TestCreationCompletesWhileDown: Alice's Claim composes two Buckets whose
// Create gates open; their provider records the creation as pending and
// calls the cloud, which is slow; provider-kausality is killed while both
// Creates are in flight. crossplane-runtime's second write, the one that
// records the creation as done, goes through without Kausality (it changes
// nothing but that bookkeeping), so neither Bucket is left at "cannot
// determine creation result": each is created in the cloud exactly once,
// the XR's conditions stay current while the provider is down (Crossplane's
// status writes pass), and, once the provider is back, the
// Claim settles with nothing else sent to the cloud. It kills the
// provider, so it runs alone.
func TestCreationCompletesWhileDown(t *testing.T) {
	const ns, name = "outage-create", "midcreate"
	comp := composition(t, 1)
	namespace(t, ns)
	release := cp.Cloud.HoldPrefix(name + "-")
	defer release()
	c := claim(ns, name, "small", map[string]string{"jira": "INFRA-1"})
	_ = unstructured.SetNestedField(c.Object, comp, "spec", "compositionRef", "name")
	if err := alice(t).Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	pending := func(b *unstructured.Unstructured) bool {
		_, ok := b.GetAnnotations()["crossplane.io/external-create-pending"]
		return ok
	}
	fixture.Eventually(t, settleTimeout, "both Buckets' Creates in flight (recorded as pending)", func() (bool, string) {
		bs, err := cp.Buckets(context.Background(), key)
		if err != nil || len(bs) != 2 {
			return false, fmt.Sprint(len(bs), " buckets ", err)
		}
		for res, b := range bs {
			if !pending(b) {
				return false, res + " not pending: " + fmt.Sprint(gate(b))
			}
		}
		return true, ""
	})
	restart := killProvider(t)
	release()
	fixture.Eventually(t, settleTimeout, "both creations recorded as done while the provider is down", func() (bool, string) {
		for res, b := range buckets(t, key) {
			if _, ok := b.GetAnnotations()["crossplane.io/external-create-succeeded"]; !ok {
				return false, res + ": " + fmt.Sprint(b.GetAnnotations())
			}
		}
		return true, ""
	})
	// Crossplane core's status writes are not blocked meanwhile (the
	// status webhooks skip the writers they admit): the XR's conditions
	// stay current, so `kubectl wait` and GitOps health checks see why it
	// is not Ready instead of a stale Synced. Its reconcile fails at
	// applying what it composed, which needs the managed webhook.
	down := time.Now()
	fixture.Eventually(t, settleTimeout, "the XR's status current while the provider is down", func() (bool, string) {
		x, err := cp.XR(context.Background(), key)
		if err != nil || x == nil {
			return false, fmt.Sprint(err)
		}
		s := controlplane.Condition(x, "Synced")
		return s.Status == "False" && strings.Contains(s.Message, "kausality.io"), controlplane.Conditions(x)
	})
	t.Logf("the XR reported the outage in its Synced condition %s after the provider went down", time.Since(down).Round(100*time.Millisecond))

	restart()
	settle(t, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
}

// killProvider kills every provider-kausality replica and returns what
// starts them again and waits until the provider's webhook configurations
// are back; the test's end starts them if the test did not.
func killProvider(t *testing.T) (restart func()) {
	t.Helper()
	cp.KillProvider()
	restarted := false
	start := func() error {
		restarted = true
		if err := cp.StartProvider(); err != nil {
			return err
		}
		if err := controlplane.WaitForRules(context.Background(), cp.AdminClient(), "databaseclaims", "buckets"); err != nil {
			return fmt.Errorf("the restarted provider does not write its webhook configurations again: %w", err)
		}
		return nil
	}
	// A scenario that fails while the provider is down leaves it running
	// and serving, as it found it, so the next one does not fail for it.
	t.Cleanup(func() {
		if !restarted {
			if err := start(); err != nil {
				t.Error(err)
			}
		}
	})
	return func() {
		t.Helper()
		if err := start(); err != nil {
			t.Fatal(err)
		}
	}
}

// resizedWhileDown has Alice resize the Claim key to large while the
// cloud holds the data bucket's writes, waits until the bucket's gate
// opens for the Update, kills the provider, releases the cloud and waits
// until the Update reached it, once: a permitted change in flight when the
// provider went down. It returns killProvider's restart and the data
// bucket's allowance, still open and unmarked (nobody can mark it).
func resizedWhileDown(t *testing.T, key client.ObjectKey) (restart func(), open allowance.Allowance) {
	t.Helper()
	data := buckets(t, key)["data"]
	c := claim(key.Namespace, key.Name, "", nil)
	release := cp.Cloud.Hold(data.GetName())
	defer release()
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the data bucket's gate to open for the Update", func() (bool, string) {
		b := buckets(t, key)["data"]
		return slices.Contains(gate(b), "Update"), fmt.Sprint(gate(b))
	})
	restart = killProvider(t)
	release()
	fixture.Eventually(t, 30*time.Second, "the external Update", func() (bool, string) {
		n := cp.Cloud.Count(recorder.VerbUpdate, data.GetName())
		return n == 1, fmt.Sprint(n, " updates")
	})
	as := fixture.Allowances(t, buckets(t, key)["data"])
	if len(as) != 1 || as[0].Consumed {
		t.Fatalf("allowances while the provider is down = %+v, want the open one, unmarked", as)
	}
	return restart, as[0]
}
