package measure

import (
	"math"
	"os/exec"
	"testing"
	"time"
)

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
			if got := HistogramBound(tc.q, before, after, m, `webhook="/mutate-managed"`); got != tc.want {
				t.Errorf("HistogramBound(%g) = %g, want %g", tc.q, got, tc.want)
			}
		})
	}
	if got := HistogramMean(before, after, m, `webhook="/mutate-managed"`); math.Abs(got-0.05) > 1e-9 {
		t.Errorf("HistogramMean = %g, want 0.05 (5 s over 100 calls)", got)
	}
	if got := HistogramBound(0.99, after, after, m, `webhook="/mutate-managed"`); !math.IsNaN(got) {
		t.Errorf("HistogramBound of nothing observed = %g, want NaN", got)
	}
	if got := HistogramMean(after, after, m, `webhook="/mutate-managed"`); !math.IsNaN(got) {
		t.Errorf("HistogramMean of nothing observed = %g, want NaN", got)
	}
}

// TestChildCPU: a child busy for a while shows up by its command name, and
// a name no child has counts nothing.
func TestChildCPU(t *testing.T) {
	if got := ChildCPU("no-such-command"); got != 0 {
		t.Errorf("ChildCPU(no-such-command) = %s, want 0", got)
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done; sleep 5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for ChildCPU("sh") < 100*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("a busy child sh used %s of CPU after 20s, want at least 100ms", ChildCPU("sh"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
