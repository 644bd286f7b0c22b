package mutation

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParsePattern: patterns come from users' policies. Parsing never
// panics, whatever parses prints to a string that parses to the same
// pattern, and a pattern covers its own string.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"*", "spec.forProvider.tags[*]", "metadata.annotations[kausality.io/x]", "spec.l[3].x", "spec['a.b']", "[*]", "a.*", "spec[", "spec..a", "spec['']", "[0][1]", "a.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			return
		}
		s2 := p.String()
		p2, err := ParsePattern(s2)
		if err != nil {
			t.Fatalf("ParsePattern(%q).String() = %q does not parse: %v", s, s2, err)
		}
		if diff := cmp.Diff(p, p2, cmp.AllowUnexported(Pattern{})); diff != "" {
			t.Fatalf("ParsePattern(%q) and ParsePattern(%q) differ: -first, +second:\n%s", s, s2, diff)
		}
		if got := p2.String(); got != s2 {
			t.Fatalf("String() is not stable: %q then %q", s2, got)
		}
		if !p.Covers(s2) {
			t.Fatalf("pattern %q does not cover its own string", s2)
		}
	})
}

// FuzzParseApplied: the applied annotation is on user-editable objects.
// Parsing never panics, and whatever parses prints to a value that parses to
// the same record.
func FuzzParseApplied(f *testing.F) {
	for _, s := range []string{"", "{}", `{"spec.a":"0123456789ab","spec.m[k.x]":"abcdefabcdef","spec.l[0]":"000000000000"}`, `{"":"0123456789ab"}`, `{"spec['a']":"0123456789ab"}`, `{"a":"0123456789ab","a":"0123456789ab"}`, `{"a<b":"0123456789ab"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseApplied(s)
		if err != nil {
			return
		}
		s2 := a.String()
		b, err := ParseApplied(s2)
		if err != nil {
			t.Fatalf("ParseApplied(%q).String() = %q does not parse: %v", s, s2, err)
		}
		if diff := cmp.Diff(a, b, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the record: -first, +second:\n%s", diff)
		}
		if got := b.String(); got != s2 {
			t.Fatalf("String() is not stable: %q then %q", s2, got)
		}
	})
}

// FuzzDiffRevert: Diff never panics on any pair of JSON objects, reports only
// canonical paths in order, and Revert is its inverse: reverting everything
// Diff reports leaves nothing to report, reverting nothing changes nothing,
// and observed is never touched.
func FuzzDiffRevert(f *testing.F) {
	f.Add([]byte(`{"spec":{"a":1,"m":{"k.x":1,"old":2},"l":[1,2,3],"r":[{"p":1,"q":2}]}}`), []byte(`{"spec":{"a":2,"m":{"k.x":2,"new":3},"l":[1],"r":[{"p":2},{"p":3}],"n":[]}}`), false, false)
	f.Add([]byte(`{"a":{"b":[{"c":1}]},"x":"y"}`), []byte(`{"a":{"b":[{"c":1.0},{"d":null}]}}`), true, true)
	f.Add([]byte(`{"m":{"[":1,"b":1},"":{"'":2}}`), []byte(`{"m":{"[":2,"b":2},"l":[{"]":1}]}`), true, false)
	f.Add([]byte(`{"skip":1,"k":[[1,2],[3]]}`), []byte(`{"skip":2,"k":[[1],[3,4,5]],"*":{"0":1}}`), false, true)
	f.Fuzz(func(t *testing.T, ob, db []byte, owned, useNumber bool) {
		observed, ok := decode(ob, false)
		if !ok {
			return
		}
		desired, ok := decode(db, useNumber)
		if !ok {
			return
		}
		opts := []DiffOption{WithSkip(func(p string) bool { return p == "skip" })}
		if owned {
			opts = append(opts, WithOwned(Record("", observed, nil).Owns))
		}
		observedBefore := deepCopy(observed)
		desiredBefore := deepCopy(desired)

		ms := Diff("", observed, desired, opts...)
		var prev fieldpath.Segments
		for i, m := range ms {
			segs, err := fieldpath.Parse(m.Path)
			if err != nil {
				t.Fatalf("Diff reported unparsable path %q: %v", m.Path, err)
			}
			if c := segs.String(); c != m.Path {
				t.Fatalf("Diff reported non-canonical path %q, fieldpath formats %q", m.Path, c)
			}
			if i > 0 && compareSegments(prev, segs) >= 0 {
				t.Fatalf("Diff paths out of order: %q then %q", ms[i-1].Path, m.Path)
			}
			prev = segs
		}

		none := deepCopy(desired).(map[string]any)
		if err := Revert(none, observed, nil); err != nil {
			t.Fatalf("Revert(nothing): %v", err)
		}
		if diff := cmp.Diff(desiredBefore, any(none)); diff != "" {
			t.Fatalf("Revert(nothing) changed desired: -want, +got:\n%s", diff)
		}

		if err := Revert(desired, observed, ms); err != nil {
			t.Fatalf("Revert(%v): %v", ms, err)
		}
		if again := Diff("", observed, desired, opts...); len(again) != 0 {
			t.Fatalf("after Revert(%v) Diff still reports %v", ms, again)
		}
		if diff := cmp.Diff(observedBefore, any(observed)); diff != "" {
			t.Fatalf("Revert changed observed: -want, +got:\n%s", diff)
		}
		if a := Record("", desired, nil); len(a) > 0 && !a.Unchanged("", desired, true) {
			t.Fatalf("a value is not unchanged against its own record")
		}
	})
}

func decode(b []byte, useNumber bool) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	if useNumber {
		d.UseNumber()
	}
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// FuzzCheckPath: the shortcut that takes a path as canonical without
// parsing it agrees with parsing and formatting it whenever it answers.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"spec.a", "spec.l[0].x", "spec.l[10][2]", "spec.l[01]", "spec.m[a.b]", "spec[*]", "spec.*", "a..b", "a.", ".a", "a[1]b", "0.a", "spec.l[4294967296]", "spec.'a'", "a[]", "a[x]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !plainCanonical(p) {
			return
		}
		segs, err := parsePath(p)
		if err != nil {
			t.Fatalf("plainCanonical(%q) but it does not parse: %v", p, err)
		}
		if c := formatSegments(segs); c != p {
			t.Fatalf("plainCanonical(%q) but its canonical form is %q", p, c)
		}
		if fs, err := fieldpath.Parse(p); err != nil || fs.String() != p {
			t.Fatalf("plainCanonical(%q) but fieldpath gives %v, %v", p, fs, err)
		}
	})
}

// FuzzParsePrevious: whatever a kausality.io/previous annotation holds,
// reading it never panics, and a record that reads writes back to a string
// that reads as the same record.
func FuzzParsePrevious(f *testing.F) {
	for _, s := range []string{"", "{}", `{"spec.forProvider.size":1}`, `{"spec.forProvider.tags[team]":null}`, `{"spec.a[0].b":{"c":[1,"x",true]}}`, `{"":1}`, `[1]`, `null`, `{"spec.a[":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrevious(s)
		if err != nil || p == nil {
			return
		}
		again, err := ParsePrevious(p.String())
		if err != nil {
			t.Fatalf("%q reads, but its own output %q does not: %v", s, p.String(), err)
		}
		if again.String() != p.String() {
			t.Fatalf("%q: written %q, read back as %q", s, p.String(), again.String())
		}
	})
}
