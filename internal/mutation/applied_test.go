package mutation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRecord(t *testing.T) {
	type args struct {
		prefix  string
		desired any
		skip    func(string) bool
	}
	spec := func(s string) any { return obj(t, `{"x":`+s+`}`)["x"] }
	cases := map[string]struct {
		reason string
		args   args
		want   []string // recorded paths
	}{
		"Leaves": {
			reason: "Every scalar and every empty map or array is a leaf; non-empty containers are not.",
			args:   args{prefix: "spec", desired: spec(`{"a":1,"m":{"k.x":"v","e":{}},"l":[1,{"b":null}],"n":[]}`)},
			want:   []string{"spec.a", "spec.l[0]", "spec.l[1].b", "spec.m.e", "spec.m[k.x]", "spec.n"},
		},
		"Skip": {
			reason: "Skipped paths are not recorded.",
			args:   args{prefix: "spec", desired: spec(`{"managementPolicies":["*"],"a":1}`), skip: func(p string) bool { return p == "spec.managementPolicies" }},
			want:   []string{"spec.a"},
		},
		"Absent": {
			reason: "An absent value records nothing.",
			args:   args{prefix: "spec"},
			want:   []string{},
		},
		"Scalar": {
			reason: "A scalar at the prefix is one leaf.",
			args:   args{prefix: "spec.a", desired: "x"},
			want:   []string{"spec.a"},
		},
		"Unnameable": {
			reason: "A map with a key fieldpath cannot name is one leaf.",
			args:   args{prefix: "spec", desired: spec(`{"m":{"a]":1,"b":2},"c":1}`)},
			want:   []string{"spec.c", "spec.m"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := Record(tc.args.prefix, tc.args.desired, tc.args.skip)
			got := make([]string, 0, len(a))
			for k, h := range a {
				got = append(got, k)
				if !isHash(h) {
					t.Errorf("Record: %s has hash %q", k, h)
				}
			}
			if diff := cmp.Diff(tc.want, got, sortStrings); diff != "" {
				t.Errorf("%s\nRecord(...): -want, +got paths:\n%s", tc.reason, diff)
			}
		})
	}
}

var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })

func TestHashByValue(t *testing.T) {
	// The same value hashes alike whatever Go types hold it and whatever
	// order its map keys come in, so a record made from one decoding matches
	// the next.
	same := [][]any{
		{int64(5), float64(5), json.Number("5"), json.Number("5.0"), uint8(5), int(5)},
		{0.5, float32(0.5), json.Number("0.5"), json.Number("5e-1")},
		{map[string]any{"a": 1, "b": []any{int64(2)}}, map[string]any{"b": []any{2.0}, "a": json.Number("1")}},
	}
	for _, vs := range same {
		for _, v := range vs[1:] {
			if hashOf(v) != hashOf(vs[0]) {
				t.Errorf("hashOf(%#v) != hashOf(%#v)", v, vs[0])
			}
		}
	}
	different := []any{nil, "5", 5, 5.5, true, false, map[string]any{}, []any{}, "null", int64(1 << 53), float64(1<<53) + 2}
	seen := map[string]any{}
	for _, v := range different {
		h := hashOf(v)
		if o, ok := seen[h]; ok {
			t.Errorf("hashOf(%#v) == hashOf(%#v)", v, o)
		}
		seen[h] = v
	}
	if h := hashOf("x"); !isHash(h) {
		t.Errorf("hashOf: %q is not %d lowercase hex digits", h, hashLen)
	}
}

func TestParseApplied(t *testing.T) {
	type want struct {
		a   Applied
		err string // substring; empty means no error
	}
	cases := map[string]struct {
		reason string
		in     string
		want   want
	}{
		"Absent":        {reason: "No annotation is no record.", in: "", want: want{}},
		"EmptyObject":   {reason: "An empty object is an empty record.", in: "{}", want: want{a: Applied{}}},
		"Valid":         {reason: "Paths to hashes parse.", in: `{"spec.a":"0123456789ab","spec.m[k.x]":"abcdefabcdef","spec.l[0]":"000000000000"}`, want: want{a: Applied{"spec.a": "0123456789ab", "spec.m[k.x]": "abcdefabcdef", "spec.l[0]": "000000000000"}}},
		"Whitespace":    {reason: "Insignificant whitespace is fine.", in: " { \"spec.a\" : \"0123456789ab\" } ", want: want{a: Applied{"spec.a": "0123456789ab"}}},
		"NotJSON":       {reason: "The record is JSON.", in: "spec.a: x", want: want{err: "not valid JSON"}},
		"Array":         {reason: "The record is an object.", in: `["spec.a"]`, want: want{err: `must be a JSON object of path to hash, not "["`}},
		"Null":          {reason: "null is not a record.", in: `null`, want: want{err: "not null"}},
		"NumberValue":   {reason: "Hashes are strings.", in: `{"spec.a":12}`, want: want{err: `path "spec.a": hash must be a string, not float64 12`}},
		"ObjectValue":   {reason: "Hashes are strings, not nested objects.", in: `{"spec.a":{}}`, want: want{err: `path "spec.a": hash must be a string, not "{"`}},
		"Uppercase":     {reason: "Hashes are lowercase hex.", in: `{"spec.a":"0123456789AB"}`, want: want{err: `hash "0123456789AB" is not 12 lowercase hex digits`}},
		"Short":         {reason: "Hashes have 12 digits.", in: `{"spec.a":"0123"}`, want: want{err: `hash "0123" is not 12`}},
		"Duplicate":     {reason: "A key given twice is refused, not silently overwritten.", in: `{"spec.a":"0123456789ab","spec.a":"0123456789ac"}`, want: want{err: `path "spec.a" appears twice`}},
		"Trailing":      {reason: "Appended text must not be ignored.", in: `{} {}`, want: want{err: "trailing data"}},
		"TrailingJunk":  {reason: "Appended junk must not be ignored.", in: `{}x`, want: want{err: "trailing data"}},
		"Unterminated":  {reason: "A cut-off record is refused.", in: `{"spec.a":"0123456789ab"`, want: want{err: "not valid JSON"}},
		"MissingColon":  {reason: "Malformed objects are refused.", in: `{"spec.a" "0123456789ab"}`, want: want{err: "not valid JSON"}},
		"BadPath":       {reason: "Keys are field paths.", in: `{"spec..a":"0123456789ab"}`, want: want{err: `cannot parse path "spec..a"`}},
		"NonCanonical":  {reason: "Keys are canonical, as they are compared as strings.", in: `{"spec['a']":"0123456789ab"}`, want: want{err: `path "spec['a']" is not canonical, want "spec.a"`}},
		"TooLarge":      {reason: "Values larger than annotations can hold are refused before decoding.", in: "{" + strings.Repeat(" ", MaxAppliedBytes) + "}", want: want{err: "more than"}},
		"RootLeafValid": {reason: "The root is a path too.", in: `{"":"0123456789ab"}`, want: want{a: Applied{"": "0123456789ab"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseApplied(tc.in)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nParseApplied(...): want error containing %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nParseApplied(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.a, got); diff != "" {
				t.Errorf("%s\nParseApplied(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAppliedRoundTrip(t *testing.T) {
	desired := obj(t, `{"spec":{"forProvider":{"instanceClass":"db.t3.small","tags":{"kausality.io/x":"a","team":"b"},"rules":[{"port":80},{"port":443}],"empty":{}}}}`)
	a := Record("spec", desired["spec"], nil)
	s := a.String()
	want := `{"spec.forProvider.empty":"` + hashOf(map[string]any{}) + `","spec.forProvider.instanceClass":"` + hashOf("db.t3.small") + `","spec.forProvider.rules[0].port":"` + hashOf(80) + `","spec.forProvider.rules[1].port":"` + hashOf(443) + `","spec.forProvider.tags.team":"` + hashOf("b") + `","spec.forProvider.tags[kausality.io/x]":"` + hashOf("a") + `"}`
	if s != want {
		t.Errorf("String(): want\n%s\ngot\n%s", want, s)
	}
	back, err := ParseApplied(s)
	if err != nil {
		t.Fatalf("ParseApplied(String()): %v", err)
	}
	if diff := cmp.Diff(a, back); diff != "" {
		t.Errorf("ParseApplied(String()): -want, +got:\n%s", diff)
	}
	if got := back.String(); got != s {
		t.Errorf("String() is not stable: %s then %s", s, got)
	}
	if got := Applied(nil).String(); got != "{}" {
		t.Errorf("Applied(nil).String() = %q, want {}", got)
	}
}

func TestAppliedOwns(t *testing.T) {
	a := Applied{"spec.forProvider.tags[kausality.io/x]": "000000000000", "spec.forProvider.rules[1].port": "000000000000", "spec.size": "000000000000"}
	cases := map[string]struct {
		reason string
		a      Applied
		path   string
		want   bool
	}{
		"Leaf":          {reason: "A recorded leaf is owned.", a: a, path: "spec.size", want: true},
		"Parent":        {reason: "A prefix of a leaf is owned.", a: a, path: "spec.forProvider", want: true},
		"BracketParent": {reason: "A map holding a bracketed leaf is owned.", a: a, path: "spec.forProvider.tags", want: true},
		"Item":          {reason: "An item holding a leaf is owned.", a: a, path: "spec.forProvider.rules[1]", want: true},
		"OtherItem":     {reason: "Another item is not.", a: a, path: "spec.forProvider.rules[0]", want: false},
		"NotBoundary":   {reason: "spec.siz is not a prefix on a segment boundary.", a: a, path: "spec.siz", want: false},
		"Below":         {reason: "A path below a leaf is not recorded.", a: a, path: "spec.size.x", want: false},
		"Nil":           {reason: "No record owns nothing.", a: nil, path: "spec", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.Owns(tc.path); got != tc.want {
				t.Errorf("%s\nOwns(%q): want %t, got %t", tc.reason, tc.path, tc.want, got)
			}
		})
	}
}

func TestAppliedUnchanged(t *testing.T) {
	last := obj(t, `{"spec":{"size":"small","tags":{"a":"1","b":"2"},"l":[1,2],"n":5}}`)
	a := Record("spec", last["spec"], nil)
	type args struct {
		a       Applied
		path    string
		value   any
		present bool
	}
	cases := map[string]struct {
		reason string
		args   args
		want   bool
	}{
		"SameLeaf":        {reason: "A leaf desired as last time is unchanged.", args: args{a: a, path: "spec.size", value: "small", present: true}, want: true},
		"ChangedLeaf":     {reason: "A leaf desired differently is changed.", args: args{a: a, path: "spec.size", value: "large", present: true}, want: false},
		"NumberType":      {reason: "Numbers compare by value across Go types.", args: args{a: a, path: "spec.n", value: json.Number("5"), present: true}, want: true},
		"SameSubtree":     {reason: "A subtree desired as last time is unchanged.", args: args{a: a, path: "spec.tags", value: map[string]any{"b": "2", "a": "1"}, present: true}, want: true},
		"SubtreeExtra":    {reason: "A subtree with a new leaf is changed.", args: args{a: a, path: "spec.tags", value: map[string]any{"a": "1", "b": "2", "c": "3"}, present: true}, want: false},
		"SubtreeFewer":    {reason: "A subtree missing a leaf is changed.", args: args{a: a, path: "spec.tags", value: map[string]any{"a": "1"}, present: true}, want: false},
		"NewField":        {reason: "A field never applied before is changed.", args: args{a: a, path: "spec.region", value: "x", present: true}, want: false},
		"RemovedField":    {reason: "A field applied before and no longer desired is changed.", args: args{a: a, path: "spec.size", present: false}, want: false},
		"StillAbsent":     {reason: "A field absent last time and now is unchanged: observed gained it outside the pipeline.", args: args{a: a, path: "spec.l[2]", present: false}, want: true},
		"StillAbsentItem": {reason: "An item desired now that was not there last time is changed.", args: args{a: a, path: "spec.l[2]", value: 3, present: true}, want: false},
		"NoRecord":        {reason: "Without a record nothing is unchanged.", args: args{a: nil, path: "spec.size", value: "small", present: true}, want: false},
		"EmptyRecord":     {reason: "An empty record is no record.", args: args{a: Applied{}, path: "spec.x", present: false}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.args.a.Unchanged(tc.args.path, tc.args.value, tc.args.present); got != tc.want {
				t.Errorf("%s\nUnchanged(%q, %v, %t): want %t, got %t", tc.reason, tc.args.path, tc.args.value, tc.args.present, tc.want, got)
			}
		})
	}
}
