package played_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/played"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// TestClosedGateChosenByTheComposition runs a Composition whose kausality
// step closes gates to [Observe] (readOnlyPolicies) through the function,
// the provider's webhook and its gate controller together: the closed gate
// is the Composition's everywhere, an Update gate is [Observe, Update], and
// neither the gate controller nor admission rewrites it to the default
// [Observe, LateInitialize] (which Crossplane's next apply would undo, and
// the two would rewrite each other forever).
func TestClosedGateChosenByTheComposition(t *testing.T) {
	x, err := cp.Crossplane(filepath.Join("..", "..", "e2e", "testdata", "composition-observe.yaml"), "xdatabases-buckets-observe")
	if err != nil {
		t.Fatal(err)
	}
	observeOnly := []string{"Observe"}
	key := created(t, x, "readonly", "orders")
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	stays(t, key, observeOnly)

	c := claim(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice's permitted change: %v", err)
	}
	// The first pass stamps the allowance: the gate opens on the
	// Composition's closed gate.
	ctx := context.Background()
	if _, _, err := x.SyncClaim(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Composite(ctx, played.XRName(key)); err != nil {
		t.Fatal(err)
	}
	if b := buckets(t, key)["data"]; !slices.Equal(gate(b), []string{"Observe", "Update"}) && cp.Cloud.Count(recorder.VerbUpdate, b.GetName()) == 0 {
		t.Errorf("data bucket gate while the change is open = %v, want [Observe Update]", gate(b))
	}
	settle(t, x, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 1, 0}, "logs": {1, 0, 0}})
	stays(t, key, observeOnly)
}

// stays checks every bucket's gate is want and stays so while the gate
// controller and the recording provider keep reconciling.
func stays(t *testing.T, key client.ObjectKey, want []string) {
	t.Helper()
	deadline := time.Now().Add(3 * played.Poll)
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
