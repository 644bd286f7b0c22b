package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestConcurrentWriters runs 100 writers against one chain while
// Crossplane, the function, admission and the gate controller do their
// part: Alice resizes her Claim three times, each once the one before has
// reached the cloud, and 99 of Bob's writers keep trying what the threat
// model forbids (DESIGN §4a): resizing the Claim, hand-editing the
// Buckets, opening their gates, forging allowances and traces, and
// removing the gated label. The cloud must see Alice's three changes,
// each exactly once, and nothing of Bob's; no allowance may be lost or
// left open, and every trace must stay well-formed.
//
// It runs on its own, not in parallel with other scenarios: its 99 writers
// load the webhooks and Crossplane's claim controller so much that
// scenarios beside it (and it beside them) miss their deadlines on two
// cores, which would measure the machine, not Kausality.
func TestConcurrentWriters(t *testing.T) {
	key := created(t, composition(t, 1), "concurrent", "orders")
	names := map[string]string{}
	for res, b := range buckets(t, key) {
		names[res] = b.GetName()
	}

	stop := make(chan struct{})
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	attacks := []func(c client.Client, i int) error{
		func(c client.Client, _ int) error { // resize the Claim, always to the other size
			o := claim(key.Namespace, key.Name, "", nil)
			return write(c, o, func() {
				other := "large"
				if s, _, _ := unstructured.NestedString(o.Object, "spec", "size"); s == "large" {
					other = "small"
				}
				_ = unstructured.SetNestedField(o.Object, other, "spec", "size")
			})
		},
		func(c client.Client, i int) error { // hand-edit a Bucket
			o := bucketObject(names["data"])
			return write(c, o, func() { _ = unstructured.SetNestedField(o.Object, int64(100+i), "spec", "forProvider", "size") })
		},
		func(c client.Client, _ int) error { // forge an allowance
			o := bucketObject(names["logs"])
			return write(c, o, func() {
				a := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbDelete, o.GetGeneration()+1, allowance.Trace{{APIVersion: "v1", Kind: "Bob", Name: "bob", Generation: 1, Timestamp: allowance.Timestamp(time.Now())}})
				_ = unstructured.SetNestedField(o.Object, allowance.Format([]allowance.Allowance{a}), "metadata", "annotations", v1alpha1.AnnotationAllowances)
			})
		},
		func(c client.Client, _ int) error { // forge a trace
			o := bucketObject(names["data"])
			return write(c, o, func() {
				_ = unstructured.SetNestedField(o.Object, `[{"apiVersion":"v1","kind":"Bob","name":"bob","generation":1}]`, "metadata", "annotations", v1alpha1.AnnotationTrace)
			})
		},
		func(c client.Client, _ int) error { // remove the gated label
			o := bucketObject(names["data"])
			return write(c, o, func() {
				l := o.GetLabels()
				delete(l, v1alpha1.LabelGated)
				o.SetLabels(l)
			})
		},
	}
	bob := as(t, controlplane.Bob)
	for i := range 99 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attack := attacks[i%len(attacks)]
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := attack(bob, i); err != nil {
					denied.Add(1)
				} else {
					admitted.Add(1)
					t.Logf("bob's attack %d was admitted", i%len(attacks))
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()
	}

	// Alice: three permitted resizes, each once the last reached the cloud.
	for i, size := range []string{"large", "small", "large"} {
		c := claim(key.Namespace, key.Name, "", nil)
		if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, size, "spec", "size") }); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("alice's resize %d to %s: %v", i+1, size, err)
		}
		want := map[string]int64{"large": 2, "small": 1}[size]
		fixture.Eventually(t, settleTimeout, fmt.Sprintf("alice's resize %d to reach the cloud", i+1), func() (bool, string) {
			s, _ := cp.Cloud.Get(names["data"])
			return s.Size == want && counts(names["data"])[1] == i+1, fmt.Sprintf("cloud size %d, %v calls", s.Size, counts(names["data"]))
		})
	}
	close(stop)
	wg.Wait()
	t.Logf("bob's writers: %d writes refused, %d admitted", denied.Load(), admitted.Load())
	if n := admitted.Load(); n != 0 {
		t.Errorf("%d of bob's writes were admitted, want none: each changes the spec, a protected annotation or the gated label", n)
	}

	settle(t, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 3, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(names["data"]); s.Size != 2 {
		t.Errorf("cloud size = %d, want alice's last, 2", s.Size)
	}
	for res, b := range buckets(t, key) {
		if b.GetLabels()[v1alpha1.LabelGated] != "true" {
			t.Errorf("bucket %s lost its gated label", res)
		}
		tr := traceOf(t, b)
		if err := tr.Validate(); err != nil || len(tr) == 0 {
			t.Errorf("bucket %s trace %v is not well-formed: %v", res, tr, err)
		}
		for _, h := range tr {
			if h.Kind == "Bob" || h.User == controlplane.Bob {
				t.Errorf("bucket %s trace %v carries bob's forgery or edit", res, kinds(tr))
			}
		}
		for _, a := range fixture.Allowances(t, b) {
			if !a.Consumed || strings.Contains(a.Initiator, "bob") {
				t.Errorf("bucket %s keeps allowance %+v, want only consumed ones of alice's", res, a)
			}
		}
	}
	if denied.Load() < 99 {
		t.Errorf("only %d of bob's writes were refused: the attack did not run", denied.Load())
	}
}

// bucketObject is a Bucket to read by name.
func bucketObject(name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(controlplane.BucketGVK)
	o.SetName(name)
	return o
}

// write is one attempt of a read-modify-write, without retries: a
// conflict counts as a refused write like a denial.
func write(c client.Client, o *unstructured.Unstructured, change func()) error {
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
		return err
	}
	change()
	return c.Update(context.Background(), o)
}
