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

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestV2ExpiredChangeDoesNotBlockTheNext: Alice's permitted resize opens
// the data bucket's gate while the cloud refuses every write to it, until
// the allowance expires (maxGateOpen, the provider's). The resize is not
// counted as applied and is not left in the spec: the gate's approval goes
// back to the size the cloud has, the function answers the bucket with it
// and the XStore says the resize did not reach the cloud. Alice's next
// permitted change, the tier, then reaches the cloud exactly once, without
// the resize riding along.
func TestV2ExpiredChangeDoesNotBlockTheNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(v2Dir, "composition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "composition.yaml")
	// The kausality step's Input is the file's last line.
	if err := os.WriteFile(file, append(raw, []byte(fmt.Sprintf("      maxGateOpen: %s\n", controlplane.MaxGateOpen))...), 0o600); err != nil {
		t.Fatal(err)
	}
	key := createdStore(t, compositionFrom(t, file), "v2-expired", "shop")
	bs := storeBuckets(t, key)
	data := bs["data"].GetName()
	restore := cp.Cloud.Fail(data)
	defer restore()

	x := store(key.Namespace, key.Name, "", nil)
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the data bucket's gate open for the resize the cloud refuses", func() (bool, string) {
		b := storeBuckets(t, key)["data"]
		return slices.Contains(gate(b), "Update") && controlplane.Condition(b, "Synced").Status == "False", cp.DescribeStore(ctx, key)
	})
	fixture.Eventually(t, controlplane.MaxGateOpen+2*time.Minute, "the expired resize answered with the size the cloud has, and the XStore saying so", func() (bool, string) {
		b := storeBuckets(t, key)["data"]
		size, _, _ := unstructured.NestedInt64(b.Object, "spec", "forProvider", "size")
		xr, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || xr == nil {
			return false, fmt.Sprint(err)
		}
		c := controlplane.Condition(xr, v1alpha1.ConditionAllowed)
		return size == 1 && slices.Equal(gate(b), controlplane.ClosedGate) && c.Status == "False" && strings.Contains(c.Message, "did not reach the cloud"),
			fmt.Sprintf("size %d — %s", size, cp.DescribeStore(ctx, key))
	})
	// It keeps saying so while Alice's resize is still wanted and nothing
	// covers it, not only in the run that answered the bucket back: the
	// provider's status write of the answered bucket makes Crossplane run
	// the pipeline again.
	fixture.Eventually(t, settleTimeout, "the provider synced the answered data bucket", func() (bool, string) {
		b := storeBuckets(t, key)["data"]
		c := controlplane.Condition(b, "Synced")
		return c.Status == "True" && c.ObservedGeneration == b.GetGeneration(), cp.DescribeStore(ctx, key)
	})
	time.Sleep(5 * controlplane.Poll)
	if xr, err := cp.Object(ctx, controlplane.StoreGVK, key); err != nil || xr == nil {
		t.Fatalf("read the XStore: %v", err)
	} else if c := controlplane.Condition(xr, v1alpha1.ConditionAllowed); c.Status != "False" || !strings.Contains(c.Message, "did not reach the cloud") {
		t.Errorf("a while after the resize expired the XStore says %s %q, want that it did not reach the cloud", c.Status, c.Message)
	}
	if got := counts(data); got != [3]int{1, 0, 0} {
		t.Fatalf("data bucket calls while the cloud refused = %v, want only its creation", got)
	}

	restore()
	if err := controlplane.Update(alice(t), x, func() { _ = unstructured.SetNestedField(x.Object, "premium", "spec", "tier") }); err != nil {
		t.Fatalf("alice changes the tier: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the tier in the cloud", func() (bool, string) {
		s, _ := cp.Cloud.Get(data)
		return s.Tags["tier"] == "premium", fmt.Sprintf("cloud %+v — %s", s, cp.DescribeStore(ctx, key))
	})
	time.Sleep(3 * controlplane.Poll)
	if got := counts(data); got != [3]int{1, 1, 0} {
		t.Errorf("data bucket calls = %v, want its creation and the tier's one Update", got)
	}
	if s, _ := cp.Cloud.Get(data); s.Size != 1 {
		t.Errorf("cloud size of the data bucket = %d, want 1: the expired resize rode along with the tier", s.Size)
	}
	if got := counts(bs["logs"].GetName()); got != [3]int{1, 0, 0} {
		t.Errorf("logs bucket calls = %v, want only its creation", got)
	}
}
