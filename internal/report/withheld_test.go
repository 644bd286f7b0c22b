package report

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithheldRoundTrip(t *testing.T) {
	cases := map[string]struct {
		reason string
		lines  []Withheld
	}{
		"Mutation": {
			reason: "A field mutation names its verb and path.",
			lines:  []Withheld{{Resource: "db", Kind: "Instance", Name: "shop-db", Verb: "Mutate", Path: "spec.forProvider.instanceType", Reason: "no unconsumed allowance on XDatabase/shop grants Update of instances; policies: db, platform"}},
		},
		"ObjectVerbAndLogMode": {
			reason: "An object verb has no path; Log mode's lines carry its prefix; a reason with '; ' stays whole.",
			lines: []Withheld{
				{Resource: "logs", Kind: "Bucket", Name: "shop-logs", Verb: "Create", Reason: "a; b"},
				{Resource: "data", Kind: "Bucket", Name: "shop-data", Verb: "Delete", Reason: "c", LogOnly: true},
				{Resource: "data", Kind: "Bucket", Name: "shop-data", Verb: "Mutate", Path: "spec.forProvider.size", Reason: "d", LogOnly: true, Audit: true},
			},
		},
		"OpenGate": {
			reason: "The gate's verb has a space; a quoted key may hold ': '.",
			lines: []Withheld{
				{Resource: "db", Kind: "Instance", Name: "shop-db", Verb: VerbOpenGate, Path: "spec.forProvider.tags[a: b]", Reason: "changed since generation 3 was let through to the cloud and no open allowance covers it; it would ride along with the allowed change"},
				{Resource: "db", Kind: "Instance", Name: "shop-db", Verb: VerbOpenGate, Reason: "XDatabase/shop is frozen by alice"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg := make([]string, 0, len(tc.lines))
			for _, w := range tc.lines {
				msg = append(msg, w.String())
			}
			got := ParseWithheld(strings.Join(msg, "; "))
			if diff := cmp.Diff(tc.lines, got); diff != "" {
				t.Errorf("%s\nParseWithheld(String...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseWithheldSkips(t *testing.T) {
	for _, msg := range []string{"", "something else", "resource db (Instance): withheld Create: x", "resource db (Instance a): withheld : x", "resource db (Instance a): withheld Mutate spec.x"} {
		if got := ParseWithheld(msg); len(got) != 0 {
			t.Errorf("ParseWithheld(%q) = %+v, want nothing: it is no line", msg, got)
		}
	}
}

// FuzzParseWithheld checks that no message makes the parser panic, and
// that a line written from fields without the separators it relies on
// reads back as written.
func FuzzParseWithheld(f *testing.F) {
	f.Add("resource db (Instance shop-db): withheld Mutate spec.forProvider.instanceType: no allowance; policies: a", "db", "Instance", "shop-db", "Mutate", "spec.x", "why", false)
	f.Add("(Log mode, let through) resource db (Instance shop-db): withheld open gate: frozen; resource b (K n): withheld Create: r", "b", "K", "n", "Create", "", "r; s", true)
	f.Add("resource  (): withheld : ", "x", "Bucket", "b", "open gate", "spec.tags[a: b]", "", false)
	f.Fuzz(func(t *testing.T, msg, res, kind, name, verb, path, reason string, logOnly bool) {
		_ = ParseWithheld(msg)
		w := Withheld{Resource: res, Kind: kind, Name: name, Verb: verb, Path: path, Reason: reason, LogOnly: logOnly}
		if !plain(res, kind, name) || !plainVerb(verb) || !plainPath(path) || strings.Contains(reason, "; resource ") || strings.Contains(reason, "; (Log mode") || strings.Contains(reason, "; (Audit mode") {
			_ = ParseWithheld(w.String())
			return
		}
		got := ParseWithheld(w.String())
		if len(got) != 1 || got[0] != w {
			t.Errorf("ParseWithheld(%q) = %+v, want [%+v]", w.String(), got, w)
		}
	})
}

// plain are names as Kubernetes and compositions spell them: no spaces,
// parentheses or separators.
func plain(ss ...string) bool {
	for _, s := range ss {
		if s == "" || strings.ContainsAny(s, " ():;[]") {
			return false
		}
	}
	return true
}

func plainVerb(v string) bool {
	return v == VerbOpenGate || (plain(v) && !strings.HasPrefix(v, VerbOpenGate))
}

func plainPath(p string) bool { return p == "" || (plain(p) && p != "") }
