package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestFunctionTurn(t *testing.T) {
	cases := map[string]struct {
		reason         string
		outcome        string
		updated, total int
		wantTurns      float64
		wantUpdated    float64
		wantTotal      float64
	}{
		"Counted":    {reason: "A counted turn sets how far the roll-out got.", outcome: TurnTaken, updated: 2, total: 4, wantTurns: 1, wantUpdated: 2, wantTotal: 4},
		"NotCounted": {reason: "A turn decided before counting (total < 0) leaves the gauge alone.", outcome: TurnFailed, updated: 0, total: -1, wantTurns: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewFunction(prometheus.NewRegistry())
			m.Turn("ua", tc.outcome, tc.updated, tc.total)
			if got := testutil.ToFloat64(m.Turns.WithLabelValues("ua", tc.outcome)); got != tc.wantTurns {
				t.Errorf("%s\nturns = %v, want %v", tc.reason, got, tc.wantTurns)
			}
			if got := testutil.CollectAndCount(m.Rollout); tc.total < 0 && got != 0 {
				t.Errorf("%s\nrollout gauge has %d series, want none", tc.reason, got)
			}
			if tc.total >= 0 {
				if got := testutil.ToFloat64(m.Rollout.WithLabelValues("ua", StateUpdated)); got != tc.wantUpdated {
					t.Errorf("%s\nupdated = %v, want %v", tc.reason, got, tc.wantUpdated)
				}
				if got := testutil.ToFloat64(m.Rollout.WithLabelValues("ua", StateTotal)); got != tc.wantTotal {
					t.Errorf("%s\ntotal = %v, want %v", tc.reason, got, tc.wantTotal)
				}
			}
		})
	}
}

func TestDecisionsAndObserve(t *testing.T) {
	f := NewFunction(prometheus.NewRegistry())
	f.Decision("XDatabase", OutcomeWithheld, "no_allowance", "p")
	f.Decision("XDatabase", OutcomeWithheld, "no_allowance", "p")
	if got := testutil.ToFloat64(f.Decisions.WithLabelValues("XDatabase", OutcomeWithheld, "no_allowance", "p")); got != 2 {
		t.Errorf("function decisions = %v, want 2", got)
	}
	a := NewAdmission(prometheus.NewRegistry())
	a.Observe("managed", OutcomeDenied, "protected", "", 3*time.Millisecond)
	if got := testutil.ToFloat64(a.Decisions.WithLabelValues("managed", OutcomeDenied, "protected", "")); got != 1 {
		t.Errorf("admission decisions = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(a.Duration); got != 1 {
		t.Errorf("admission duration series = %d, want 1", got)
	}
}

// TestNilRecordsNothing: the function and handlers run without metrics in
// tests and renders; a nil collector set must not panic.
func TestNilRecordsNothing(_ *testing.T) {
	var f *Function
	var a *Admission
	f.Decision("XDatabase", OutcomeLetThrough, "allowance", "")
	f.Turn("ua", TurnTaken, 1, 2)
	a.Observe("managed", OutcomeAllowed, "pass", "", time.Millisecond)
}

// TestRegisterTwice: each constructor registers its collectors, so a
// second registration on the same registry is refused, as one binary
// must build its metrics once.
func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewAdmission(reg)
	defer func() {
		if recover() == nil {
			t.Error("NewAdmission registered twice on one registry without panicking")
		}
	}()
	NewAdmission(reg)
}
