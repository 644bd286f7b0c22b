package gatebench

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// histogramQuantile is Prometheus' histogram_quantile over what a
// histogram gained between two scrapes (before, after: Metrics' maps):
// the q-quantile of the observations whose series contains every filter,
// interpolated linearly within its bucket. It is NaN when nothing was
// observed. Bucket bounds limit its precision: a figure between two
// bounds says the quantile lies in that bucket.
func histogramQuantile(q float64, before, after map[string]float64, metric string, filters ...string) float64 {
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
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower // above the highest finite bound: that bound, as Prometheus answers
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return lower
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestHistogramQuantile(t *testing.T) {
	const m = `controller_runtime_webhook_latency_seconds`
	key := func(le string) string { return m + `_bucket{webhook="/mutate-managed",le="` + le + `"}` }
	before := map[string]float64{key("0.01"): 10, key("0.1"): 10, key("1"): 10, key("+Inf"): 10}
	// 100 new observations: 50 up to 10 ms, 40 more up to 100 ms, 10 more up to 1 s.
	after := map[string]float64{key("0.01"): 60, key("0.1"): 100, key("1"): 110, key("+Inf"): 110,
		m + `_bucket{webhook="/mutate-composites",le="0.01"}`: 1000}
	cases := map[string]struct {
		q    float64
		want float64
	}{
		"Median":   {q: 0.5, want: 0.01},
		"P90":      {q: 0.9, want: 0.1},
		"P99":      {q: 0.99, want: 0.1 + 0.9*9/10},
		"Smallest": {q: 0.1, want: 0.01 * 10 / 50},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := histogramQuantile(tc.q, before, after, m, `webhook="/mutate-managed"`); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("histogramQuantile(%g) = %g, want %g", tc.q, got, tc.want)
			}
		})
	}
	if got := histogramQuantile(0.99, after, after, m, `webhook="/mutate-managed"`); !math.IsNaN(got) {
		t.Errorf("histogramQuantile of nothing observed = %g, want NaN", got)
	}
}
