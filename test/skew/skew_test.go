//go:build skew

// Package skew runs Kausality's function and provider of adjacent
// releases together, in both orders, on real Crossplane core: the
// previous release (RELEASES.md's newest row, built from the repository's
// history) beside this build. docs/OPERATIONS.md ("Upgrades") says they
// work together in either order; `make skew` (part of `make test`) checks
// it on a control plane of its own for each order.
package skew

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// v2Dir holds the scenario suite's Crossplane v2 XStore chain.
var v2Dir = filepath.Join("..", "e2e", "testdata", "v2")

func TestMain(m *testing.M) {
	release := render.Occupy()
	code := m.Run()
	release()
	os.Exit(code)
}

// TestAdjacentReleases: with the previous release's provider and this
// build's function, and then the other way round, an XStore is created,
// Alice's permitted resize reaches the cloud once, and Bob's change of the
// same XStore, which no policy lets him start, is refused and reaches
// nothing.
func TestAdjacentReleases(t *testing.T) {
	root, err := render.Root()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := controlplane.Releases(root)
	if err != nil {
		t.Fatal(err)
	}
	previous := rs[0]
	src := t.TempDir()
	if err := controlplane.Checkout(context.Background(), root, previous.Commit, src); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]controlplane.Options{
		"PreviousProviderThisFunction": {ProviderSource: src},
		"ThisProviderPreviousFunction": {FunctionSource: src},
	} {
		t.Run(name, func(t *testing.T) {
			t.Logf("the previous release is %s at %s", previous.Version, previous.Commit)
			cp := controlplane.ForTest(t, "kausality-skew-", o, func(ctx context.Context, c *controlplane.ControlPlane) error {
				return c.InstallStore(ctx, v2Dir)
			})
			resize(t, cp)
		})
	}
}

// resize creates an XStore as Alice, resizes it as Alice and then as Bob,
// and checks what reached the cloud.
func resize(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	const ns, comp = "shop", "xstores-skew"
	if err := cp.Namespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := cp.Composition(ctx, filepath.Join(v2Dir, "composition.yaml"), comp); err != nil {
		t.Fatal(err)
	}
	alice, err := cp.As(controlplane.Alice, "platform-team")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := cp.As(controlplane.Bob)
	if err != nil {
		t.Fatal(err)
	}
	x := controlplane.NewStore(ns, "shop", "small", comp)
	if err := alice.Create(ctx, x); err != nil {
		t.Fatalf("alice creates XStore shop: %v", err)
	}
	key := client.ObjectKeyFromObject(x)
	if err := cp.WaitStoreSettled(ctx, key, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	bs, err := cp.StoreBuckets(ctx, key)
	if err != nil || bs["data"] == nil {
		t.Fatalf("buckets %v (%v), want a data bucket", bs, err)
	}
	data := bs["data"].GetName()
	counts := func() [3]int {
		return [3]int{cp.Cloud.Count(recorder.VerbCreate, data), cp.Cloud.Count(recorder.VerbUpdate, data), cp.Cloud.Count(recorder.VerbDelete, data)}
	}
	if got := counts(); got != [3]int{1, 0, 0} {
		t.Fatalf("data bucket cloud calls after the creation = %v, want one Create", got)
	}

	if err := controlplane.Update(alice, x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes XStore shop: %v", err)
	}
	fixture.Eventually(t, 2*time.Minute, "alice's resize to reach the cloud", func() (bool, string) {
		s, _ := cp.Cloud.Get(data)
		return counts() == [3]int{1, 1, 0} && s.Size > 1, fmt.Sprintf("calls %v, cloud %+v — %s", counts(), s, cp.DescribeStore(ctx, key))
	})
	if err := cp.WaitStoreSettled(ctx, key, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	err = controlplane.Update(bob, x, func() { _ = unstructured.SetNestedField(x.Object, "small", "spec", "size") })
	if err == nil {
		t.Fatal("bob's resize of XStore shop was admitted, want it refused: no policy lets him start a change")
	}
	t.Logf("bob's resize: %v", err)
	time.Sleep(3 * controlplane.Poll)
	if got := counts(); got != [3]int{1, 1, 0} {
		t.Errorf("data bucket cloud calls after bob's resize = %v, want alice's one Create and one Update", got)
	}
}
