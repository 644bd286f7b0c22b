package allowance

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse: the allowances annotation is user-reachable text. Parsing never
// panics, and whatever parses formats to a value that parses to the same.
func FuzzParse(f *testing.F) {
	f.Add(seedAllowance)
	f.Add(`[]`)
	f.Add(`[{"relation":"External","target":{"external":{"kind":"RDSInstance"}},"verbs":["Update"],"generation":3,"consumed":true}]`)
	f.Add(`[{"relation":"ControllerChild","target":{"resource":"x"},"generation":1e3}]`)
	f.Add(`[{"relation":"External","target":{"external":{"kind":"Bucket"}},"verbs":["Update"],"generation":3,"values":{"spec.size":"4e07408562be","":"-"}}]`)
	f.Fuzz(func(t *testing.T, s string) {
		as, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(Format(as))
		if err != nil {
			t.Fatalf("Parse(Format(Parse(%q))): %v", s, err)
		}
		if len(as) == 0 && len(again) == 0 {
			return
		}
		if diff := cmp.Diff(as, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the allowances: -first, +second:\n%s", diff)
		}
	})
}

// FuzzParseTrace: the trace annotation round-trips and never panics.
func FuzzParseTrace(f *testing.F) {
	f.Add(`[{"apiVersion":"v1","kind":"K","name":"n","generation":1,"labels":{"a":"b"}}]`)
	f.Add(`[{"kind":"K","name":"n","generation":1,"timestamp":"2026-01-24T10:30:00Z"}]`)
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTrace(s)
		if err != nil {
			return
		}
		again, err := ParseTrace(FormatTrace(tr))
		if err != nil {
			t.Fatalf("ParseTrace(FormatTrace(ParseTrace(%q))): %v", s, err)
		}
		if len(tr) == 0 && len(again) == 0 {
			return
		}
		if diff := cmp.Diff(tr, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the trace: -first, +second:\n%s", diff)
		}
	})
}

// FuzzParseFreeze: the freeze annotation is set by users by hand.
func FuzzParseFreeze(f *testing.F) {
	f.Add(`{"user":"alice","message":"incident","at":"2026-01-24T10:30:00Z"}`)
	f.Fuzz(func(t *testing.T, s string) {
		fz, err := ParseFreeze(s)
		if err == nil && fz.User == "" {
			t.Fatalf("ParseFreeze(%q) accepted a freeze without a user", s)
		}
	})
}

// FuzzFreezeSetBy: whatever a user writes as kausality.io/freeze, the
// freeze admission stores parses and names that user.
func FuzzFreezeSetBy(f *testing.F) {
	f.Add(`{"user":"alice","message":"incident","at":"2026-01-24T10:30:00Z"}`)
	f.Add("incident 42")
	f.Add(`{"message":"\u2028"}`)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFreeze(FormatFreeze(FreezeSetBy(s, "bob", now)))
		if err != nil || got.User != "bob" || got.At != "2026-11-22T12:00:00Z" {
			t.Fatalf("FreezeSetBy(%q) stored %+v (%v), want bob's freeze at now", s, got, err)
		}
	})
}

// FuzzFormatIsMarshal: Format and FormatTrace write exactly what
// encoding/json's Marshal writes, whatever the strings hold (escapes, HTML
// characters, invalid UTF-8, line separators), and whichever of the
// optional fields are set, nil or empty.
func FuzzFormatIsMarshal(f *testing.F) {
	f.Add(seedAllowance)
	f.Add(`[{"relation":"External","target":{"external":{"kind":"RDS<>&\u2028","b":"\u0000\t"}},"verbs":[],"mutations":[{"jsonPath":"spec.a[*]","verbs":null},{"jsonPath":"","verbs":[]}],"generation":-3,"consumed":true}]`)
	f.Add(`[{"relation":"ControllerChild","target":{"apiGroup":"a","apiVersion":"v","resource":"r"},"generation":9223372036854775807,"initiator":"\"bob\"\\","trace":[{"apiVersion":"v1","kind":"K","name":"n\xff","generation":1,"field":"f","user":"u","timestamp":"t","attestations":{"z":"1","a":"2"},"labels":{"x":"y"}}]}]`)
	f.Add(`[{"trace":[],"target":{}}, {}]`)
	f.Add(`[{"relation":"External","target":{"external":{"kind":"Bucket"}},"generation":3,"pending":{"spec.a":"-"},"values":{"spec.b":"\u003c","spec.a":"h"},"held":true}]`)
	f.Fuzz(func(t *testing.T, s string) {
		var as []Allowance
		if err := json.Unmarshal([]byte(s), &as); err != nil {
			return
		}
		want, err := json.Marshal(as)
		if err != nil {
			t.Fatal(err)
		}
		if as == nil {
			want = []byte("[]")
		}
		if got := Format(as); got != string(want) {
			t.Fatalf("Format() = %s, json.Marshal = %s", got, want)
		}
		for _, a := range as {
			want, err := json.Marshal(a.Trace)
			if err != nil {
				t.Fatal(err)
			}
			if a.Trace == nil {
				want = []byte("[]")
			}
			if got := FormatTrace(a.Trace); got != string(want) {
				t.Fatalf("FormatTrace() = %s, json.Marshal = %s", got, want)
			}
			if len(a.Trace) > 0 {
				if got := FormatTraceThen(a.Trace.Parent(), a.Trace.Last()); got != string(want) {
					t.Fatalf("FormatTraceThen() = %s, json.Marshal = %s", got, want)
				}
			}
		}
	})
}

// FuzzParseComposed: a composite's KausalityComposed condition is status
// text. Parsing never panics, and whatever parses formats to a message
// that parses to the same record.
func FuzzParseComposed(f *testing.F) {
	f.Add(Composed{Generation: 7, Untouched: []string{"data", "logs"}}.String())
	f.Add(Composed{}.String())
	f.Add(`composed from generation 3; left as stored: ["b","a","a"]`)
	f.Add(`composed from generation -1; left as stored: []`)
	f.Add(`composed from generation 2; left as stored: null`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseComposed(s)
		if err != nil {
			return
		}
		again, err := ParseComposed(c.String())
		if err != nil {
			t.Fatalf("ParseComposed(String(ParseComposed(%q))): %v", s, err)
		}
		if diff := cmp.Diff(c, again, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ParseComposed(%q) does not survive String: -first, +again:\n%s", s, diff)
		}
	})
}
