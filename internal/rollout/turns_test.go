package rollout

import (
	"strings"
	"testing"
)

func TestParseTurns(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   Turns
		err    string // a part of the error, "" when it parses
	}{
		"Empty":   {reason: "No annotation is no turn.", in: ""},
		"OneTurn": {reason: "As the provider writes it.", in: `[{"upgrade":"pt","generation":2,"logic":"logic ab"}]`, want: Turns{{Upgrade: "pt", Generation: 2, Logic: "logic ab"}}},
		"UnknownField": {reason: "A newer provider's field an older function cannot read: it takes no turn it cannot read whole.",
			in: `[{"upgrade":"pt","generation":2,"logic":"logic ab","batch":3}]`, err: "unknown field"},
		"NoGeneration": {reason: "A turn names the generation it was worked out for.", in: `[{"upgrade":"pt","logic":"logic ab"}]`, err: "generation of at least 1"},
		"NoLogic":      {reason: "A turn names the logic it was worked out for.", in: `[{"upgrade":"pt","generation":1}]`, err: "needs an upgrade, a logic"},
		"Trailing":     {reason: "One value only.", in: `[] []`, err: "more than one JSON value"},
		"NotJSON":      {reason: "Garbage is an error, not no turn silently.", in: `turn`, err: "cannot parse the rollout turns"},
		"TooMany":      {reason: "Bounded.", in: "[" + strings.Repeat(`{"upgrade":"pt","generation":1,"logic":"l"},`, maxTurns) + `{"upgrade":"pt","generation":1,"logic":"l"}]`, err: "at most 64"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTurns(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s\nParseTurns(%q) = %v, %v; want an error containing %q", tc.reason, tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("%s\nParseTurns(%q) = %v, %v; want %v", tc.reason, tc.in, got, err, tc.want)
			}
		})
	}
}

func TestTurnsHas(t *testing.T) {
	ts := Turns{{Upgrade: "pt", Generation: 2, Logic: "logic ab"}}
	if !ts.Has("pt", 2, "logic ab") {
		t.Error("Has: the turn recorded")
	}
	for _, c := range []Turn{{"pt", 3, "logic ab"}, {"pt", 2, "logic cd"}, {"other", 2, "logic ab"}} {
		if ts.Has(c.Upgrade, c.Generation, c.Logic) {
			t.Errorf("Has(%+v): a turn for another generation, logic or upgrade counts for nothing", c)
		}
	}
	if got := append(ts, Turn{"other", 1, "l"}).Without("pt"); len(got) != 1 || got[0].Upgrade != "other" {
		t.Errorf("Without(pt) = %v", got)
	}
}

// FuzzParseTurns: the annotation sits on composites users may read and
// Crossplane may carry. Whatever it holds, ParseTurns does not panic, and
// what it accepts formats to text it reads back the same.
func FuzzParseTurns(f *testing.F) {
	for _, s := range []string{"", "[]", `[{"upgrade":"pt","generation":2,"logic":"logic ab"}]`, `[{"upgrade":"b","generation":1,"logic":"x"},{"upgrade":"a","generation":9,"logic":"y"}]`, `{`, `[{"upgrade":1}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTurns(s)
		if err != nil {
			return
		}
		again, err := ParseTurns(ts.Format())
		if err != nil {
			t.Fatalf("ParseTurns(%q).Format() = %q does not parse: %v", s, ts.Format(), err)
		}
		for _, x := range ts {
			if !again.Has(x.Upgrade, x.Generation, x.Logic) {
				t.Errorf("turn %+v lost in %q", x, ts.Format())
			}
		}
	})
}
