package allowance

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// TestPins: a hand edit's allowance ships its fields at the values the
// edit set, and no other.
func TestPins(t *testing.T) {
	edited := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(3), "region": "eu"}}}
	sized := ValuesOf(edited, []mutation.Mutation{{Path: "spec.forProvider.size"}}, nil)
	removed := ValuesOf(edited, []mutation.Mutation{{Path: "spec.forProvider.tags"}}, nil)
	spec := func(size int64, tags bool) mutation.Applied {
		fp := map[string]any{"size": size, "region": "eu"}
		if tags {
			fp["tags"] = map[string]any{"team": "a"}
		}
		return mutation.Record("spec", map[string]any{"forProvider": fp}, nil)
	}
	cases := map[string]struct {
		reason string
		a      Allowance
		path   string
		spec   mutation.Applied
		want   bool
	}{
		"Unpinned": {reason: "An allowance without values ships whatever the field holds.",
			a: Allowance{}, path: "spec.forProvider.size", spec: spec(1, false), want: true},
		"EditedValue": {reason: "The field holds the edit's value: shipped.",
			a: Allowance{}.Pinned(sized), path: "spec.forProvider.size", spec: spec(3, false), want: true},
		"Reverted": {reason: "A later write set another value (a stale pipeline run reverting the edit): not shipped.",
			a: Allowance{}.Pinned(sized), path: "spec.forProvider.size", spec: spec(1, false), want: false},
		"OtherField": {reason: "A field the edit did not change is not the edit's to ship.",
			a: Allowance{}.Pinned(sized), path: "spec.forProvider.region", spec: spec(3, false), want: false},
		"RemovedStaysRemoved": {reason: "The edit removed the tags; a leaf under them that is gone is its change.",
			a: Allowance{}.Pinned(removed), path: "spec.forProvider.tags.team", spec: spec(3, false), want: true},
		"RemovedThenRestored": {reason: "Tags written back after the edit removed them are another change.",
			a: Allowance{}.Pinned(removed), path: "spec.forProvider.tags.team", spec: spec(3, true), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.Pins(tc.path, tc.spec); got != tc.want {
				t.Errorf("%s\nPins(%s) = %t, want %t (values %v)", tc.reason, tc.path, got, tc.want, tc.a.Values)
			}
		})
	}
}

// TestKeepValues: a writer cannot re-pin a stored allowance to its own
// value, nor drop the pin; a new allowance keeps what it carries.
func TestKeepValues(t *testing.T) {
	a := Allowance{Relation: "External", Verbs: []string{"Update"}, Generation: 3, Trace: Trace{{Kind: "Bucket", Name: "b", Generation: 3}}}
	stored := a.Pinned(map[string]string{"spec.size": "h3"})
	cases := map[string]struct {
		reason      string
		sent        []Allowance
		want        []Allowance
		wantChanged bool
	}{
		"Repinned": {reason: "Re-pinned to another value: the stored pin is restored.",
			sent: []Allowance{a.Pinned(map[string]string{"spec.size": "h1"})}, want: []Allowance{stored}, wantChanged: true},
		"Unpinned": {reason: "Sent without its pin: the stored pin is restored.",
			sent: []Allowance{a}, want: []Allowance{stored}, wantChanged: true},
		"Same": {reason: "Sent as stored: unchanged.",
			sent: []Allowance{stored}, want: []Allowance{stored}},
		"New": {reason: "Another allowance keeps the values it carries.",
			sent: []Allowance{{Relation: "External", Generation: 4}}, want: []Allowance{{Relation: "External", Generation: 4}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, changed := KeepValues(tc.sent, []Allowance{stored})
			if diff := cmp.Diff(tc.want, got); diff != "" || changed != tc.wantChanged {
				t.Errorf("%s\nKeepValues: changed %t, want %t; -want +got:\n%s", tc.reason, changed, tc.wantChanged, diff)
			}
		})
	}
}
