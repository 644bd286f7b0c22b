package gatebench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/measure"
	recorderv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
)

var (
	closedGate = []string{"Observe", "LateInitialize"}
	openGate   = []string{"Observe", "Update", "LateInitialize"}

	buckets = recorderv1alpha1.SchemeGroupVersion.WithResource("buckets")
)

// rate spreads the status writes: at most this many a second; 0 writes
// them all at once, the worst case (a provider resyncing every resource).
var rate = flag.Float64("gatebench.rate", 0, "status writes a second in the measured phase; 0: all at once")

// heapProfile names a file for the provider's heap profile, taken once its
// gates settled, to see what its resident memory holds.
var heapProfile = flag.String("gatebench.heapprofile", "", "write the provider's heap profile (go tool pprof) here once its gates settled")

// runs numbers benchmark runs; -count repeats them in one process.
var runs atomic.Int64

const (
	// labelRun tells one run's objects from another's.
	labelRun = "gatebench.kausality.io/run"
	// perComposite is how many Buckets one composite controls.
	perComposite = 10
	// workers write concurrently, as Crossplane's and a provider's
	// reconcilers do.
	workers = 16
)

// TestGateCloses is the benchmark's run with a few resources: every gate
// the provider sees open closes once the observed generation catches up,
// every allowance is marked consumed, and no GateOpen condition is
// written: a gate that does what its allowances say is told by its
// policies, its allowances and Events.
func TestGateCloses(t *testing.T) {
	r := measureRun(t, 20, "test")
	t.Logf("20 gated Buckets: %s", r)
	kube, err := as("")
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 20*time.Second, "every Bucket closed and its allowance consumed", func() (bool, string) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(buckets.GroupVersion().WithKind("BucketList"))
		if err := kube.List(context.Background(), l, client.MatchingLabels{labelRun: r.run}); err != nil {
			return false, err.Error()
		}
		if len(l.Items) != 20 {
			return false, fmt.Sprintf("%d Buckets", len(l.Items))
		}
		for i := range l.Items {
			b := &l.Items[i]
			if p := policiesOf(b); !slices.Equal(p, closedGate) {
				return false, fmt.Sprintf("%s gate %v", b.GetName(), p)
			}
			as := fixture.Allowances(t, b)
			if len(as) != 1 || !as[0].Consumed {
				return false, fmt.Sprintf("%s allowances %s", b.GetName(), b.GetAnnotations()[v1alpha1.AnnotationAllowances])
			}
			if c := fixture.Condition(b, "GateOpen"); c != nil {
				t.Errorf("%s GateOpen condition %v, want none", b.GetName(), c)
			}
		}
		return true, ""
	})
	r.cleanup(t)
}

// BenchmarkGateClose1000 reports how long the gate controller takes from a
// provider's status write that catches up with an Update allowance to the
// closed gate, for 1000 gated Buckets whose status is written at once (or
// at -gatebench.rate), and the provider's resident memory, next to that of
// a bare controller-runtime manager caching the same Buckets (./reference)
// in the same run. The goals (p99 ≤ 1s, RSS ≤ 50 MB) are reported, not
// asserted.
func BenchmarkGateClose1000(b *testing.B) {
	for i := 0; i < b.N; i++ {
		r := measureRun(b, 1000, fmt.Sprintf("bench-%d", runs.Add(1)))
		b.StopTimer()
		r.cleanup(b)
		b.StartTimer()
		if i == b.N-1 {
			r.report(b)
		}
	}
}

// BenchmarkGateCloseScale is BenchmarkGateClose1000 at two scales ten times
// apart, 50 composites controlling 500 Buckets and 500 controlling 5,000
// (perComposite each), so the figures per Bucket show how the provider
// grows: the managed webhook's p99 while Crossplane stamps every Bucket at
// once, the gate controller's CPU per close, resident memory against the
// reference manager. make bench-scale runs it (about 15 minutes on two
// cores); make bench does not.
func BenchmarkGateCloseScale(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("composites=%d/mrs=%d", n/perComposite, n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := measureRun(b, n, fmt.Sprintf("scale-%d", runs.Add(1)))
				b.StopTimer()
				r.cleanup(b)
				b.StartTimer()
				if i == b.N-1 {
					r.report(b)
				}
			}
		})
	}
}

// result is one run's figures.
type result struct {
	run       string
	n         int
	latencies []time.Duration // status write to closed gate, per Bucket
	seen      time.Duration   // from the first stamp until the provider reported every gate open
	quiet     time.Duration   // from the first stamp until the gate controller was idle
	burst     time.Duration   // from the first status write until the last gate closed
	writes    time.Duration   // from the first status write until the last returned
	settled   time.Duration   // from the first status write until the gate controller was idle again
	rssIdle   int64           // after start, before any Bucket
	idleAnon  int64           // of rssIdle, what is not the binary's mapped pages
	rssPeak   int64
	rssEnd    int64
	rssAnon   int64 // of rssEnd, what is not the binary's mapped pages
	// The reference manager's (see ./reference), in the same run.
	refIdle, refPeak, refEnd int64
	// admission is the managed webhook's latency while Crossplane's
	// workers stamp every Bucket at once, from the provider's histogram
	// (seconds): the exact mean, and the bucket bound its p99 lies under;
	// stamps the round trip of each of those writes as Crossplane sees
	// it, sorted, whose p99 is exact.
	admissionMean, admissionP99Bound float64
	admissionCalls                   float64 // how many calls the histogram counted
	stamps                           []time.Duration
	// cpu the provider used from the first status write until settled.
	cpu time.Duration
	// cpCPU kube-apiserver and etcd used in the same time.
	cpCPU time.Duration
	// metrics at the end, and before the first status write.
	metrics, before map[string]float64
	provider        *measure.Process
	reference       *measure.Process
}

func (r *result) percentile(p float64) time.Duration { return percentile(r.latencies, p) }

// percentile is the p-quantile of sorted ds, 0 when there are none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[max(i, 0)]
}

// during is how much metric (summed over the filters' samples) grew
// from the first status write until settled.
func (r *result) during(metric string, filters ...string) float64 {
	return measure.Sum(r.metrics, metric, filters...) - measure.Sum(r.before, metric, filters...)
}

func (r *result) String() string {
	return fmt.Sprintf("while Crossplane stamped all %d at once (16 writers): managed webhook mean %.1f ms, p99 at most %.0f ms, over %.0f calls, Crossplane's write p50 %s p99 %s; "+
		"close latency p50 %s p99 %s max %s; all %d closed %s after the first status write (%.0f/s), the writes took %s, provider idle after %s; provider saw all open %s after stamping and was idle after %s. "+
		"Provider RSS idle %.1f MB (anonymous %.1f MB), peak %.1f MB, end %.1f MB (anonymous %.1f MB); Go heap in use %.1f MB, Go sys %.1f MB. "+
		"Reference manager caching the same Buckets: RSS idle %.1f MB, peak %.1f MB, end %.1f MB; the provider holds %.2f× its peak, %.2f× its end. "+
		"While closing, per Bucket: provider CPU %.1f ms (kube-apiserver and etcd %.1f ms), gate reconciles %.2f, managed webhook calls %.2f, API requests GET %.2f PUT %.2f POST %.2f",
		r.n, r.admissionMean*1000, r.admissionP99Bound*1000, r.admissionCalls, ms(percentile(r.stamps, 0.5)), ms(percentile(r.stamps, 0.99)),
		ms(r.percentile(0.5)), ms(r.percentile(0.99)), ms(r.percentile(1)), len(r.latencies), ms(r.burst), r.closesPerSecond(), ms(r.writes), ms(r.settled), ms(r.seen), ms(r.quiet),
		mb(r.rssIdle), mb(r.idleAnon), mb(r.rssPeak), mb(r.rssEnd), mb(r.rssAnon), mb(int64(r.metrics["go_memstats_heap_inuse_bytes"])), mb(int64(r.metrics["go_memstats_sys_bytes"])),
		mb(r.refIdle), mb(r.refPeak), mb(r.refEnd), ratio(r.rssPeak, r.refPeak), ratio(r.rssEnd, r.refEnd),
		r.cpuPerMR(), float64(r.cpCPU)/float64(time.Millisecond)/float64(r.n), r.perMR("controller_runtime_reconcile_total", `controller="gate/`), r.perMR("controller_runtime_webhook_requests_total", `webhook="/mutate-managed"`),
		r.perMR("rest_client_requests_total", `method="GET"`), r.perMR("rest_client_requests_total", `method="PUT"`), r.perMR("rest_client_requests_total", `method="POST"`))
}

func (r *result) perMR(metric string, filters ...string) float64 {
	return r.during(metric, filters...) / float64(r.n)
}

func (r *result) cpuPerMR() float64 {
	return float64(r.cpu) / float64(time.Millisecond) / float64(r.n)
}

func (r *result) closesPerSecond() float64 {
	return float64(r.n) / r.burst.Seconds()
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
func mb(b int64) float64        { return float64(b) / (1 << 20) }

// ratio is a over b, 0 when b is unknown.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (r *result) report(b *testing.B) {
	b.ReportMetric(float64(r.percentile(0.5))/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(r.percentile(0.99))/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(float64(r.percentile(1))/float64(time.Millisecond), "max-ms")
	b.ReportMetric(r.closesPerSecond(), "closes/s")
	b.ReportMetric(mb(r.rssPeak), "rss-peak-MB")
	b.ReportMetric(mb(r.rssEnd), "rss-end-MB")
	b.ReportMetric(mb(r.rssAnon), "rss-anon-MB")
	b.ReportMetric(ratio(r.rssPeak, r.refPeak), "rss-peak-x-reference")
	b.ReportMetric(ratio(r.rssEnd, r.refEnd), "rss-end-x-reference")
	b.ReportMetric(mb(int64(r.metrics["go_memstats_heap_inuse_bytes"])), "heap-inuse-MB")
	b.ReportMetric(r.cpuPerMR(), "cpu-ms/MR")
	b.ReportMetric(float64(r.cpCPU)/float64(time.Millisecond)/float64(r.n), "apiserver-cpu-ms/MR")
	b.ReportMetric(r.perMR("rest_client_requests_total"), "requests/MR")
	b.ReportMetric(r.admissionMean*1000, "admission-mean-ms")
	b.ReportMetric(float64(percentile(r.stamps, 0.99))/float64(time.Millisecond), "stamp-p99-ms")
	how := "status written all at once"
	if *rate > 0 {
		how = fmt.Sprintf("status written at %g a second", *rate)
	}
	b.Logf("%d gated Buckets, %s: %s", r.n, how, r)
}

// cleanup deletes the run's objects and the XDatabase policy, while the
// provider still answers the deletion webhooks they are under, and then
// stops the provider.
func (r *result) cleanup(t testing.TB) {
	t.Helper()
	defer r.reference.Stop()
	defer r.provider.Stop()
	kube, err := as("")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []schema.GroupVersionKind{recorderv1alpha1.BucketGroupVersionKind, {Group: "example.com", Version: "v1alpha1", Kind: "XDatabase"}} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kind)
		if err := kube.DeleteAllOf(context.Background(), u, client.MatchingLabels{labelRun: r.run}); err != nil {
			t.Errorf("cannot delete the run's %ss: %v", kind.Kind, err)
		}
	}
	p := &unstructured.Unstructured{}
	p.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	p.SetKind(v1alpha1.AllowancePolicyKind)
	p.SetName(policyXDatabases)
	if err := kube.Delete(context.Background(), p); err != nil && !kerrors.IsNotFound(err) {
		t.Errorf("cannot delete AllowancePolicy %s: %v", policyXDatabases, err)
	}
}

// measure runs the provider, gives n gated Buckets an open Update gate,
// waits until the provider has seen every one open, then writes each
// one's status as the cloud provider would once the Update went through,
// and times, from a watch, each gate's closing.
func measureRun(t testing.TB, n int, run string) *result {
	t.Helper()
	if b, ok := t.(*testing.B); ok {
		b.StopTimer()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube, cp := clients(t)

	p, err := startProvider("provider-" + run)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := startReference("reference-" + run)
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	r := &result{run: run, n: n, provider: p, reference: ref}
	t.Cleanup(p.Stop)
	t.Cleanup(ref.Stop)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\nprovider log (tail):\n%s", append(args, tail(p.Log(), 40))...)
	}
	if err := controlplane.WaitForRules(ctx, kube, "buckets"); err != nil {
		fail("%v", err)
	}
	r.rssIdle, _ = p.RSS()
	r.idleAnon, _ = p.Status("RssAnon")
	r.refIdle, _ = ref.RSS()

	w := newWatch(ctx, t, run)

	// Composites, each with an unconsumed External Update allowance a
	// policy would have given it; the provider's identity writes them, as
	// composite admission would have.
	xrs := make([]*unstructured.Unstructured, (n+perComposite-1)/perComposite)
	for i := range xrs {
		name := fmt.Sprintf("%s-x%d", run, i)
		xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "2"}}}
		xr.SetAPIVersion("example.com/v1alpha1")
		xr.SetKind("XDatabase")
		xr.SetName(name)
		xr.SetLabels(map[string]string{labelRun: run})
		xr.SetAnnotations(map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{
			allowance.ExternalGrant(recorderv1alpha1.Group, recorderv1alpha1.BucketKind, v1alpha1.VerbUpdate, 1, allowance.Trace{xrHop(name)}),
		})})
		if err := kube.Create(ctx, xr); err != nil {
			fail("cannot create composite %s: %v", name, err)
		}
		xrs[i] = xr
	}
	// A chain trusts a composite's allowances only when a policy is for
	// its kind (admission wrote them then): one for XDatabases, after the
	// composites, so that composite admission leaves the allowances
	// written above as they are.
	if err := forXDatabases(ctx, kube); err != nil {
		fail("%v", err)
	}

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-b%04d", run, i)
	}
	// Crossplane creates the Buckets with the gate closed; the cloud
	// provider reports them reconciled at generation 1.
	parallel(t, names, func(i int, name string) error {
		b := bucket(name, run, xrs[i/perComposite])
		if err := cp.Create(ctx, b); err != nil {
			return fmt.Errorf("crossplane creates %s: %w", name, err)
		}
		return observe(ctx, kube, b)
	})
	// Crossplane carries the composite's change to each Bucket and stamps
	// the allowance chaining to the composite's; admission opens the gate
	// in the same write.
	beforeStamp, err := p.Scrape()
	if err != nil {
		fail("cannot scrape the provider's metrics: %v", err)
	}
	var stampMu sync.Mutex
	stamped := time.Now()
	parallel(t, names, func(i int, name string) error {
		b := bucket(name, run, xrs[i/perComposite])
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cp.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
				return err
			}
			gen := b.GetGeneration() + 1
			_ = unstructured.SetNestedField(b.Object, int64(2), "spec", "forProvider", "size")
			ann := b.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			xr := xrs[i/perComposite].GetName()
			own := allowance.HopOf(b, gen)
			own.Field, own.Timestamp = "spec.forProvider.size", allowance.Timestamp(time.Now())
			// The Buckets were created with the gate closed, so nothing of
			// their spec (the CRD's defaults included) was let through yet:
			// the allowance ships all of it.
			ann[v1alpha1.AnnotationAllowances] = allowance.Format([]allowance.Allowance{
				allowance.ExternalGrant(recorderv1alpha1.Group, recorderv1alpha1.BucketKind, v1alpha1.VerbUpdate, gen, allowance.Trace{xrHop(xr), own}).
					Shipping([]v1alpha1.MutationBound{{JSONPath: "spec", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationAll}}}),
			})
			b.SetAnnotations(ann)
			start := time.Now()
			if err := cp.Update(ctx, b); err != nil {
				return err
			}
			stampMu.Lock()
			r.stamps = append(r.stamps, time.Since(start))
			stampMu.Unlock()
			if got := policiesOf(b); !slices.Equal(got, openGate) {
				return fmt.Errorf("gate of %s after stamping = %v, want %v", name, got, openGate)
			}
			return nil
		})
	})

	afterStamp, err := p.Scrape()
	if err != nil {
		fail("cannot scrape the provider's metrics: %v", err)
	}
	const webhookLatency, managed = "controller_runtime_webhook_latency_seconds", `webhook="/mutate-managed"`
	r.admissionMean = measure.HistogramMean(beforeStamp, afterStamp, webhookLatency, managed)
	r.admissionP99Bound = measure.HistogramBound(0.99, beforeStamp, afterStamp, webhookLatency, managed)
	r.admissionCalls = measure.Sum(afterStamp, webhookLatency+"_count", managed) - measure.Sum(beforeStamp, webhookLatency+"_count", managed)
	slices.Sort(r.stamps)

	// The provider has seen every one open when it has counted it.
	deadline := stamped.Add(time.Duration(n)*100*time.Millisecond + time.Minute)
	opened := measure.Sum(beforeStamp, "kausality_gates_opened_total")
	for {
		m, err := p.Scrape()
		if err != nil {
			fail("cannot scrape the provider's metrics: %v", err)
		}
		seen := measure.Sum(m, "kausality_gates_opened_total") - opened
		if seen >= float64(n) {
			break
		}
		if time.Now().After(deadline) {
			fail("the provider saw %.0f of %d gates open after %s", seen, n, time.Since(stamped))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.seen = time.Since(stamped)
	// Measure from a quiet provider, not from its backlog.
	if err := quiet(p, deadline); err != nil {
		fail("%v", err)
	}
	r.quiet = time.Since(stamped)

	// The cloud provider applied each Update and reports it: status write
	// times are recorded just before each request, so a latency includes
	// the write itself.
	if b, ok := t.(*testing.B); ok {
		b.StartTimer()
	}
	if r.before, err = p.Scrape(); err != nil {
		fail("cannot scrape the provider's metrics: %v", err)
	}
	cpu, cpCPU := p.CPU(), controlPlaneCPU()
	first := time.Now()
	paced(t, names, *rate, func(_ int, name string) error {
		// The informer's copy first; a fresh read only after a conflict.
		b := w.latest(name)
		if b == nil {
			return fmt.Errorf("the watch has not seen %s", name)
		}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			setObserved(b)
			w.wrote(name, time.Now())
			err := kube.Status().Update(ctx, b)
			if kerrors.IsConflict(err) {
				if gerr := kube.Get(ctx, client.ObjectKeyFromObject(b), b); gerr != nil {
					return gerr
				}
			}
			return err
		})
	})
	r.writes = time.Since(first)

	deadline = time.Now().Add(time.Duration(n)*100*time.Millisecond + time.Minute)
	for closed := w.count(func(s *state) bool { return !s.closedAt.IsZero() }); closed < n; closed = w.count(func(s *state) bool { return !s.closedAt.IsZero() }) {
		if time.Now().After(deadline) {
			fail("%d of %d gates closed after %s", closed, n, time.Since(first))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b, ok := t.(*testing.B); ok {
		b.StopTimer()
	}
	// Settled: the gate controller has done all the closing made it do.
	if err := quiet(p, deadline); err != nil {
		fail("%v", err)
	}
	r.settled = time.Since(first)
	r.cpu, r.cpCPU = p.CPU()-cpu, controlPlaneCPU()-cpCPU
	var last time.Time
	w.mu.Lock()
	for name, s := range w.states {
		if !s.consumedAtClose {
			t.Errorf("%s closed without its allowance marked consumed", name)
		}
		r.latencies = append(r.latencies, s.closedAt.Sub(s.wroteAt))
		if s.closedAt.After(last) {
			last = s.closedAt
		}
	}
	w.mu.Unlock()
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	r.burst = last.Sub(first)
	r.rssEnd, r.rssPeak = p.RSS()
	r.rssAnon, _ = p.Status("RssAnon")
	r.refEnd, r.refPeak = ref.RSS()
	if r.metrics, err = p.Scrape(); err != nil {
		t.Errorf("cannot scrape the provider's metrics: %v", err)
	}
	if *heapProfile != "" {
		if err := p.HeapProfile(*heapProfile); err != nil {
			t.Errorf("cannot write the provider's heap profile: %v", err)
		}
	}
	return r
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(len(l)-lines, 0):], "\n")
}

// clients are the envtest administrator and Crossplane's service account.
func clients(t testing.TB) (kube, crossplane client.Client) {
	t.Helper()
	kube, err := as("")
	if err != nil {
		t.Fatal(err)
	}
	crossplane, err = as(controlplane.CrossplaneUser, "system:serviceaccounts")
	if err != nil {
		t.Fatal(err)
	}
	return kube, crossplane
}

// parallel runs fn for every name on a few workers and fails t on the
// first error.
func parallel(t testing.TB, names []string, fn func(i int, name string) error) {
	t.Helper()
	paced(t, names, 0, fn)
}

// paced is parallel starting at most rate calls a second (0: no limit).
func paced(t testing.TB, names []string, rate float64, fn func(i int, name string) error) {
	t.Helper()
	var wg sync.WaitGroup
	idx := make(chan int)
	errs := make(chan error, len(names))
	for range workers {
		wg.Go(func() {
			for i := range idx {
				if err := fn(i, names[i]); err != nil {
					errs <- err
				}
			}
		})
	}
	start := time.Now()
	for i := range names {
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// bucket is a gated Bucket controlled by xr, as Crossplane composes it.
func bucket(name, run string, xr *unstructured.Unstructured) *unstructured.Unstructured {
	b := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"forProvider":        map[string]any{"size": int64(1), "region": "eu"},
		"managementPolicies": []any{"Observe", "LateInitialize"},
	}}}
	b.SetGroupVersionKind(recorderv1alpha1.BucketGroupVersionKind)
	b.SetName(name)
	b.SetLabels(map[string]string{v1alpha1.LabelGated: "true", "crossplane.io/composite": xr.GetName(), labelRun: run})
	b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Name: xr.GetName(), UID: xr.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
	return b
}

// observe reports b reconciled at its current generation, as the cloud
// provider does.
func observe(ctx context.Context, kube client.Client, b *unstructured.Unstructured) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		setObserved(b)
		err := kube.Status().Update(ctx, b)
		if kerrors.IsConflict(err) {
			if gerr := kube.Get(ctx, client.ObjectKeyFromObject(b), b); gerr != nil {
				return gerr
			}
		}
		return err
	})
}

// setObserved sets status.observedGeneration and the Synced condition to
// the object's generation, as crossplane-runtime's managed reconciler does
// after a successful reconcile; other conditions stay.
func setObserved(b *unstructured.Unstructured) {
	gen := b.GetGeneration()
	now := time.Now().UTC().Format(time.RFC3339)
	conds, _, _ := unstructured.NestedSlice(b.Object, "status", "conditions")
	conds = slices.DeleteFunc(conds, func(c any) bool { m, _ := c.(map[string]any); return m["type"] == "Synced" })
	conds = append(conds, map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": now, "observedGeneration": gen})
	_ = unstructured.SetNestedSlice(b.Object, conds, "status", "conditions")
	_ = unstructured.SetNestedField(b.Object, gen, "status", "observedGeneration")
}

// xrHop is the composite's hop of the change the benchmark plays.
func xrHop(name string) allowance.Hop {
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion("example.com/v1alpha1")
	xr.SetKind("XDatabase")
	xr.SetName(name)
	h := allowance.HopOf(xr, 1).By(controlplane.Alice, time.Now())
	h.Field = "spec.size"
	return h
}

func policiesOf(o *unstructured.Unstructured) []string {
	p, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "managementPolicies")
	return p
}

// watch follows one run's Buckets with an informer.
type watch struct {
	mu     sync.Mutex
	states map[string]*state
}

type state struct {
	obj             *unstructured.Unstructured
	wroteAt         time.Time
	closedAt        time.Time
	consumedAtClose bool
}

func newWatch(ctx context.Context, t testing.TB, run string) *watch {
	t.Helper()
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	w := &watch{states: map[string]*state{}}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", func(o *metav1.ListOptions) { o.LabelSelector = labelRun + "=" + run })
	inf := f.ForResource(buckets).Informer()
	on := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			w.store(u)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }}); err != nil {
		t.Fatal(err)
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the Bucket informer does not sync")
	}
	return w
}

// store records what an event (or a fresh read) shows; the first sight of
// a closed gate after the status write is the closing.
func (w *watch) store(u *unstructured.Unstructured) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.states[u.GetName()]
	if s == nil {
		s = &state{}
		w.states[u.GetName()] = s
	}
	if s.obj != nil && s.obj.GetResourceVersion() == u.GetResourceVersion() {
		return
	}
	s.obj = u
	policies := policiesOf(u)
	if !s.wroteAt.IsZero() && s.closedAt.IsZero() && slices.Equal(policies, closedGate) {
		s.closedAt = now
		as, _ := allowance.Parse(u.GetAnnotations()[v1alpha1.AnnotationAllowances])
		s.consumedAtClose = len(as) > 0 && !slices.ContainsFunc(as, func(a allowance.Allowance) bool { return !a.Consumed })
	}
}

// latest is a copy of the last object seen, nil if none.
func (w *watch) latest(name string) *unstructured.Unstructured {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.states[name]; s != nil && s.obj != nil {
		return s.obj.DeepCopy()
	}
	return nil
}

func (w *watch) wrote(name string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.states[name]; s != nil {
		s.wroteAt = at
	} else {
		w.states[name] = &state{wroteAt: at}
	}
}

func (w *watch) count(pred func(*state) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.states {
		if pred(s) {
			n++
		}
	}
	return n
}

// policyXDatabases names the AllowancePolicy for the runs' composites.
const policyXDatabases = "gatebench-xdatabases"

// forXDatabases makes sure an AllowancePolicy is for XDatabases and the
// provider's webhooks cover them.
func forXDatabases(ctx context.Context, kube client.Client) error {
	p := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"for": map[string]any{"apiGroup": "example.com", "apiVersion": "v1alpha1", "kind": "XDatabase"},
	}}}
	p.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	p.SetKind(v1alpha1.AllowancePolicyKind)
	p.SetName(policyXDatabases)
	if err := kube.Create(ctx, p); err != nil && !kerrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create AllowancePolicy %s: %w", p.GetName(), err)
	}
	return controlplane.WaitForRules(ctx, kube, "xdatabases")
}
