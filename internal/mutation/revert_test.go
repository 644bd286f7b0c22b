package mutation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRevert(t *testing.T) {
	type args struct {
		desired, observed string // JSON; "null" is a nil map
		ms                []Mutation
	}
	type want struct {
		desired string
		err     string // substring; empty means no error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"None": {
			reason: "Reverting nothing leaves desired as it is.",
			args:   args{desired: `{"spec":{"a":2,"l":[1,2,3]}}`, observed: `{"spec":{"a":1}}`},
			want:   want{desired: `{"spec":{"a":2,"l":[1,2,3]}}`},
		},
		"MutateScalar": {
			reason: "A withheld Mutate keeps the observed value.",
			args:   args{desired: `{"spec":{"a":2,"b":2}}`, observed: `{"spec":{"a":1,"b":1}}`, ms: []Mutation{mut("spec.a")}},
			want:   want{desired: `{"spec":{"a":1,"b":2}}`},
		},
		"MutateSubtree": {
			reason: "A withheld Mutate of a changed kind keeps the observed subtree.",
			args:   args{desired: `{"spec":{"a":"x"}}`, observed: `{"spec":{"a":{"b":[1,{"c":2}]}}}`, ms: []Mutation{mut("spec.a")}},
			want:   want{desired: `{"spec":{"a":{"b":[1,{"c":2}]}}}`},
		},
		"MutateArrayItem": {
			reason: "A withheld Mutate in an array item keeps the observed field.",
			args:   args{desired: `{"spec":{"l":[{"p":8080},{"p":2}]}}`, observed: `{"spec":{"l":[{"p":80},{"p":1}]}}`, ms: []Mutation{mut("spec.l[0].p")}},
			want:   want{desired: `{"spec":{"l":[{"p":80},{"p":2}]}}`},
		},
		"MutateBracketKey": {
			reason: "Bracketed keys revert like any other.",
			args: args{desired: `{"metadata":{"annotations":{"kausality.io/x":"2","a/b":"2"}}}`, observed: `{"metadata":{"annotations":{"kausality.io/x":"1","a/b":"1"}}}`,
				ms: []Mutation{mut("metadata.annotations[kausality.io/x]"), mut("metadata.annotations.a/b")}},
			want: want{desired: `{"metadata":{"annotations":{"kausality.io/x":"1","a/b":"1"}}}`},
		},
		"InsertField": {
			reason: "A withheld Insert removes the new field.",
			args:   args{desired: `{"spec":{"a":1,"tags":{"x":"y"}}}`, observed: `{"spec":{"a":1}}`, ms: []Mutation{ins("spec.tags")}},
			want:   want{desired: `{"spec":{"a":1}}`},
		},
		"InsertArrayItems": {
			reason: "Withheld item Inserts truncate, whatever order they come in.",
			args:   args{desired: `{"spec":{"l":["a","b","c"]}}`, observed: `{"spec":{"l":["a"]}}`, ms: []Mutation{ins("spec.l[1]"), ins("spec.l[2]")}},
			want:   want{desired: `{"spec":{"l":["a"]}}`},
		},
		"InsertLastItem": {
			reason: "Withholding only the last Insert keeps the ones let through.",
			args:   args{desired: `{"spec":{"l":["a","b","c"]}}`, observed: `{"spec":{"l":["a"]}}`, ms: []Mutation{ins("spec.l[2]")}},
			want:   want{desired: `{"spec":{"l":["a","b"]}}`},
		},
		"InsertMiddleItem": {
			reason: "Withholding an earlier Insert truncates there: later items cannot keep their indices.",
			args:   args{desired: `{"spec":{"l":["a","b","c"]}}`, observed: `{"spec":{"l":["a"]}}`, ms: []Mutation{ins("spec.l[1]")}},
			want:   want{desired: `{"spec":{"l":["a"]}}`},
		},
		"InsertNestedArrays": {
			reason: "Truncations of different arrays do not disturb each other.",
			args: args{desired: `{"spec":{"l":[{"m":[1,2]},{"z":1}]}}`, observed: `{"spec":{"l":[{"m":[1]}]}}`,
				ms: []Mutation{ins("spec.l[0].m[1]"), ins("spec.l[1]")}},
			want: want{desired: `{"spec":{"l":[{"m":[1]}]}}`},
		},
		"DeleteField": {
			reason: "A withheld Delete puts the observed field back.",
			args:   args{desired: `{"spec":{"a":1}}`, observed: `{"spec":{"a":1,"old":{"x":[1]}}}`, ms: []Mutation{del("spec.old")}},
			want:   want{desired: `{"spec":{"a":1,"old":{"x":[1]}}}`},
		},
		"DeleteArrayItems": {
			reason: "Withheld item Deletes re-append in ascending order, whatever order they come in.",
			args:   args{desired: `{"spec":{"l":["a"]}}`, observed: `{"spec":{"l":["a","b","c"]}}`, ms: []Mutation{del("spec.l[2]"), del("spec.l[1]")}},
			want:   want{desired: `{"spec":{"l":["a","b","c"]}}`},
		},
		"DeleteLastItemOnly": {
			reason: "Withholding a later Delete restores the earlier items too: an array has no holes.",
			args:   args{desired: `{"spec":{"l":["a"]}}`, observed: `{"spec":{"l":["a","b","c"]}}`, ms: []Mutation{del("spec.l[2]")}},
			want:   want{desired: `{"spec":{"l":["a","b","c"]}}`},
		},
		"DeleteFirstItemOnly": {
			reason: "Withholding the first Delete restores only it.",
			args:   args{desired: `{"spec":{"l":["a"]}}`, observed: `{"spec":{"l":["a","b","c"]}}`, ms: []Mutation{del("spec.l[1]")}},
			want:   want{desired: `{"spec":{"l":["a","b"]}}`},
		},
		"DeleteInArrayItem": {
			reason: "A key deleted inside an item comes back.",
			args:   args{desired: `{"spec":{"l":[{"p":80}]}}`, observed: `{"spec":{"l":[{"p":80,"proto":"tcp"}]}}`, ms: []Mutation{del("spec.l[0].proto")}},
			want:   want{desired: `{"spec":{"l":[{"p":80,"proto":"tcp"}]}}`},
		},
		"MixedArray": {
			reason: "Mutates and Deletes of one array combine.",
			args: args{desired: `{"spec":{"l":["A","B"]}}`, observed: `{"spec":{"l":["a","b","c"]}}`,
				ms: []Mutation{del("spec.l[2]"), mut("spec.l[0]")}},
			want: want{desired: `{"spec":{"l":["a","B","c"]}}`},
		},
		"MissingAncestor": {
			reason: "Where desired lacks an ancestor, observed's ancestor is copied.",
			args:   args{desired: `{"spec":{}}`, observed: `{"spec":{"a":{"b":1,"c":2}}}`, ms: []Mutation{del("spec.a.b")}},
			want:   want{desired: `{"spec":{"a":{"b":1,"c":2}}}`},
		},
		"ScalarAncestor": {
			reason: "Where desired holds a scalar on the way, observed's ancestor is copied.",
			args:   args{desired: `{"spec":{"a":5}}`, observed: `{"spec":{"a":{"b":1}}}`, ms: []Mutation{mut("spec.a.b")}},
			want:   want{desired: `{"spec":{"a":{"b":1}}}`},
		},
		"ObservedLacksPath": {
			reason: "Whatever the verb, a path observed lacks is removed from desired.",
			args:   args{desired: `{"spec":{"a":1,"b":2}}`, observed: `{"spec":{"b":2}}`, ms: []Mutation{mut("spec.a"), del("spec.zz.y")}},
			want:   want{desired: `{"spec":{"b":2}}`},
		},
		"DesiredLacksRemoved": {
			reason: "Removing what desired does not have is a no-op.",
			args:   args{desired: `{"spec":{"l":[1]}}`, observed: `{}`, ms: []Mutation{ins("spec.l[4]"), ins("spec.m.x"), ins("spec.l[0].x")}},
			want:   want{desired: `{"spec":{"l":[1]}}`},
		},
		"Root": {
			reason: "Reverting the root makes desired a copy of observed, in place.",
			args:   args{desired: `{"spec":{"a":2},"x":1}`, observed: `{"spec":{"a":1}}`, ms: []Mutation{mut("")}},
			want:   want{desired: `{"spec":{"a":1}}`},
		},
		"NilObserved": {
			reason: "A nil observed has no fields: everything reverted is removed.",
			args:   args{desired: `{"spec":{"a":2},"x":1}`, observed: `null`, ms: []Mutation{ins("spec")}},
			want:   want{desired: `{"x":1}`},
		},
		"NilDesiredNoWrite": {
			reason: "Removing from a nil desired is a no-op.",
			args:   args{desired: `null`, observed: `{}`, ms: []Mutation{ins("spec.a")}},
			want:   want{desired: `null`},
		},
		"NilDesiredWrite": {
			reason: "Writing into a nil desired cannot work.",
			args:   args{desired: `null`, observed: `{"spec":{"a":1}}`, ms: []Mutation{mut("spec.a")}},
			want:   want{desired: `null`, err: `cannot revert Mutate spec.a: desired is nil`},
		},
		"BadPath": {
			reason: "An unparsable path is an error naming it.",
			args:   args{desired: `{}`, observed: `{}`, ms: []Mutation{mut("spec..a")}},
			want:   want{desired: `{}`, err: `cannot parse path "spec..a"`},
		},
		"BadVerb": {
			reason: "Only real mutation verbs revert.",
			args:   args{desired: `{}`, observed: `{}`, ms: []Mutation{{Path: "spec.a", Verb: "*"}}},
			want:   want{desired: `{}`, err: `cannot revert "*" at path "spec.a"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			desired := obj(t, `{"x":`+tc.args.desired+`}`)["x"]
			observed := obj(t, `{"x":`+tc.args.observed+`}`)["x"]
			dm, _ := desired.(map[string]any)
			om, _ := observed.(map[string]any)
			err := Revert(dm, om, tc.args.ms)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nRevert(...): want error containing %q, got %v", tc.reason, tc.want.err, err)
				}
			} else if err != nil {
				t.Fatalf("%s\nRevert(...): %v", tc.reason, err)
			}
			want, _ := obj(t, `{"x":`+tc.want.desired+`}`)["x"].(map[string]any)
			if diff := cmp.Diff(want, dm); diff != "" {
				t.Errorf("%s\nRevert(...): desired -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRevertCopies: reverted values are copies, so the caller may go on
// changing observed (or desired) without the other seeing it.
func TestRevertCopies(t *testing.T) {
	observed := obj(t, `{"spec":{"a":{"b":[1,{"c":2}]},"l":["x","y"]}}`)
	desired := obj(t, `{"spec":{"l":["x"]}}`)
	if err := Revert(desired, observed, []Mutation{ins("spec.a"), mut("spec.a"), del("spec.l[1]")}); err != nil {
		t.Fatal(err)
	}
	observed["spec"].(map[string]any)["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] = 3
	observed["spec"].(map[string]any)["l"].([]any)[1] = "z"
	want := obj(t, `{"spec":{"a":{"b":[1,{"c":2}]},"l":["x","y"]}}`)
	if diff := cmp.Diff(want, desired); diff != "" {
		t.Errorf("Revert shares values with observed: -want, +got:\n%s", diff)
	}
}

// TestDiffRevert: reverting every mutation Diff reports leaves nothing to
// report, for the cases the Diff table covers.
func TestDiffRevert(t *testing.T) {
	cases := map[string]struct {
		reason            string
		observed, desired string
		owned             []string
	}{
		"Everything": {
			reason:   "Mutates, Inserts and Deletes at several depths.",
			observed: `{"spec":{"a":1,"m":{"k.x":1,"old":2},"l":[1,2,3],"r":[{"p":1,"q":2}],"k":{"x":1}}}`,
			desired:  `{"spec":{"a":2,"m":{"k.x":2,"new":3},"l":[1],"r":[{"p":2},{"p":3}],"k":"x","n":[]}}`,
			owned:    []string{"spec.m.old"},
		},
		"Unnameable": {
			reason:   "Maps with keys fieldpath cannot name revert as a whole.",
			observed: `{"spec":{"m":{"[":1,"b":1},"l":[{"]":1}]}}`,
			desired:  `{"spec":{"m":{"[":2,"b":2,"":0},"l":[{"x":1}]}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			observed, desired := obj(t, tc.observed), obj(t, tc.desired)
			opts := []DiffOption{WithOwned(ownedPaths(tc.owned...))}
			ms := Diff("spec", observed["spec"], desired["spec"], opts...)
			if len(ms) == 0 {
				t.Fatalf("%s\nDiff reported nothing", tc.reason)
			}
			if err := Revert(desired, observed, ms); err != nil {
				t.Fatalf("%s\nRevert(...): %v", tc.reason, err)
			}
			if again := Diff("spec", observed["spec"], desired["spec"], opts...); len(again) != 0 {
				t.Errorf("%s\nDiff after Revert of %v: %v", tc.reason, ms, again)
			}
		})
	}
}
