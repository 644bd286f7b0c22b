package mutation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// These tests check the fast paths of this package against the library code
// they stand in for: parsePath and formatSegments against fieldpath,
// parseAppliedPlain against parseAppliedJSON, appendString against
// encoding/json.

// pathSeeds are paths at the edges of fieldpath's grammar.
var pathSeeds = []string{
	"", ".", "..", "a", "a.", ".a", "a..b", "a.[0]", "a[", "a]", "a[]", "a[[0]]", "a[0", "a[0]]", "a[0]b", "a[0].b",
	"a[0][1]", "[0]", "[a.b]", "['a']", `["a"]`, "a['']", "a[*]", "*", "a.*", "[*]", "a[01]", "a[4294967295]", "a[4294967296]",
	"a[-1]", "a[+1]", "a.0", "'a'.b", "spec.forProvider.tags[kausality.io/x]", "a.'b'", "a[b]c.d", "a.]", "a.b[c[d]]",
	"metadata.annotations['crossplane.io/external-name']", "data[.config.yml]", "a\xff.b", "ä.ö[ü]", "a[']']",
}

// TestParsePath: parsePath agrees with fieldpath.Parse, segments and errors,
// and formatSegments with fieldpath.Segments.String.
func TestParsePath(t *testing.T) {
	for _, p := range pathSeeds {
		checkParsePath(t, p)
	}
}

// FuzzParsePath: as TestParsePath, for any string.
func FuzzParsePath(f *testing.F) {
	for _, p := range pathSeeds {
		f.Add(p)
	}
	f.Fuzz(checkParsePath)
}

func checkParsePath(t *testing.T, p string) {
	t.Helper()
	want, wantErr := fieldpath.Parse(p)
	got, gotErr := parsePath(p)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("parsePath(%q) error = %v, fieldpath.Parse error = %v", p, gotErr, wantErr)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("parsePath(%q): -fieldpath.Parse, +parsePath:\n%s", p, diff)
	}
	if _, ok := scanPath(p); ok != (wantErr == nil) {
		t.Fatalf("scanPath(%q) ok = %t, fieldpath.Parse error = %v", p, ok, wantErr)
	}
	if w, g := want.String(), formatSegments(got); w != g {
		t.Fatalf("formatSegments(parsePath(%q)) = %q, fieldpath formats %q", p, g, w)
	}
}

// appliedSeeds are applied records at the edges of the plain form.
var appliedSeeds = []string{
	"", "{}", " { } ", "{}x", "[]", "{", `{"a":"0123456789ab"}`, ` {"a" : "0123456789ab" ,"b":"0123456789ab"}` + "\n",
	`{"a":"0123456789ab",}`, `{"a":"0123456789ab","a":"0123456789ab"}`, `{"a":"0123456789AB"}`, `{"a":"0123456789abc"}`,
	`{"spec['a']":"0123456789ab"}`, `{"spec.a[0]":"0123456789ab"}`, `{"spec.m[k.x]":"abcdefabcdef"}`, `{"spec.m[*]":"abcdefabcdef"}`,
	`{"a\u0062":"0123456789ab"}`, `{"a":"0123456789ab"} {}`, `{"a":1}`, `{"a":null}`, `{"":"0123456789ab"}`, `{"a<b":"0123456789ab"}`,
	"{\"a\":\"0123456789ab\"}\t", "{\"\xff\":\"0123456789ab\"}", `{"a":"0123456789ab"`, `{"a" "0123456789ab"}`, `{,}`,
}

// TestParseAppliedPlain: parseAppliedPlain takes only what parseAppliedJSON
// accepts, and yields the same record.
func TestParseAppliedPlain(t *testing.T) {
	for _, s := range appliedSeeds {
		checkParseAppliedPlain(t, s)
	}
	// The form String writes takes the plain path.
	for _, s := range []string{"{}", " { } ", `{"spec.a[0]":"0123456789ab","spec.m[k.x]":"abcdefabcdef"}`, Applied{"spec.b": "000000000000"}.String()} {
		if _, ok := parseAppliedPlain(s); !ok {
			t.Errorf("parseAppliedPlain(%q) does not take it", s)
		}
	}
}

// FuzzParseAppliedPlain: as TestParseAppliedPlain, for any string.
func FuzzParseAppliedPlain(f *testing.F) {
	for _, s := range appliedSeeds {
		f.Add(s)
	}
	f.Fuzz(checkParseAppliedPlain)
}

func checkParseAppliedPlain(t *testing.T, s string) {
	t.Helper()
	got, ok := parseAppliedPlain(s)
	if !ok {
		return
	}
	want, err := parseAppliedJSON(s)
	if err != nil {
		t.Fatalf("parseAppliedPlain(%q) takes what parseAppliedJSON rejects: %v", s, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("parseAppliedPlain(%q): -parseAppliedJSON, +parseAppliedPlain:\n%s", s, diff)
	}
}

// TestWriteString: appendString and Applied.String write what
// encoding/json does.
func TestWriteString(t *testing.T) {
	for _, s := range []string{"", "a", "spec.a[0]", `"`, `\`, "<", ">", "&", "\x00", "\x1f", "\x7f", "\xff", "ä", "\u2028", "a b~"} {
		checkWriteString(t, s, s)
	}
}

// FuzzWriteString: as TestWriteString, for any strings.
func FuzzWriteString(f *testing.F) {
	f.Add("spec.a", "0123456789ab")
	f.Add("<&>", "\xff\u2028")
	f.Fuzz(checkWriteString)
}

func checkWriteString(t *testing.T, k, v string) {
	t.Helper()
	j, _ := json.Marshal(k)
	if got, want := appendString([]byte("x"), k), append([]byte("x"), j...); !bytes.Equal(got, want) {
		t.Fatalf("appendString(x, %q) = %s, encoding/json writes x%s", k, got, j)
	}
	a := Applied{k: v, "spec.z": k, "spec.a": v}
	if want, _ := json.Marshal(map[string]string(a)); a.String() != string(want) {
		t.Fatalf("%#v.String() = %s, encoding/json writes %s", a, a.String(), want)
	}
}

// TestAppliedOwner: Owner answers what Owns does, for every pair of seed
// paths, on a record large enough to be indexed.
func TestAppliedOwner(t *testing.T) {
	for _, leaf := range pathSeeds {
		for _, path := range pathSeeds {
			checkAppliedOwner(t, leaf, path)
		}
	}
}

// FuzzAppliedOwner: as TestAppliedOwner, for any leaf and path.
func FuzzAppliedOwner(f *testing.F) {
	for _, p := range pathSeeds {
		f.Add(p, "a")
		f.Add("spec.forProvider.tags[kausality.io/x].y", p)
	}
	f.Fuzz(checkAppliedOwner)
}

func checkAppliedOwner(t *testing.T, leaf, path string) {
	t.Helper()
	a := Applied{leaf: "000000000000"}
	for i := range smallRecord {
		a[fmt.Sprintf("zz.filler[%d]", i)] = "000000000000"
	}
	if got, want := a.Owner()(path), a.Owns(path); got != want {
		t.Fatalf("with leaf %q, Owner()(%q) = %t, Owns = %t", leaf, path, got, want)
	}
}

// TestAppliedAdd: Add grows a record as recording the value on its own and
// copying the leaves the record lacks and keep accepts, the two steps it
// stands in for, whatever the two values are.
func TestAppliedAdd(t *testing.T) {
	checkAppliedAdd(t, []byte(`{"a":1,"m":{"k":1},"l":[1]}`), []byte(`{"a":2,"b":3,"m":{"k":2,"j":4,"k.x":5},"l":[1,2],"skip":1}`), "b")
	checkAppliedAdd(t, []byte(`{"m":{"k":{}}}`), []byte(`{"m":{"k":{"deep":1},"[":1},"n":{}}`), "m")
	checkAppliedAdd(t, []byte(`{}`), []byte(`{"a":[{"b":1}]}`), "")
}

// FuzzAppliedAdd: as TestAppliedAdd, for any two values and any kept path.
func FuzzAppliedAdd(f *testing.F) {
	f.Add([]byte(`{"a":1,"m":{"k":1}}`), []byte(`{"a":2,"b":3,"m":{"k":2,"j":4}}`), "m.j")
	f.Add([]byte(`{"l":[1,{"x":1}]}`), []byte(`{"l":[2,{"x":2,"y":3}],"*":{"0":1}}`), "l[1]")
	f.Fuzz(checkAppliedAdd)
}

func checkAppliedAdd(t *testing.T, firstJSON, nextJSON []byte, dropUnder string) {
	t.Helper()
	first, ok := decode(firstJSON, false)
	if !ok {
		return
	}
	next, ok := decode(nextJSON, false)
	if !ok {
		return
	}
	skip := func(p string) bool { return p == "spec.skip" }
	keep := func(p string) bool { return dropUnder == "" || !Under(p, "spec."+dropUnder) }
	got := Record("spec", first, skip)
	want := maps.Clone(got)
	got.Add("spec", next, skip, keep)
	for k, h := range Record("spec", next, func(p string) bool { _, set := want[p]; return set || skip(p) }) {
		if keep(k) {
			want[k] = h
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("Add(%s) onto the record of %s, keeping all but %q: -want, +got:\n%s", nextJSON, firstJSON, dropUnder, diff)
	}
}
