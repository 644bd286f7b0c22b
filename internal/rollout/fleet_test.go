package rollout

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// composite is XR db-<i> (zero-padded, so name order is number order);
// logic is the logic its KausalityUpgraded names, upgraded whether it is
// True, ready whether it is Ready.
func composite(i int, logic string, upgraded, ready bool) (string, map[string]any) {
	status := func(b bool) string {
		if b {
			return "True"
		}
		return "False"
	}
	var cs []any
	if logic != "" {
		cs = append(cs, map[string]any{"type": v1alpha1.ConditionUpgraded, "status": status(upgraded), "message": logic + ": every composed resource is produced by the current logic"})
	}
	cs = append(cs, map[string]any{"type": v1alpha1.ConditionReady, "status": status(ready)})
	name := fmt.Sprintf("db-%04d", i)
	return "team/" + name, map[string]any{"metadata": map[string]any{"name": name, "namespace": "team"}, "status": map[string]any{"conditions": cs}}
}

// fleet is n composites under logic, of which the first updated applied it,
// all Ready except those in notReady.
func fleet(n, updated int, notReady ...int) Fleet {
	f := Fleet{}
	for i := 1; i <= n; i++ {
		id, o := composite(i, "logic new", i <= updated, !slices.Contains(notReady, i))
		f[id] = o
	}
	return f
}

func TestDecide(t *testing.T) {
	exponential, err := compileWhen(DefaultUpgradeWhen)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason  string
		fleet   Fleet
		logic   string
		turns   int // db-1..db-<turns> have a turn, nobody else
		updated int
	}{
		"FirstBatch":  {reason: "Nobody applied it: the first composite goes alone.", fleet: fleet(8, 0), logic: "logic new", turns: 1},
		"SecondBatch": {reason: "db-1 applied it and is Ready: two go.", fleet: fleet(8, 1), logic: "logic new", turns: 2, updated: 1},
		"UnhealthyHolds": {reason: "db-1 applied it but is not Ready: the batch does not grow.",
			fleet: fleet(8, 1, 1), logic: "logic new", turns: 1},
		"ThirdBatch": {reason: "Two applied it: four go.", fleet: fleet(8, 2), logic: "logic new", turns: 4, updated: 2},
		"LastBatch":  {reason: "Four applied it: all eight go.", fleet: fleet(8, 4), logic: "logic new", turns: 8, updated: 4},
		"OtherLogic": {reason: "Composites True under an older logic did not apply this one: counting them would open the next batch early.",
			fleet: func() Fleet {
				f := fleet(8, 0)
				for i := 1; i <= 4; i++ {
					id, o := composite(i, "logic old", true, true)
					f[id] = o
				}
				return f
			}(), logic: "logic new", turns: 1},
		"LargeFleet": {reason: "A fleet past the size whose positions are indexed decides as a small one.", fleet: fleet(300, 64), logic: "logic new", turns: 128, updated: 64},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := Decide(exponential, tc.fleet, tc.logic, now)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := 1; i <= tc.turns; i++ {
				id, _ := composite(i, "", false, false)
				want = append(want, id)
			}
			got := slices.Sorted(maps.Keys(d.Turns))
			if !slices.Equal(got, want) || d.Updated != tc.updated {
				t.Errorf("%s\nDecide: turns %v, updated %d; want %v, updated %d", tc.reason, got, d.Updated, want, tc.updated)
			}
			if tc.turns < len(tc.fleet) && d.Failed != DefaultUpgradeWhen[0] {
				t.Errorf("%s\nDecide: Failed = %q, want the expression that held the rest back", tc.reason, d.Failed)
			}
		})
	}
}

func TestDecideFailingExpression(t *testing.T) {
	rule, err := compileWhen([]string{"xr.spec.tier == 'canary'"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decide(rule, fleet(3, 0), "logic new", time.Now())
	if err == nil || len(d.Turns) != 0 {
		t.Errorf("an expression that fails on every composite: turns %v, error %v; want no turn and the error", d.Turns, err)
	}
}

func TestLogics(t *testing.T) {
	f := fleet(2, 0)
	id, o := composite(3, "logic old", true, true)
	f[id] = o
	id, o = composite(4, "", false, true)
	f[id] = o
	if got := f.Logics(); !slices.Equal(got, []string{"logic new", "logic old"}) {
		t.Errorf("Logics = %v, want the two logics composites name", got)
	}
}

// BenchmarkDecide is the provider's work per roll-out step: whose turn it
// is across fleets of 50, 500 and 5,000 composites. make bench-scale
// reports its time per composite and how that grows with the fleet.
func BenchmarkDecide(b *testing.B) {
	rule, err := compileWhen(DefaultUpgradeWhen)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for _, n := range []int{50, 500, 5000} {
		f := fleet(n, n/4)
		b.Run(fmt.Sprintf("fleet=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Decide(rule, f, "logic new", now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/composite")
		})
	}
}
