package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
)

// TestClosedGateChosenByTheComposition runs a Composition whose kausality
// step closes gates to [Observe] (readOnlyPolicies) through the function,
// the provider's webhook and its gate controller together: the closed gate
// is the Composition's everywhere, an Update gate is [Observe, Update], and
// neither the gate controller nor admission rewrites it to the default
// [Observe, LateInitialize] (which Crossplane's next apply would undo, and
// the two would rewrite each other forever).
func TestClosedGateChosenByTheComposition(t *testing.T) {
	t.Parallel()
	name := "closed-gate-by-composition"
	if err := cp.Composition(context.Background(), filepath.Join("testdata", "composition-observe.yaml"), name); err != nil {
		t.Fatal(err)
	}
	observeOnly := []string{"Observe"}
	key := createdClosed(t, name, "readonly", "orders", observeOnly)
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	stays(t, key, observeOnly)

	// Every gate the data bucket shows from here on.
	seen := watchGates(t, key, "data")
	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice's permitted change: %v", err)
	}
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	settleClosed(t, key, observeOnly)
	stays(t, key, observeOnly)
	for _, g := range seen() {
		if !slices.Equal(g, observeOnly) && !slices.Equal(g, []string{"Observe", "Update"}) {
			t.Errorf("data bucket gate %v while the change went through, want only [Observe] and [Observe Update]", g)
		}
	}
}

// watchGates polls a bucket's gate until the test ends and returns a
// function listing the distinct gates seen.
func watchGates(t *testing.T, key client.ObjectKey, res string) func() [][]string {
	t.Helper()
	return watchGatesOf(t, func() *unstructured.Unstructured {
		bs, err := cp.Buckets(context.Background(), key)
		if err != nil {
			return nil
		}
		return bs[res]
	})
}

// watchGatesOf polls the gate of the Bucket get reads (nil: none to read
// now) until the test ends and returns a function listing the distinct
// gates seen.
func watchGatesOf(t *testing.T, get func() *unstructured.Unstructured) func() [][]string {
	t.Helper()
	var mu sync.Mutex
	var seen [][]string
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			b := get()
			if b == nil {
				continue
			}
			g := gate(b)
			mu.Lock()
			if !slices.ContainsFunc(seen, func(s []string) bool { return slices.Equal(s, g) }) {
				seen = append(seen, g)
			}
			mu.Unlock()
		}
	}()
	return func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// stays checks every bucket's gate is want and stays so while the gate
// controller and the recording provider keep reconciling.
func stays(t *testing.T, key client.ObjectKey, want []string) {
	t.Helper()
	deadline := time.Now().Add(3 * controlplane.Poll)
	for time.Now().Before(deadline) {
		for res, b := range buckets(t, key) {
			if !slices.Equal(gate(b), want) {
				t.Fatalf("%s bucket %s gate = %v, want %v (rewritten by %s)", key, res, gate(b), want, fmt.Sprint(managersOf(b)))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func managersOf(o *unstructured.Unstructured) []string {
	var out []string
	for _, m := range o.GetManagedFields() {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	return out
}
