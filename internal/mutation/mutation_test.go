package mutation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// obj decodes JSON for test fixtures, as the function sees objects.
func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad fixture %s: %v", s, err)
	}
	return m
}

func ins(p string) Mutation { return Mutation{Path: p, Verb: v1alpha1.MutationInsert} }
func del(p string) Mutation { return Mutation{Path: p, Verb: v1alpha1.MutationDelete} }
func mut(p string) Mutation { return Mutation{Path: p, Verb: v1alpha1.MutationMutate} }

func ownedPaths(ps ...string) func(string) bool {
	return func(p string) bool {
		for _, o := range ps {
			if Under(o, p) {
				return true
			}
		}
		return false
	}
}

func TestDiff(t *testing.T) {
	type args struct {
		prefix            string
		observed, desired any
		opts              []DiffOption
	}
	spec := func(s string) any { return obj(t, `{"x":`+s+`}`)["x"] }
	cases := map[string]struct {
		reason string
		args   args
		want   []Mutation
	}{
		"Equal": {
			reason: "Equal values are no mutation.",
			args:   args{prefix: "spec", observed: spec(`{"a":{"b":[1,{"c":"d"}]}}`), desired: spec(`{"a":{"b":[1,{"c":"d"}]}}`)},
		},
		"ScalarMutate": {
			reason: "A changed scalar is a Mutate at its full path.",
			args: args{prefix: "spec",
				observed: spec(`{"forProvider":{"instanceClass":"db.t3.small","region":"eu-west-1"}}`),
				desired:  spec(`{"forProvider":{"instanceClass":"db.t3.large","region":"eu-west-1"}}`)},
			want: []Mutation{mut("spec.forProvider.instanceClass")},
		},
		"NestedInsert": {
			reason: "A new subtree is one Insert, not one per leaf.",
			args: args{prefix: "spec",
				observed: spec(`{"forProvider":{"region":"eu-west-1"}}`),
				desired:  spec(`{"forProvider":{"region":"eu-west-1","tags":{"team":"a","cost":{"center":"1"}}}}`)},
			want: []Mutation{ins("spec.forProvider.tags")},
		},
		"AtomicListItemKey": {
			reason: "A key of an observed array item that desired lacks is a Delete: an applied atomic list replaces the item.",
			args: args{prefix: "spec",
				observed: spec(`{"containers":[{"name":"app","image":"nginx","imagePullPolicy":"IfNotPresent"}]}`),
				desired:  spec(`{"containers":[{"name":"app","image":"nginx"}]}`)},
			want: []Mutation{del("spec.containers[0].imagePullPolicy")},
		},
		"MergedListItemKey": {
			reason: "Under merged lists (Kubernetes' own kinds) such a key is a default the API server filled in, and stays.",
			args: args{prefix: "spec",
				observed: spec(`{"containers":[{"name":"app","image":"nginx","imagePullPolicy":"IfNotPresent"}]}`),
				desired:  spec(`{"containers":[{"name":"app","image":"nginx:2"}]}`),
				opts:     []DiffOption{WithMergedLists()}},
			want: []Mutation{mut("spec.containers[0].image")},
		},
		"MergedListOwnedKey": {
			reason: "Under merged lists a key the pipeline applied before and no longer sets is still a Delete.",
			args: args{prefix: "spec",
				observed: spec(`{"containers":[{"name":"app","image":"nginx","imagePullPolicy":"Always"}]}`),
				desired:  spec(`{"containers":[{"name":"app","image":"nginx"}]}`),
				opts:     []DiffOption{WithMergedLists(), WithOwned(func(p string) bool { return p == "spec.containers[0].imagePullPolicy" })}},
			want: []Mutation{del("spec.containers[0].imagePullPolicy")},
		},
		"PrefixInserted": {
			reason: "A nil observed is an absent field: desired inserts the whole prefix.",
			args:   args{prefix: "spec", desired: spec(`{"a":1}`)},
			want:   []Mutation{ins("spec")},
		},
		"BothAbsent": {
			reason: "Nothing on either side is no mutation.",
			args:   args{prefix: "spec"},
		},
		"PrefixNotSet": {
			reason: "Server-side apply leaves a field desired does not set.",
			args:   args{prefix: "spec", observed: spec(`{"a":1}`)},
		},
		"PrefixOwnedNotSet": {
			reason: "A field applied before and no longer set is removed.",
			args:   args{prefix: "spec", observed: spec(`{"a":1}`), opts: []DiffOption{WithOwned(ownedPaths("spec.a"))}},
			want:   []Mutation{del("spec")},
		},
		"ArrayGrow": {
			reason: "Extra desired items are Inserts at their concrete indices.",
			args:   args{prefix: "spec", observed: spec(`{"tags":["a"]}`), desired: spec(`{"tags":["a","b",{"c":1}]}`)},
			want:   []Mutation{ins("spec.tags[1]"), ins("spec.tags[2]")},
		},
		"ArrayShrink": {
			reason: "Extra observed items are Deletes: lists are atomic, ownership does not matter.",
			args:   args{prefix: "spec", observed: spec(`{"tags":["a","b","c"]}`), desired: spec(`{"tags":["a"]}`)},
			want:   []Mutation{del("spec.tags[1]"), del("spec.tags[2]")},
		},
		"ArrayItemsRecursed": {
			reason: "Items present on both sides are compared field by field.",
			args: args{prefix: "spec",
				observed: spec(`{"rules":[{"port":80,"cidr":"0.0.0.0/0"},{"port":443}]}`),
				desired:  spec(`{"rules":[{"port":8080,"cidr":"0.0.0.0/0"},{"port":443,"proto":"tcp"}]}`)},
			want: []Mutation{mut("spec.rules[0].port"), ins("spec.rules[1].proto")},
		},
		"ArrayIndexOrder": {
			reason: "Indices sort numerically, so [2] comes before [10].",
			args: args{prefix: "spec",
				observed: spec(`{"l":[0,1,2,3,4,5,6,7,8,9,10,11]}`),
				desired:  spec(`{"l":[0,1,20,3,4,5,6,7,8,9,100,11]}`)},
			want: []Mutation{mut("spec.l[2]"), mut("spec.l[10]")},
		},
		"KeysSorted": {
			reason: "Map keys come in byte order, parents before children.",
			args: args{prefix: "spec",
				observed: spec(`{"b":1,"a":{"z":1,"y":1}}`),
				desired:  spec(`{"b":2,"a":{"z":2,"y":2},"c":3}`)},
			want: []Mutation{mut("spec.a.y"), mut("spec.a.z"), mut("spec.b"), ins("spec.c")},
		},
		"KeysWithDotsAndSlashes": {
			reason: "Keys with periods go in brackets; other keys, slashes included, after a period, as fieldpath formats them.",
			args: args{prefix: "metadata",
				observed: spec(`{"annotations":{"kausality.io/x":"1","team/owner":"a"}}`),
				desired:  spec(`{"annotations":{"kausality.io/x":"2","team/owner":"b","example.com/new":"c"}}`)},
			want: []Mutation{ins("metadata.annotations[example.com/new]"), mut("metadata.annotations[kausality.io/x]"), mut("metadata.annotations.team/owner")},
		},
		"WildcardAndNumericKeys": {
			reason: "A literal * key is bracketed and a numeric map key stays a field.",
			args:   args{prefix: "spec", observed: spec(`{"m":{"*":1,"0":1}}`), desired: spec(`{"m":{"*":2,"0":2}}`)},
			want:   []Mutation{mut("spec.m[*]"), mut("spec.m.0")},
		},
		"NumbersByValue": {
			reason: "Numbers compare by value whatever their Go type.",
			args: args{prefix: "spec",
				observed: map[string]any{"a": int64(5), "b": float64(5), "c": json.Number("5"), "d": int(7), "e": json.Number("1e2"), "f": uint8(3), "g": float32(0.5)},
				desired:  map[string]any{"a": float64(5), "b": json.Number("5.0"), "c": int64(5), "d": float64(7), "e": int32(100), "f": json.Number("3"), "g": 0.5}},
		},
		"NumbersDiffer": {
			reason: "Different numeric values, or a number and a string, are Mutates.",
			args: args{prefix: "spec",
				observed: map[string]any{"a": int64(5), "b": "5", "c": int64(1 << 53), "d": uint64(1 << 63)},
				desired:  map[string]any{"a": 5.5, "b": int64(5), "c": float64(1<<53) + 2, "d": int64(-1)}},
			want: []Mutation{mut("spec.a"), mut("spec.b"), mut("spec.c"), mut("spec.d")},
		},
		"ObservedKeyNotOwned": {
			reason: "A key only observed has (defaulted, late-initialized) is left alone by server-side apply.",
			args:   args{prefix: "spec", observed: spec(`{"forProvider":{"region":"x","engineVersion":"15.4"}}`), desired: spec(`{"forProvider":{"region":"x"}}`)},
		},
		"ObservedKeyOwned": {
			reason: "A key applied last time and no longer desired is removed by server-side apply.",
			args: args{prefix: "spec",
				observed: spec(`{"forProvider":{"region":"x","old":"y","late":"z"}}`),
				desired:  spec(`{"forProvider":{"region":"x"}}`),
				opts:     []DiffOption{WithOwned(ownedPaths("spec.forProvider.old", "spec.forProvider.region"))}},
			want: []Mutation{del("spec.forProvider.old")},
		},
		"ObservedSubtreeOwned": {
			reason: "A subtree with an owned leaf is deleted as a whole.",
			args: args{prefix: "spec",
				observed: spec(`{"tags":{"a":"1","b":"2"},"region":"x"}`),
				desired:  spec(`{"region":"x"}`),
				opts:     []DiffOption{WithOwned(Applied{"spec.tags.a": "000000000000"}.Owns)}},
			want: []Mutation{del("spec.tags")},
		},
		"ObservedKeyInArrayItem": {
			reason: "An applied array replaces the observed one, so a key only an observed item has is deleted.",
			args:   args{prefix: "spec", observed: spec(`{"rules":[{"port":80,"proto":"tcp"}]}`), desired: spec(`{"rules":[{"port":80}]}`)},
			want:   []Mutation{del("spec.rules[0].proto")},
		},
		"Skip": {
			reason: "Skipped paths are neither reported nor recursed into.",
			args: args{prefix: "spec",
				observed: spec(`{"managementPolicies":["Observe"],"a":{"b":1,"c":1}}`),
				desired:  spec(`{"managementPolicies":["*"],"a":{"b":2,"c":2}}`),
				opts:     []DiffOption{WithSkip(func(p string) bool { return p == "spec.managementPolicies" || p == "spec.a.b" })}},
			want: []Mutation{mut("spec.a.c")},
		},
		"SkipPrefix": {
			reason: "Skipping the prefix skips everything.",
			args: args{prefix: "spec", observed: spec(`{"a":1}`), desired: spec(`{"a":2}`),
				opts: []DiffOption{WithSkip(func(p string) bool { return p == "spec" })}},
		},
		"SkipArrayItem": {
			reason: "Skip sees concrete item paths.",
			args: args{prefix: "spec", observed: spec(`{"l":[1,2]}`), desired: spec(`{"l":[3,4,5]}`),
				opts: []DiffOption{WithSkip(func(p string) bool { return p == "spec.l[1]" || p == "spec.l[2]" })}},
			want: []Mutation{mut("spec.l[0]")},
		},
		"KindChange": {
			reason: "A value that changes kind is a Mutate of the whole field.",
			args:   args{prefix: "spec", observed: spec(`{"a":{"b":1},"c":[1],"d":"x"}`), desired: spec(`{"a":"b","c":{"0":1},"d":[]}`)},
			want:   []Mutation{mut("spec.a"), mut("spec.c"), mut("spec.d")},
		},
		"Null": {
			reason: "A null desired value is a value: inserted when absent, a Mutate when different.",
			args:   args{prefix: "spec", observed: spec(`{"b":"x","c":null}`), desired: spec(`{"a":null,"b":null,"c":null}`)},
			want:   []Mutation{ins("spec.a"), mut("spec.b")},
		},
		"EmptyContainers": {
			reason: "Empty maps and arrays are values like any other.",
			args:   args{prefix: "spec", observed: spec(`{"a":{},"b":[]}`), desired: spec(`{"a":{"x":1},"b":[1],"c":{}}`)},
			want:   []Mutation{ins("spec.a.x"), ins("spec.b[0]"), ins("spec.c")},
		},
		"UnnameableKeyChanged": {
			reason: "A key fieldpath cannot name makes its map change as a whole.",
			args:   args{prefix: "spec", observed: spec(`{"tags":{"a]":"1","b":"1"}}`), desired: spec(`{"tags":{"a]":"2","b":"2"}}`)},
			want:   []Mutation{mut("spec.tags")},
		},
		"UnnameableKeyEqual": {
			reason: "An unnameable key that did not change leaves the map's other keys compared one by one.",
			args:   args{prefix: "spec", observed: spec(`{"tags":{"":"1","b":"1"}}`), desired: spec(`{"tags":{"":"1","b":"2"}}`)},
			want:   []Mutation{mut("spec.tags.b")},
		},
		"UnnameableObservedOnly": {
			reason: "An unnameable key only observed has is left alone unless its map was applied as one leaf.",
			args:   args{prefix: "spec", observed: spec(`{"tags":{"'q'":"1","b":"1"}}`), desired: spec(`{"tags":{"b":"1"}}`), opts: []DiffOption{WithOwned(ownedPaths("spec.tags.b"))}},
		},
		"UnnameableObservedOnlyOwned": {
			reason: "A map recorded as one leaf owns its unnameable keys.",
			args:   args{prefix: "spec", observed: spec(`{"tags":{"'q'":"1","b":"1"}}`), desired: spec(`{"tags":{"b":"1"}}`), opts: []DiffOption{WithOwned(ownedPaths("spec.tags"))}},
			want:   []Mutation{mut("spec.tags")},
		},
		"RootPrefix": {
			reason: "With an empty prefix paths start at the object's top-level fields.",
			args:   args{prefix: "", observed: obj(t, `{"spec":{"a":1}}`), desired: obj(t, `{"spec":{"a":2},"metadata":{"name":"x"}}`)},
			want:   []Mutation{ins("metadata"), mut("spec.a")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Diff(tc.args.prefix, tc.args.observed, tc.args.desired, tc.args.opts...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDiff(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMutationString(t *testing.T) {
	cases := map[string]struct {
		reason string
		m      Mutation
		want   string
	}{
		"Field": {reason: "Verb, then path.", m: mut("spec.forProvider.instanceClass"), want: "Mutate spec.forProvider.instanceClass"},
		"Root":  {reason: "The whole object is just the verb.", m: ins(""), want: "Insert"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.m.String()); diff != "" {
				t.Errorf("%s\nString(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestUnder(t *testing.T) {
	cases := map[string]struct {
		reason       string
		path, prefix string
		want         bool
	}{
		"Equal":          {reason: "A path is under itself.", path: "spec.a", prefix: "spec.a", want: true},
		"Field":          {reason: "A child field is under its parent.", path: "spec.a.b", prefix: "spec.a", want: true},
		"Index":          {reason: "An item is under its array.", path: "spec.a[3]", prefix: "spec.a", want: true},
		"BracketedKey":   {reason: "A bracketed key is under its map.", path: "spec.m[a.b].c", prefix: "spec.m", want: true},
		"UnderBracket":   {reason: "Children of a bracketed key are under it.", path: "spec.m[a.b].c", prefix: "spec.m[a.b]", want: true},
		"NotBoundary":    {reason: "spec.forProviderX is not under spec.forProvider.", path: "spec.forProviderX", prefix: "spec.forProvider", want: false},
		"InsideBrackets": {reason: "A prefix ending inside brackets is not a segment boundary.", path: "spec.m[a.b]", prefix: "spec.m[a", want: false},
		"Shorter":        {reason: "A parent is not under its child.", path: "spec", prefix: "spec.a", want: false},
		"Root":           {reason: "Everything is under the root.", path: "spec.a", prefix: "", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Under(tc.path, tc.prefix); got != tc.want {
				t.Errorf("%s\nUnder(%q, %q): want %t, got %t", tc.reason, tc.path, tc.prefix, tc.want, got)
			}
		})
	}
}

// TestPathsAreFieldpaths: the paths Diff builds by appending are exactly what
// fieldpath.Segments.String formats, and parse back to the same keys.
func TestPathsAreFieldpaths(t *testing.T) {
	keys := []string{"a", "forProvider", "kausality.io/x", "team/owner", "*", "0", "12", "a b", "ünï", ".", "a.", "x*y", "with'quote", "a-b_c:d=e+f@g"}
	for _, prefix := range []string{"", "spec", "spec.l[0]", "m[a.b]"} {
		for _, k := range keys {
			if !nameable(k) {
				t.Fatalf("nameable(%q) = false", k)
			}
			p := pathBuf(prefix)
			parent := p.field(k)
			got := p.String()
			if p.cut(parent); p.String() != prefix {
				t.Errorf("cutting %q back gives %q, want %q", got, p.String(), prefix)
			}
			segs, err := fieldpath.Parse(prefix)
			if err != nil {
				t.Fatal(err)
			}
			segs = append(segs, fieldpath.Segment{Type: fieldpath.SegmentField, Field: k})
			if want := segs.String(); got != want {
				t.Errorf("field(%q) after %q = %q, fieldpath formats %q", k, prefix, got, want)
			}
			back, err := fieldpath.Parse(got)
			if err != nil {
				t.Errorf("fieldpath.Parse(%q): %v", got, err)
				continue
			}
			if diff := cmp.Diff(segs, back); diff != "" {
				t.Errorf("fieldpath.Parse(%q): -want, +got:\n%s", got, diff)
			}
		}
		p := pathBuf(prefix)
		p.index(7)
		base, _ := fieldpath.Parse(prefix)
		if want := append(base, fieldpath.Segment{Type: fieldpath.SegmentIndex, Index: 7}).String(); p.String() != want {
			t.Errorf("index(7) after %q = %q, fieldpath formats %q", prefix, p.String(), want)
		}
	}
	for _, k := range []string{"", "a]", "[a", "a[0]", "'a'", `"a`, `a"`} {
		if nameable(k) {
			t.Errorf("nameable(%q) = true, but fieldpath cannot name it", k)
		}
	}
	var top pathBuf
	if top.field("x"); strings.Contains(top.String(), ".") {
		t.Errorf("a top-level field has no leading period")
	}
}
