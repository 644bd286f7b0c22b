package gatebench

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// histogramBound is what a Prometheus histogram can say of its
// q-quantile over what it gained between two scrapes (before, after:
// Metrics' maps), counting the observations whose series contains every
// filter: the upper bound of the bucket the quantile falls in. It is NaN
// when nothing was observed, +Inf above the highest finite bound.
// controller-runtime's webhook latency buckets are decades (10 ms, 100 ms,
// 1 s), so interpolating within one would invent a figure; the bound is
// what is known.
func histogramBound(q float64, before, after map[string]float64, metric string, filters ...string) float64 {
	type bucket struct{ le, count float64 }
	var bs []bucket
	for k, v := range after {
		if !strings.HasPrefix(k, metric+"_bucket{") || !containsAll(k, filters) {
			continue
		}
		i := strings.Index(k, `le="`)
		if i < 0 {
			continue
		}
		raw := k[i+4:]
		raw = raw[:strings.IndexByte(raw, '"')]
		le, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le: le, count: v - before[k]})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].count
	for _, b := range bs {
		if b.count >= rank {
			return b.le
		}
	}
	return math.Inf(1)
}

// histogramMean is the mean of what a histogram observed between two
// scrapes, from its exact _sum and _count; NaN when nothing was observed.
func histogramMean(before, after map[string]float64, metric string, filters ...string) float64 {
	n := sum(after, metric+"_count", filters...) - sum(before, metric+"_count", filters...)
	if n == 0 {
		return math.NaN()
	}
	return (sum(after, metric+"_sum", filters...) - sum(before, metric+"_sum", filters...)) / n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestHistogram(t *testing.T) {
	const m = `controller_runtime_webhook_latency_seconds`
	key := func(le string) string { return m + `_bucket{webhook="/mutate-managed",le="` + le + `"}` }
	before := map[string]float64{key("0.01"): 10, key("0.1"): 10, key("1"): 10, key("+Inf"): 10,
		m + `_count{webhook="/mutate-managed"}`: 10, m + `_sum{webhook="/mutate-managed"}`: 1}
	// 100 new observations: 50 up to 10 ms, 40 more up to 100 ms, 10 more
	// up to 1 s, 5 s in all.
	after := map[string]float64{key("0.01"): 60, key("0.1"): 100, key("1"): 110, key("+Inf"): 110,
		m + `_count{webhook="/mutate-managed"}`: 110, m + `_sum{webhook="/mutate-managed"}`: 6,
		m + `_bucket{webhook="/mutate-composites",le="0.01"}`: 1000}
	cases := map[string]struct {
		q    float64
		want float64
	}{
		"Median":   {q: 0.5, want: 0.01},
		"P90":      {q: 0.9, want: 0.1},
		"P99":      {q: 0.99, want: 1},
		"Smallest": {q: 0.01, want: 0.01},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := histogramBound(tc.q, before, after, m, `webhook="/mutate-managed"`); got != tc.want {
				t.Errorf("histogramBound(%g) = %g, want %g", tc.q, got, tc.want)
			}
		})
	}
	if got := histogramMean(before, after, m, `webhook="/mutate-managed"`); math.Abs(got-0.05) > 1e-9 {
		t.Errorf("histogramMean = %g, want 0.05 (5 s over 100 calls)", got)
	}
	if got := histogramBound(0.99, after, after, m, `webhook="/mutate-managed"`); !math.IsNaN(got) {
		t.Errorf("histogramBound of nothing observed = %g, want NaN", got)
	}
	if got := histogramMean(after, after, m, `webhook="/mutate-managed"`); !math.IsNaN(got) {
		t.Errorf("histogramMean of nothing observed = %g, want NaN", got)
	}
}
