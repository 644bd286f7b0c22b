package compose

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// TestComposedGeneration: a composed resource written anyway is recorded
// as composed from the XR's generation only when an XR allowance still
// needs that record; otherwise its record stays, so a write that raises
// the XR's generation (Crossplane recording resource references) does not
// rewrite every composed resource. One the run leaves untouched keeps its
// own record: the XR's KausalityComposed condition records it.
func TestComposedGeneration(t *testing.T) {
	xr := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(5)}}}
	cases := map[string]struct {
		reason     string
		own, from  int64
		untouched  bool
		allowances []allowance.Allowance
		want       int64
	}{
		"New":            {reason: "A resource the function never composed records the XR's generation.", from: 0, want: 5},
		"NoAllowance":    {reason: "No XR allowance needs the record: it stays.", own: 3, from: 3, want: 3},
		"UsedAllowance":  {reason: "An allowance already composed for the resource (generation 3 ≤ 3) needs nothing.", own: 3, from: 3, allowances: []allowance.Allowance{{Generation: 3}}, want: 3},
		"NewAllowance":   {reason: "An allowance of a later generation is used up by recording the XR's.", own: 3, from: 3, allowances: []allowance.Allowance{{Generation: 4}}, want: 5},
		"AheadOfTheXR":   {reason: "A record ahead of the XR (an XR recreated under the same name) is replaced.", own: 9, from: 9, want: 5},
		"FromTheXR":      {reason: "A resource written anyway that the XR's record says was composed from 4 records 4 where no allowance needs more.", own: 2, from: 4, allowances: []allowance.Allowance{{Generation: 4}}, want: 4},
		"Untouched":      {reason: "A resource the run leaves untouched keeps its own record although an allowance is newer: the XR records it.", own: 3, from: 3, untouched: true, allowances: []allowance.Allowance{{Generation: 4}}, want: 3},
		"UntouchedNone":  {reason: "An untouched resource without a record gets none.", untouched: true, allowances: []allowance.Allowance{{Generation: 4}}, want: 0},
		"UntouchedAhead": {reason: "An untouched resource whose record is ahead of the XR is rewritten all the same.", own: 9, from: 9, untouched: true, want: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &run{loaded: loaded{xr: xr, allowances: tc.allowances}}
			if got := r.composedGeneration(childMeta{own: tc.own, from: tc.from}, tc.untouched); got != tc.want {
				t.Errorf("%s\ncomposedGeneration = %d, want %d", tc.reason, got, tc.want)
			}
		})
	}
}
