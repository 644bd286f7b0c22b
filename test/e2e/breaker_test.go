package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// tokens counts, per XR, what Crossplane's XR watch circuit breaker
// charges it: a token for each event of a watched object that maps to the
// XR (its composed resources and itself), two for an update (the handler
// maps the old and the new object). Its default bucket holds 100 tokens
// and refills one a second.
type tokens struct {
	mu sync.Mutex
	n  map[string]int // XR name → tokens
	ev map[string]int // "XR/kind/resource" → events
	// last is each object's previous state and writes what each update
	// changed, per XR, so the log says which write each event was.
	last   map[string]*unstructured.Unstructured
	writes map[string][]string
}

// watch counts the events of gvk's objects in ns until ctx ends, charging
// each to the XR it maps to: its own name for an XR, the
// crossplane.io/composite label for a composed resource.
func (tk *tokens) watch(ctx context.Context, t *testing.T, gvk schema.GroupVersionKind, resource, ns string, xr bool) {
	t.Helper()
	dc, err := dynamic.NewForConfig(cp.Admin)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dc.Resource(gvk.GroupVersion().WithResource(resource)).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch %s in %s: %v", resource, ns, err)
	}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			owner, what := u.GetNamespace()+"/"+u.GetLabels()["crossplane.io/composite"], u.GetKind()+" "+u.GetAnnotations()["crossplane.io/composition-resource-name"]
			if xr {
				owner, what = u.GetNamespace()+"/"+u.GetName(), u.GetKind()
			}
			cost := map[watch.EventType]int{watch.Added: 1, watch.Modified: 2}[e.Type]
			if owner == u.GetNamespace()+"/" || cost == 0 {
				continue
			}
			tk.mu.Lock()
			tk.n[owner] += cost
			tk.ev[owner+"/"+what]++
			key := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
			if prev := tk.last[key]; prev != nil && e.Type == watch.Modified {
				tk.writes[owner] = append(tk.writes[owner], what+": "+changed(prev, u))
			}
			tk.last[key] = u
			tk.mu.Unlock()
		}
	}()
}

// take returns the tokens and events counted for xr ("namespace/name")
// and starts over.
func (tk *tokens) take(xr string) (int, map[string]int) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	n, ev := tk.n[xr], map[string]int{}
	for k, v := range tk.ev {
		if len(k) > len(xr) && k[:len(xr)+1] == xr+"/" {
			ev[k[len(xr)+1:]] = v
			delete(tk.ev, k)
		}
	}
	delete(tk.n, xr)
	return n, ev
}

// takeWrites returns what each update counted for xr changed, and starts
// over.
func (tk *tokens) takeWrites(xr string) []string {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	w := tk.writes[xr]
	delete(tk.writes, xr)
	return w
}

// changed names what differs between two states of an object: the
// top-level spec fields, the kausality.io and crossplane.io annotations,
// the status conditions and the field managers whose entries changed.
func changed(a, b *unstructured.Unstructured) string {
	var out []string
	as, _, _ := unstructured.NestedMap(a.Object, "spec")
	bs, _, _ := unstructured.NestedMap(b.Object, "spec")
	for k := range union(as, bs) {
		if !equality.Semantic.DeepEqual(as[k], bs[k]) {
			out = append(out, "spec."+k)
		}
	}
	aa, ba := a.GetAnnotations(), b.GetAnnotations()
	for k := range union(aa, ba) {
		if aa[k] != ba[k] {
			out = append(out, "annotation "+k)
		}
	}
	ac, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
	bc, _, _ := unstructured.NestedSlice(b.Object, "status", "conditions")
	if !equality.Semantic.DeepEqual(ac, bc) {
		out = append(out, "conditions "+conditionsChanged(ac, bc))
	}
	am, bm := managers(a), managers(b)
	for k := range union(am, bm) {
		if am[k] != bm[k] {
			out = append(out, "by "+k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// conditionsChanged names the conditions that differ between a and b, with
// what they became.
func conditionsChanged(a, b []any) string {
	byType := func(cs []any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok {
				out[fmt.Sprint(m["type"])] = m
			}
		}
		return out
	}
	am, bm := byType(a), byType(b)
	var out []string
	for t := range union(am, bm) {
		if !equality.Semantic.DeepEqual(am[t], bm[t]) {
			var what []string
			for k := range union(am[t], bm[t]) {
				if !equality.Semantic.DeepEqual(am[t][k], bm[t][k]) {
					what = append(what, k)
				}
			}
			slices.Sort(what)
			msg := fmt.Sprint(bm[t]["message"])
			if len(msg) > 100 {
				msg = msg[:100] + "…"
			}
			out = append(out, fmt.Sprintf("%s=%v(%s %q)", t, bm[t]["status"], strings.Join(what, "+"), msg))
		}
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

// managers are an object's field managers (manager, operation and
// subresource) with the time of their last write.
func managers(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, m := range u.GetManagedFields() {
		out[m.Manager+"/"+string(m.Operation)+"/"+m.Subresource] = m.Time.String() + string(m.FieldsV1.Raw)
	}
	return out
}

func union[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestV2CircuitBreakerBudget measures, side by side in one run, what
// Kausality costs an XR against Crossplane's XR watch circuit breaker: an
// XStore composed through Kausality's step next to the same XStore
// composed without it in a Namespace in Audit (Kausality's webhooks
// answer, nothing is gated). It counts the watch events the breaker
// charges each for its creation and for a permitted resize, and how long
// the resize takes to reach the cloud from Alice's write. Both resizes
// reach the cloud exactly once, and Kausality's events stay at most
// twice those without it for the creation and at most three times for
// the resize (its gate opens and closes around the change);
// docs/PERFORMANCE.md reports the figures.
func TestV2CircuitBreakerBudget(t *testing.T) {
	t.Parallel()
	b := breakerBudget(t, "v2-breaker", storeComposition(t), filepath.Join(v2Dir, "composition.yaml"), 2)
	if r := ratio(b.created[gatedStore], b.created[plainStore]); r > 2 {
		t.Errorf("the creation with Kausality cost %.1f× the breaker tokens of the one without (%d, %d), want at most 2×", r, b.created[gatedStore], b.created[plainStore])
	}
	if r := ratio(b.resized[gatedStore], b.resized[plainStore]); r > 3 {
		t.Errorf("the resize with Kausality cost %.1f× the breaker tokens of the one without (%d, %d), want at most 3×", r, b.resized[gatedStore], b.resized[plainStore])
	}
}

// TestV2CircuitBreakerBudgetAtScale is TestV2CircuitBreakerBudget for
// XStores of 8 and 40 composed resources: the data bucket the resize
// changes, and logs buckets it leaves alone. Each resize reaches the
// cloud once and no logs bucket's cloud resource is written; with
// Kausality no logs bucket the resize leaves alone is written (the XR's
// KausalityComposed condition records that the change was composed for
// it, DESIGN §3), and the data bucket at most twice more than without
// (its gate opening and closing). docs/PERFORMANCE.md reports the ratios.
func TestV2CircuitBreakerBudgetAtScale(t *testing.T) {
	t.Parallel()
	for _, n := range []int{8, 40} {
		t.Run(fmt.Sprintf("resources=%d", n), func(t *testing.T) {
			file := scaledStoreComposition(t, n)
			name := compositionFrom(t, file)
			b := breakerBudget(t, fmt.Sprintf("v2-breaker-%d", n), name, file, n)
			for what, ev := range b.resizeEvents[gatedStore] {
				switch {
				case what == "Bucket data":
					if limit := b.resizeEvents[plainStore][what] + 2; ev > limit {
						t.Errorf("the resize with Kausality wrote the data bucket %d times, want at most %d", ev, limit)
					}
				case strings.HasPrefix(what, "Bucket logs"):
					if ev > 0 {
						t.Errorf("the resize with Kausality wrote %s %d times, want never: the XR records that it was composed", what, ev)
					}
				}
			}
		})
	}
}

// The two XStores breakerBudget compares.
const (
	gatedStore = "with Kausality"
	plainStore = "without"
)

// budget is what breakerBudget measured, by XStore (gatedStore,
// plainStore): breaker tokens and, for the resize, events by composed
// resource ("Bucket data") and the time until the cloud was resized.
type budget struct {
	created, resized map[string]int
	resizeEvents     map[string]map[string]int
	took             map[string]time.Duration
}

// breakerBudget has Alice create, then resize, an XStore of n composed
// resources composed by comp (from file) in Namespace ns next to the same
// XStore composed by file without Kausality's step in ns-plain (in
// Audit), and counts what Crossplane's circuit breaker charges each. Each
// resize must reach the data bucket's cloud resource exactly once and
// leave every other bucket's alone.
func breakerBudget(t *testing.T, ns, comp, file string, n int) budget {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gatedNS, plainNS := ns, ns+"-plain"
	namespace(t, gatedNS)
	namespace(t, plainNS)
	namespaceMode(t, plainNS, string(v1alpha1.ModeAudit))
	plainComp := comp + "-plain"
	applyWithoutKausality(t, file, plainComp)

	tk := &tokens{n: map[string]int{}, ev: map[string]int{}, last: map[string]*unstructured.Unstructured{}, writes: map[string][]string{}}
	for _, ns := range []string{gatedNS, plainNS} {
		tk.watch(ctx, t, controlplane.MBucketGVK, "buckets", ns, false)
		tk.watch(ctx, t, controlplane.StoreGVK, "xstores", ns, true)
	}

	type xstore struct {
		what   string
		key    client.ObjectKey
		comp   string
		settle func(*testing.T, client.ObjectKey)
	}
	xs := []xstore{
		{gatedStore, client.ObjectKey{Namespace: gatedNS, Name: "shop"}, comp, settleStore},
		{plainStore, client.ObjectKey{Namespace: plainNS, Name: "shop"}, plainComp, func(t *testing.T, key client.ObjectKey) { settledBuckets(t, key, n) }},
	}
	for _, x := range xs {
		o := store(x.key.Namespace, x.key.Name, "small", nil)
		_ = unstructured.SetNestedField(o.Object, x.comp, "spec", "crossplane", "compositionRef", "name")
		if err := alice(t).Create(ctx, o); err != nil {
			t.Fatalf("alice creates XStore %s: %v", x.key, err)
		}
	}
	b := budget{created: map[string]int{}, resized: map[string]int{}, resizeEvents: map[string]map[string]int{}, took: map[string]time.Duration{}}
	data := map[string]string{}
	others := map[string][]string{}
	for _, x := range xs {
		x.settle(t, x.key)
		for res, bk := range storeBuckets(t, x.key) {
			if res == "data" {
				data[x.what] = bk.GetName()
			} else {
				others[x.what] = append(others[x.what], bk.GetName())
			}
		}
	}
	// Kausality's bookkeeping of the creation (each used Create allowance
	// pruned) ends before the resize is counted: with Crossplane's breaker
	// open after a large creation it comes late, and would be charged to
	// the resize.
	fixture.Eventually(t, settleTimeout, "every Bucket of the XStore with Kausality without allowances", func() (bool, string) {
		for res, bk := range storeBuckets(t, xs[0].key) {
			if as := fixture.Allowances(t, bk); len(as) > 0 {
				return false, fmt.Sprintf("Bucket %s carries %d allowances", res, len(as))
			}
		}
		return true, ""
	})
	time.Sleep(3 * controlplane.Poll)
	for _, x := range xs {
		n, ev := tk.take(x.key.String())
		b.created[x.what] = n
		t.Logf("creation of the XStore %s: %d breaker tokens (events %v); updates:\n  %s", x.what, n, ev, strings.Join(tk.takeWrites(x.key.String()), "\n  "))
	}

	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, x := range xs {
		o := store(x.key.Namespace, x.key.Name, "", nil)
		if err := controlplane.Update(alice(t), o, func() { _ = unstructured.SetNestedField(o.Object, "large", "spec", "size") }); err != nil {
			t.Fatalf("alice resizes %s: %v", x.key, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < settleTimeout {
				if cp.Cloud.Count(recorder.VerbUpdate, data[x.what]) > 0 {
					mu.Lock()
					b.took[x.what] = time.Since(start)
					mu.Unlock()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, x := range xs {
		x.settle(t, x.key)
	}
	time.Sleep(3 * controlplane.Poll)
	for _, x := range xs {
		n, ev := tk.take(x.key.String())
		t.Logf("resize of the XStore %s: reached the cloud after %s, %d breaker tokens (events %v); updates:\n  %s", x.what, b.took[x.what].Round(10*time.Millisecond), n, ev, strings.Join(tk.takeWrites(x.key.String()), "\n  "))
		if b.took[x.what] == 0 {
			t.Errorf("the resize of the XStore %s did not reach the cloud within %s", x.what, settleTimeout)
		}
		if got := counts(data[x.what]); got != [3]int{1, 1, 0} {
			t.Errorf("data bucket of the XStore %s: external Create/Update/Delete = %v, want one of each but Delete", x.what, got)
		}
		for _, name := range others[x.what] {
			if got := counts(name); got != [3]int{1, 0, 0} {
				t.Errorf("bucket %s of the XStore %s: external Create/Update/Delete = %v, want one Create", name, x.what, got)
			}
		}
		o, err := cp.Object(ctx, controlplane.StoreGVK, x.key)
		if err != nil || o == nil {
			t.Fatalf("XStore %s: %v", x.key, err)
		}
		if c := controlplane.Condition(o, "Responsive"); c.Status == "False" {
			t.Logf("Crossplane's circuit breaker opened on the XStore %s: %s", x.what, c.Message)
		}
		b.resized[x.what] = n
		b.resizeEvents[x.what] = ev
	}
	if p := b.took[plainStore]; p > 0 {
		t.Logf("%d composed resources: a permitted resize with Kausality took %.1f× the time it took without; breaker tokens %.1f× for the creation, %.1f× for the resize",
			n, float64(b.took[gatedStore])/float64(p), ratio(b.created[gatedStore], b.created[plainStore]), ratio(b.resized[gatedStore], b.resized[plainStore]))
	}
	return b
}

// scaledStoreComposition writes the XStore Composition of v2Dir with n
// composed resources, the data bucket and n-1 logs buckets (logs,
// logs-2, ...), into the test's temporary directory and returns its path.
func scaledStoreComposition(t *testing.T, n int) string {
	t.Helper()
	u := readComposition(t, filepath.Join(v2Dir, "composition.yaml"))
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
	pt, _ := steps[0].(map[string]any)
	rs, _, _ := unstructured.NestedSlice(pt, "input", "resources")
	i := slices.IndexFunc(rs, func(r any) bool { m, _ := r.(map[string]any); return m["name"] == "logs" })
	if i < 0 || len(rs) != 2 {
		t.Fatalf("%s: want the data and logs buckets, got %d resources", v2Dir, len(rs))
	}
	for k := 2; k < n; k++ {
		c := runtime.DeepCopyJSONValue(rs[i]).(map[string]any)
		c["name"] = fmt.Sprintf("logs-%d", k)
		rs = append(rs, c)
	}
	if err := unstructured.SetNestedSlice(pt, rs, "input", "resources"); err != nil {
		t.Fatal(err)
	}
	steps[0] = pt
	if err := unstructured.SetNestedSlice(u.Object, steps, "spec", "pipeline"); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "composition.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func ratio(a, b int) float64 { return float64(a) / float64(max(b, 1)) }

// readComposition reads the Composition in file, the suite's own test data.
func readComposition(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(file) //nolint:gosec // the suite's own test data
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// applyWithoutKausality applies the Composition in file, named name,
// without its last pipeline step (Kausality's).
func applyWithoutKausality(t *testing.T, file, name string) {
	t.Helper()
	u := readComposition(t, file)
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
	if len(steps) < 2 {
		t.Fatalf("%s: want a pipeline ending in Kausality's step, got %d steps", file, len(steps))
	}
	if err := unstructured.SetNestedSlice(u.Object, steps[:len(steps)-1], "spec", "pipeline"); err != nil {
		t.Fatal(err)
	}
	u.SetName(name)
	if err := cp.Apply(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// settledBuckets waits until the XStore is Synced at its generation and
// each of its n Buckets is Synced at its own, gated or not.
func settledBuckets(t *testing.T, key client.ObjectKey, n int) {
	t.Helper()
	ctx := context.Background()
	fixture.Eventually(t, settleTimeout, fmt.Sprintf("XStore %s and its Buckets Synced at their generations", key), func() (bool, string) {
		xr, err := cp.Object(ctx, controlplane.StoreGVK, key)
		if err != nil || xr == nil {
			return false, fmt.Sprint(err)
		}
		if s := controlplane.Condition(xr, "Synced"); s.Status != "True" || s.ObservedGeneration != xr.GetGeneration() {
			return false, "XStore not Synced at its generation: " + s.Message
		}
		bs := storeBuckets(t, key)
		if len(bs) != n {
			return false, fmt.Sprintf("%d Buckets, want %d", len(bs), n)
		}
		for res, b := range bs {
			if s := controlplane.Condition(b, "Synced"); s.Status != "True" || s.ObservedGeneration != b.GetGeneration() {
				return false, fmt.Sprintf("Bucket %s not Synced at its generation", res)
			}
		}
		return true, ""
	})
}
