package allowance

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

func TestParseComposed(t *testing.T) {
	cases := map[string]struct {
		reason  string
		msg     string
		want    Composed
		wantErr string
	}{
		"Record":     {reason: "A record reads back sorted, without repeats.", msg: `composed from generation 7; left as stored: ["logs","data","logs"]`, want: Composed{Generation: 7, Untouched: []string{"data", "logs"}}},
		"None":       {reason: "A run that left nothing as stored.", msg: `composed from generation 2; left as stored: []`, want: Composed{Generation: 2}},
		"NoPrefix":   {reason: "A message of another shape does not read.", msg: "composed at 7", wantErr: "does not start with"},
		"NoList":     {reason: "A record without its list does not read.", msg: "composed from generation 7", wantErr: "has no"},
		"Negative":   {reason: "A generation is never negative.", msg: `composed from generation -3; left as stored: []`, wantErr: "not a non-negative integer"},
		"NotAnArray": {reason: "The resources are a JSON array of names.", msg: `composed from generation 3; left as stored: {"a":1}`, wantErr: "left as stored"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseComposed(tc.msg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nParseComposed(%q) error = %v, want one containing %q", tc.reason, tc.msg, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nParseComposed(%q): %v", tc.reason, tc.msg, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nParseComposed(%q): -want, +got:\n%s", tc.reason, tc.msg, diff)
			}
		})
	}
}

func TestComposedOf(t *testing.T) {
	cond := func(msg string) map[string]any {
		return map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True"},
			map[string]any{"type": v1alpha1.ConditionComposed, "status": "True", "message": msg},
		}}}
	}
	rec := Composed{Generation: 4, Untouched: []string{"logs"}}
	cases := map[string]struct {
		reason  string
		xr      map[string]any
		want    Composed
		wantErr bool
	}{
		"Recorded":   {reason: "The condition's record is read.", xr: cond(rec.String()), want: rec},
		"None":       {reason: "A composite without the condition records nothing.", xr: map[string]any{}, want: Composed{}},
		"Unreadable": {reason: "A condition that does not read is an error and records nothing.", xr: cond("garbage"), wantErr: true},
		"MarkedUnknown": {reason: "Crossplane marks the condition Unknown when a reconcile fails: it records nothing, and that is no error.",
			xr: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": v1alpha1.ConditionComposed, "status": "Unknown",
				"reason": "FatalError", "message": "A fatal error occurred before the status of this condition could be determined."}}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ComposedOf(tc.xr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nComposedOf(...) error = %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nComposedOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestComposedFrom(t *testing.T) {
	own := func(g string) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationComposedGeneration: g}}}
	}
	rec := Composed{Generation: 5, Untouched: []string{"logs"}}
	cases := map[string]struct {
		reason   string
		composed map[string]any
		resName  string
		want     int64
	}{
		"Recorded":     {reason: "A resource the composite's record names was composed from its generation.", composed: own("3"), resName: "logs", want: 5},
		"NotRecorded":  {reason: "A resource the record does not name has its own record.", composed: own("3"), resName: "data", want: 3},
		"OwnIsLater":   {reason: "Its own later record wins.", composed: own("6"), resName: "logs", want: 6},
		"NothingAtAll": {reason: "Neither says anything: never composed.", composed: map[string]any{}, resName: "data", want: 0},
		"Carried": {reason: "The record it carries for the composite names it: composed from that generation.",
			composed: map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationComposedGeneration: "3",
				v1alpha1.AnnotationLeftAsStored: Composed{Generation: 7, Untouched: []string{"data", "logs"}}.String()}}}, resName: "data", want: 7},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ComposedFrom(tc.composed, tc.resName, rec); got != tc.want {
				t.Errorf("%s\nComposedFrom(...) = %d, want %d", tc.reason, got, tc.want)
			}
		})
	}
}

func TestLeftAsStored(t *testing.T) {
	ann := func(v any) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationLeftAsStored: v}}}
	}
	rec := Composed{Generation: 3, Untouched: []string{"data", "logs"}}
	cases := map[string]struct {
		reason   string
		composed map[string]any
		want     Composed
		wantErr  string
	}{
		"Recorded":   {reason: "The annotation holds the record as the condition's message does.", composed: ann(rec.String()), want: rec},
		"None":       {reason: "A resource without the annotation records nothing.", composed: map[string]any{}},
		"Unreadable": {reason: "An annotation that does not read is an error naming it.", composed: ann("data, logs"), wantErr: v1alpha1.AnnotationLeftAsStored},
		"NotAString": {reason: "An annotation of another type records nothing.", composed: ann(3)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := LeftAsStored(tc.composed)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nLeftAsStored(...) error = %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nLeftAsStored(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nLeftAsStored(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestComposedMerge(t *testing.T) {
	at := func(g int64, names ...string) Composed { return Composed{Generation: g, Untouched: names} }
	cases := map[string]struct {
		reason   string
		c, other Composed
		want     Composed
	}{
		"SameGeneration": {reason: "Records of one generation add up, sorted, without repeats.", c: at(4, "logs", "queue"), other: at(4, "data", "logs"), want: at(4, "data", "logs", "queue")},
		"Newer":          {reason: "A newer record replaces an older one.", c: at(4, "logs"), other: at(5, "data"), want: at(5, "data")},
		"Older":          {reason: "An older record is dropped.", c: at(5, "data"), other: at(4, "logs"), want: at(5, "data")},
		"Zero":           {reason: "The zero record says nothing.", c: Composed{}, other: at(2, "logs"), want: at(2, "logs")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.c.Merge(tc.other), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nMerge(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
