package gatebench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/measure"
)

// xfleetCRD is a composite kind as Crossplane generates one for an XRD
// (the composite category, a status subresource), whose composites the
// roll-out controller counts.
const xfleetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: xfleets.fleet.example.com
spec:
  group: fleet.example.com
  names: {kind: XFleet, listKind: XFleetList, plural: xfleets, singular: xfleet, categories: [crossplane, composite]}
  scope: Cluster
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

var xfleet = schema.GroupVersionKind{Group: "fleet.example.com", Version: "v1alpha1", Kind: "XFleet"}

// fleetLogic is the logic the function names on every composite of the
// fleet while an upgrade to it is paced (KausalityUpgraded's message).
const fleetLogic = "xfleets-2 with function-patch-and-transform v0.10.8"

// rolloutResult is what a steady roll-out costs while the fleet waits:
// every figure is per pass of the roll-out controller over the fleet.
type rolloutResult struct {
	n      int
	passes float64
	// reads and writes the API server served of the fleet's composites and
	// UpgradeAllowances (apiserver_request_total), watches included.
	reads, writes float64
	// wrote says which writes, by verb and resource.
	wrote []string
	// cpu the provider used.
	cpu time.Duration
}

func (r rolloutResult) perPass(v float64) float64 { return v / max(r.passes, 1) }

func (r rolloutResult) String() string {
	return fmt.Sprintf("%d composites, %.0f passes: %.2f reads and %.2f writes a pass (%s), %.1f µs of provider CPU a composite a pass",
		r.n, r.passes, r.perPass(r.reads), r.perPass(r.writes), strings.Join(r.wrote, ", "), r.cpuPerComposite())
}

func (r rolloutResult) cpuPerComposite() float64 {
	return float64(r.cpu.Microseconds()) / max(r.passes, 1) / float64(r.n)
}

// TestRolloutPassReadsNothing: while a paced upgrade waits on a fleet, the
// roll-out controller counts the fleet every couple of seconds from its
// watch cache: its passes read nothing from the API server and, with
// nothing changed, write nothing.
func TestRolloutPassReadsNothing(t *testing.T) {
	r := measureRollout(t, 20, fmt.Sprintf("rollout-test-%d", runs.Add(1)), 5*time.Second)
	t.Log(r)
	if r.passes < 2 {
		t.Fatalf("%d passes of the roll-out controller in the window, want at least 2: %s", int(r.passes), r)
	}
	if r.reads != 0 || r.writes != 0 {
		t.Errorf("the passes read %.0f and wrote %.0f composites or UpgradeAllowances through the API server, want none: %s", r.reads, r.writes, r)
	}
}

// BenchmarkRolloutPassScale reports what one pass of the roll-out
// controller costs while a paced upgrade waits on a fleet of 50, 500 and
// 5,000 composites, on a real API server: the API server's reads and
// writes of composites and UpgradeAllowances a pass (the goal: none, at
// any size) and the provider's CPU a pass and a composite a pass (flat,
// the goal). The provider's CPU is all it did in the window (leader
// election, discovery among it), read in the kernel's 10 ms ticks.
// make bench-scale runs it.
func BenchmarkRolloutPassScale(b *testing.B) {
	for _, n := range []int{50, 500, 5000} {
		b.Run(fmt.Sprintf("fleet=%d", n), func(b *testing.B) {
			var r rolloutResult
			for range b.N {
				r = measureRollout(b, n, fmt.Sprintf("rollout-%d", runs.Add(1)), 20*time.Second)
			}
			b.ReportMetric(r.perPass(r.reads), "apiserver-reads/pass")
			b.ReportMetric(r.perPass(r.writes), "apiserver-writes/pass")
			b.ReportMetric(float64(r.cpu.Microseconds())/1000/max(r.passes, 1), "cpu-ms/pass")
			b.ReportMetric(r.cpuPerComposite(), "cpu-µs/composite/pass")
			b.ReportMetric(r.passes, "passes")
		})
	}
}

// measureRollout starts the provider, gives it a fleet of n composites on
// one Composition revision, each reporting that it has not applied the
// new logic, and a paced UpgradeAllowance; once the provider has recorded
// the first batch's turns and counted every composite, it measures the
// passes of the next window.
func measureRollout(t testing.TB, n int, run string, window time.Duration) rolloutResult {
	t.Helper()
	if b, ok := t.(*testing.B); ok {
		b.StopTimer()
		defer b.StartTimer()
	}
	ctx := context.Background()
	kube, cp := clients(t)
	// Before the provider starts: it is ready once it has discovered the
	// composite kinds.
	if err := applyYAML(ctx, kube, xfleetCRD); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 30*time.Second, "XFleets are served", func() (bool, string) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(xfleet.GroupVersion().WithKind("XFleetList"))
		if err := kube.List(ctx, l); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	p, err := startProvider("provider-" + run)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	defer cleanupFleet(t, kube, run)

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", run, i)
	}
	parallel(t, names, func(_ int, name string) error {
		xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"crossplane": map[string]any{"compositionRevisionRef": map[string]any{"name": run + "-2"}},
		}}}
		xr.SetGroupVersionKind(xfleet)
		xr.SetName(name)
		xr.SetLabels(map[string]string{labelRun: run})
		if err := cp.Create(ctx, xr); err != nil {
			return fmt.Errorf("crossplane creates %s: %w", name, err)
		}
		_ = unstructured.SetNestedSlice(xr.Object, []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-27T00:00:00Z"},
			map[string]any{"type": v1alpha1.ConditionUpgraded, "status": "False", "reason": "UpgradeWaiting", "lastTransitionTime": "2026-11-27T00:00:00Z",
				"message": fleetLogic + ": some composed resources have not applied the current logic yet"},
		}, "status", "conditions")
		if err := cp.Status().Update(ctx, xr); err != nil {
			return fmt.Errorf("crossplane reports %s waiting: %w", name, err)
		}
		return nil
	})
	ua := fmt.Sprintf(`apiVersion: kausality.io/v1alpha1
kind: UpgradeAllowance
metadata: {name: %s}
spec:
  compositions:
  - {name: xfleets, revision: 2}
  policies:
  - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
    relation: External
    verbs: [Update]
  rollout: {}
`, run)
	if err := applyYAML(ctx, kube, ua); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 2*time.Minute, "the provider counted every composite and gave the first batch its turn", func() (bool, string) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("UpgradeAllowance"))
		if err := kube.Get(ctx, client.ObjectKey{Name: run}, u); err != nil {
			return false, err.Error()
		}
		composites, _, _ := unstructured.NestedInt64(u.Object, "status", "rollout", "composites")
		turns, _, _ := unstructured.NestedInt64(u.Object, "status", "rollout", "turns")
		if composites != int64(n) || turns == 0 {
			return false, fmt.Sprintf("status.rollout %v", u.Object["status"])
		}
		// The UpgradeAllowance's own controller writes its Ready condition
		// beside the roll-out's record: a write of the setup, not of a pass.
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if c := policy.Condition(u.Object, v1alpha1.ConditionReady); c == nil || observed != u.GetGeneration() {
			return false, fmt.Sprintf("status %v", u.Object["status"])
		}
		return true, ""
	})

	passes := func() float64 {
		m, err := p.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		return measure.Sum(m, "controller_runtime_reconcile_total", `controller="rollouts"`)
	}
	// Steady: two whole passes leave the UpgradeAllowance as it was. Until
	// then a pass may still count a composite whose reported status the
	// provider's cache had not yet received, and record the new count.
	version := func() string {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("UpgradeAllowance"))
		if err := kube.Get(ctx, client.ObjectKey{Name: run}, u); err != nil {
			t.Fatal(err)
		}
		return u.GetResourceVersion()
	}
	fixture.Eventually(t, time.Minute, "the roll-out to be steady", func() (bool, string) {
		v, n := version(), passes()
		for deadline := time.Now().Add(20 * time.Second); passes() < n+2; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				return false, "fewer than two passes in 20s"
			}
		}
		return version() == v, "the UpgradeAllowance changed during two passes"
	})
	api0, passes0, cpu0 := apiserverMetrics(t), passes(), p.CPU()
	time.Sleep(window)
	api1, passes1, cpu1 := apiserverMetrics(t), passes(), p.CPU()
	r := rolloutResult{n: n, passes: passes1 - passes0, cpu: cpu1 - cpu0}
	for _, res := range [][2]string{{"fleet.example.com", "xfleets"}, {"kausality.io", "upgradeallowances"}} {
		filter := []string{`group="` + res[0] + `"`, `resource="` + res[1] + `"`}
		for _, verb := range []string{"GET", "LIST", "WATCH"} {
			r.reads += requests(api1, filter, verb) - requests(api0, filter, verb)
		}
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
			if w := requests(api1, filter, verb) - requests(api0, filter, verb); w > 0 {
				r.writes += w
				r.wrote = append(r.wrote, fmt.Sprintf("%.0f %s of %s", w, verb, res[1]))
			}
		}
	}
	return r
}

func requests(m map[string]float64, filter []string, verb string) float64 {
	return measure.Sum(m, "apiserver_request_total", append(filter, `verb="`+verb+`"`)...)
}

// apiserverMetrics scrapes kube-apiserver's own metrics as the admin.
func apiserverMetrics(t testing.TB) map[string]float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, strings.TrimSuffix(admin.Host, "/")+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("cannot scrape kube-apiserver's metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("kube-apiserver's metrics: %s", resp.Status)
	}
	m, err := measure.Parse(resp.Body)
	if err != nil {
		t.Fatalf("cannot read kube-apiserver's metrics: %v", err)
	}
	if measure.Sum(m, "apiserver_request_total") == 0 {
		t.Fatal("kube-apiserver's metrics count no request")
	}
	return m
}

// applyYAML creates the object y describes, or leaves it as it is.
func applyYAML(ctx context.Context, kube client.Client, y string) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		return fmt.Errorf("cannot parse a test object: %w", err)
	}
	if err := kube.Create(ctx, u); err != nil && !kerrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// cleanupFleet deletes a run's composites and its UpgradeAllowance.
func cleanupFleet(t testing.TB, kube client.Client, run string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(xfleet)
	if err := kube.DeleteAllOf(context.Background(), u, client.MatchingLabels{labelRun: run}); err != nil {
		t.Errorf("cannot delete the run's XFleets: %v", err)
	}
	ua := &unstructured.Unstructured{}
	ua.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("UpgradeAllowance"))
	ua.SetName(run)
	if err := kube.Delete(context.Background(), ua); err != nil && !kerrors.IsNotFound(err) {
		t.Errorf("cannot delete UpgradeAllowance %s: %v", run, err)
	}
}
