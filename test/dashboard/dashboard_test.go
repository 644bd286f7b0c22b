// Package dashboard tests the Grafana dashboard in docs/dashboards against
// the metrics the binaries register, so that it neither queries a metric
// that does not exist nor misses one that does.
package dashboard

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/provider/gatecontroller"
)

const path = "../../docs/dashboards/kausality.json"

// registered are the names of every metric the function, admission and the
// gate controller register, from their own constructors.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics.NewFunction(reg)
	metrics.NewAdmission(reg)
	gatecontroller.NewMetrics(reg)
	ch := make(chan *prometheus.Desc)
	go func() {
		// A Registry is a Collector of everything registered with it.
		reg.Describe(ch)
		close(ch)
	}()
	// Desc has no accessor for its name; its String form is stable.
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		out[m[1]] = true
	}
	if len(out) == 0 {
		t.Fatal("no metrics registered")
	}
	return out
}

// exprs are the PromQL expressions of every target of the dashboard,
// wherever it nests them (rows, panels).
func exprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if s, ok := c.(string); ok && k == "expr" {
					out = append(out, s)
					continue
				}
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if len(out) == 0 {
		t.Fatalf("%s has no expr", path)
	}
	return out
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	braces     = regexp.MustCompile(`\{[^}]*\}`)
	brackets   = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	// keywords are PromQL words that are neither metrics nor followed by
	// a parenthesis in every use.
	keywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "inf", "nan"}
)

// metricNames are the metric names expr selects: what remains of it
// without strings, label matchers, ranges and grouping clauses, less the
// functions and aggregations (identifiers called with a parenthesis).
func metricNames(expr string) []string {
	s := quoted.ReplaceAllString(expr, `""`)
	s = braces.ReplaceAllString(s, " ")
	s = brackets.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	var out []string
	for _, m := range identifier.FindAllStringSubmatch(s, -1) {
		if m[1] != "" || slices.Contains(keywords, strings.ToLower(m[0])) {
			continue
		}
		out = append(out, m[0])
	}
	return out
}

// base is a histogram series' metric: name without _bucket, _sum or _count
// when the metric registered is the histogram.
func base(name string, known map[string]bool) string {
	if known[name] {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && known[b] {
			return b
		}
	}
	return name
}

func TestMetricNames(t *testing.T) {
	cases := map[string][]string{
		`sum by (outcome) (rate(kausality_function_decisions_total{xr_kind=~"$xr_kind"}[$__rate_interval]))`:     {"kausality_function_decisions_total"},
		`histogram_quantile(0.99, sum by (webhook, le) (rate(kausality_admission_duration_seconds_bucket[5m])))`: {"kausality_admission_duration_seconds_bucket"},
		`sum(a) / sum without (x) (b{c="d}"}) > bool 0`:                                                          {"a", "b"},
	}
	for expr, want := range cases {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}

func TestDashboardQueriesOnlyRegisteredMetrics(t *testing.T) {
	known := registered(t)
	used := map[string]bool{}
	for _, e := range exprs(t) {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("expr %q selects no metric", e)
		}
		for _, n := range names {
			b := base(n, known)
			if !known[b] {
				t.Errorf("expr %q queries %s, which neither the function, admission nor the gate controller registers", e, n)
			}
			used[b] = true
		}
	}
	for n := range known {
		if !used[n] {
			t.Errorf("metric %s is registered but no panel of %s shows it; add one so the dashboard stays complete", n, path)
		}
	}
}
