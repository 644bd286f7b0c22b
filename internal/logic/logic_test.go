package logic

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

const pt = "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform"

func TestChanges(t *testing.T) {
	was := Logic{Revision: "xdb-1", Functions: map[string]string{"function-patch-and-transform": pt + ":v0.10.7", "function-kausality": "k:v0.1.0"},
		Inputs: map[string]string{"EnvironmentConfig/team-a": "3"}}
	cases := map[string]struct {
		next Logic
		want []string
	}{
		"Same":        {next: was},
		"NewFunction": {next: Logic{Revision: "xdb-1", Functions: map[string]string{"function-patch-and-transform": pt + ":v0.10.8", "function-kausality": "k:v0.1.0"}}, want: []string{"function-patch-and-transform v0.10.7 → v0.10.8"}},
		"NewRevisionAndFunction": {next: Logic{Revision: "xdb-2", Functions: map[string]string{"function-patch-and-transform": pt + "@sha256:0f", "function-kausality": "k:v0.1.0"}},
			want: []string{"Composition revision xdb-1 → xdb-2", "function-patch-and-transform v0.10.7 → sha256:0f"}},
		"StepAddedIsNoChangeOfItsOwn": {next: Logic{Revision: "xdb-1", Functions: map[string]string{"function-patch-and-transform": pt + ":v0.10.7", "function-kausality": "k:v0.1.0", "function-go-templating": "g:v1"}}},
		"RevisionUnknown":             {next: Logic{Functions: was.Functions}},
		"InputChanged": {next: Logic{Revision: "xdb-1", Functions: was.Functions, Inputs: map[string]string{"EnvironmentConfig/team-a": "4"}},
			want: []string{"EnvironmentConfig team-a generation 3 → 4"}},
		"InputFirstRecorded": {next: Logic{Revision: "xdb-1", Functions: was.Functions, Inputs: map[string]string{"EnvironmentConfig/team-a": "3", "ConfigMap/ns/sizes": "1"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, c := range Changes(was, tc.next) {
				got = append(got, c.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Changes(): -want, +got:\n%s", diff)
			}
		})
	}
	if got := Changes(Logic{Revision: "xdb-1"}, was); len(got) != 0 {
		t.Errorf("a resource recorded before function versions: Changes() = %v, want none", got)
	}
}

func TestVersion(t *testing.T) {
	cases := map[string]string{
		pt + ":v0.10.7":           "v0.10.7",
		pt + "@sha256:0f":         "sha256:0f",
		"localhost:5000/fn:v1.2":  "v1.2",
		"localhost:5000/fn":       "localhost:5000/fn",
		"function-kausality":      "function-kausality",
		"registry/fn:v1@sha256:0": "sha256:0",
	}
	for pkg, want := range cases {
		if got := Version(pkg); got != want {
			t.Errorf("Version(%q) = %q, want %q", pkg, got, want)
		}
	}
	matches := []struct {
		pattern, pkg string
		want         bool
	}{
		{"v0.10.*", pt + ":v0.10.8", true},
		{"v0.10.*", pt + ":v0.11.0", false},
		{"v0.10.8", pt + ":v0.10.8", true},
		{"v0.10.[", pt + ":v0.10.8", false}, // malformed: nothing
		{"*", pt + ":v2.0.0", true},
	}
	for _, m := range matches {
		if got := VersionMatches(m.pattern, m.pkg); got != m.want {
			t.Errorf("VersionMatches(%q, %q) = %v, want %v", m.pattern, m.pkg, got, m.want)
		}
	}
}

func TestOf(t *testing.T) {
	l, err := Of(map[string]string{v1alpha1.AnnotationCompositionRevision: "xdb-2", v1alpha1.AnnotationFunctionVersions: `{"b":"y:v2","a":"x:v1"}`})
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatFunctions(l.Functions); got != `{"a":"x:v1","b":"y:v2"}` || l.Revision != "xdb-2" {
		t.Errorf("Of() = %+v, formatted %s", l, got)
	}
	for _, bad := range []string{`[]`, `{"a":1}`, `{"":"x"}`, `{"a":""}`, `{"a":"x"`} {
		l, err := Of(map[string]string{v1alpha1.AnnotationCompositionRevision: "xdb-2", v1alpha1.AnnotationFunctionVersions: bad})
		if err == nil {
			t.Errorf("Of(%s): want an error", bad)
		}
		if l.Revision != "xdb-2" {
			t.Errorf("Of(%s) lost the revision: %+v", bad, l)
		}
	}
}

// FuzzParseFunctions: the function-versions annotation is protected, but a
// parser of annotation text never panics, and what it accepts formats back
// to a record that parses to the same.
func FuzzParseFunctions(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"a":"x:v1"}`, `{"a":"x:v1","b":"y@sha256:0"}`, `{"a":1}`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseFunctions(s)
		if err != nil {
			return
		}
		back, err := ParseFunctions(FormatFunctions(m))
		if err != nil {
			t.Fatalf("ParseFunctions(FormatFunctions(%v)): %v", m, err)
		}
		if len(m) > 0 && !cmp.Equal(m, back) {
			t.Fatalf("round trip: %v became %v", m, back)
		}
		for _, pkg := range m {
			_ = VersionMatches("v*", pkg)
		}
	})
}

// FuzzParseInputs: whatever the input-versions annotation holds, the record
// either parses and round-trips, or is an error; never a panic.
func FuzzParseInputs(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"EnvironmentConfig/a":"3"}`, `{"ConfigMap/ns/b":"1","EnvironmentConfig/a":"3"}`, `{"a":3}`, `{"":"1"}`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseInputs(s)
		if err != nil {
			return
		}
		back, err := ParseInputs(FormatFunctions(m))
		if err != nil {
			t.Fatalf("ParseInputs(FormatFunctions(%v)): %v", m, err)
		}
		if len(m) > 0 && !cmp.Equal(m, back) {
			t.Fatalf("round trip: %v became %v", m, back)
		}
		for k, v := range m {
			_ = Changes(Logic{Inputs: map[string]string{k: "0"}}, Logic{Inputs: map[string]string{k: v}})
		}
	})
}
