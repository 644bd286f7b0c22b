package compose

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// TestComposedGeneration: a composed resource is recorded as composed
// from the XR's generation only when an XR allowance still needs that
// record; otherwise its record stays, so a write that raises the XR's
// generation (Crossplane recording resource references) does not rewrite
// every composed resource.
func TestComposedGeneration(t *testing.T) {
	xr := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(5)}}}
	cases := map[string]struct {
		reason     string
		from       int64
		allowances []allowance.Allowance
		want       int64
	}{
		"New":           {reason: "A resource the function never composed records the XR's generation.", from: 0, want: 5},
		"NoAllowance":   {reason: "No XR allowance needs the record: it stays.", from: 3, want: 3},
		"UsedAllowance": {reason: "An allowance already composed for the resource (generation 3 ≤ 3) needs nothing.", from: 3, allowances: []allowance.Allowance{{Generation: 3}}, want: 3},
		"NewAllowance":  {reason: "An allowance of a later generation is used up by recording the XR's.", from: 3, allowances: []allowance.Allowance{{Generation: 4}}, want: 5},
		"AheadOfTheXR":  {reason: "A record ahead of the XR (an XR recreated under the same name) is replaced.", from: 9, want: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &run{loaded: loaded{xr: xr, allowances: tc.allowances}}
			if got := r.composedGeneration(childMeta{from: tc.from}); got != tc.want {
				t.Errorf("%s\ncomposedGeneration = %d, want %d", tc.reason, got, tc.want)
			}
		})
	}
}
