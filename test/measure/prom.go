package measure

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// Sum adds the samples of metric whose labels contain every filter.
func Sum(m map[string]float64, metric string, filters ...string) float64 {
	var total float64
	for k, v := range m {
		name, labels, _ := strings.Cut(k, "{")
		if name != metric {
			continue
		}
		ok := true
		for _, f := range filters {
			ok = ok && strings.Contains(labels, f)
		}
		if ok {
			total += v
		}
	}
	return total
}

// HistogramBound is what a Prometheus histogram can say of its
// q-quantile over what it gained between two scrapes (before, after:
// Scrape's maps), counting the observations whose series contains every
// filter: the upper bound of the bucket the quantile falls in. It is NaN
// when nothing was observed, +Inf above the highest finite bound.
// controller-runtime's webhook latency buckets are decades (10 ms, 100 ms,
// 1 s), so interpolating within one would invent a figure; the bound is
// what is known.
func HistogramBound(q float64, before, after map[string]float64, metric string, filters ...string) float64 {
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

// HistogramMean is the mean of what a histogram observed between two
// scrapes, from its exact _sum and _count; NaN when nothing was observed.
func HistogramMean(before, after map[string]float64, metric string, filters ...string) float64 {
	n := Sum(after, metric+"_count", filters...) - Sum(before, metric+"_count", filters...)
	if n == 0 {
		return math.NaN()
	}
	return (Sum(after, metric+"_sum", filters...) - Sum(before, metric+"_sum", filters...)) / n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
