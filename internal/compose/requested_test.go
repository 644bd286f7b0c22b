package compose

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// TestGateNeverWiderThanPipeline: the steps before Kausality set
// spec.managementPolicies as Crossplane's docs show (an observe-only import,
// a resource kept on deletion); the function answers with a gate no wider,
// records the request for the provider, and does not report a creation the
// pipeline never asked for as withheld.
func TestGateNeverWiderThanPipeline(t *testing.T) {
	withPolicies := func(ps string) string {
		return rds("db.t3.small", "") + "  managementPolicies: " + ps + "\n"
	}
	cases := map[string]struct {
		reason      string
		desired     string
		wantGate    []any
		wantRecord  string // "" for none
		wantWarning string // a result containing it, "" for none
	}{
		"ObserveOnlyImport": {
			reason:  "An observe-only import is never created by Kausality: the XR's creation grants Create, the gate stays [Observe].",
			desired: withPolicies("[Observe]"), wantGate: []any{"Observe"}, wantRecord: `["Observe"]`,
		},
		"KeepOnDelete": {
			reason:  "A resource its Composition keeps on deletion is created as asked; the gate never holds Delete.",
			desired: withPolicies("[Create, Update, Observe, LateInitialize]"), wantGate: []any{"Observe", "Create", "LateInitialize"},
			wantRecord: `["Create","Update","Observe","LateInitialize"]`,
		},
		"NoRequest": {
			reason:  "Without a request the gate opens for what the allowances grant, and nothing is recorded.",
			desired: rds("db.t3.small", ""), wantGate: []any{"Observe", "Create", "LateInitialize"},
		},
		"StarRequest": {
			reason:  "[\"*\"] asks for everything, as no request does.",
			desired: withPolicies(`["*"]`), wantGate: []any{"Observe", "Create", "LateInitialize"}, wantRecord: `["*"]`,
		},
		"InvalidRequest": {
			reason:  "A request crossplane-runtime would refuse closes the gate, and the XR says why.",
			desired: withPolicies("[Watch]"), wantGate: []any{}, wantRecord: `[]`, wantWarning: "Watch",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, xr(t, 1, 1, nil), nil, obj(t, tc.desired), policyDB))
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			for _, r := range rsp.GetResults() {
				warnings = append(warnings, r.GetMessage())
			}
			if got := slices.ContainsFunc(warnings, func(w string) bool { return tc.wantWarning != "" && strings.Contains(w, tc.wantWarning) }); got != (tc.wantWarning != "") || (tc.wantWarning == "" && len(warnings) > 0) {
				t.Errorf("%s\nresults %q, want one containing %q", tc.reason, warnings, tc.wantWarning)
			}
			d := rsp.GetDesired().GetResources()["rds"]
			if d == nil {
				t.Fatalf("%s\nthe resource is withheld: %q", tc.reason, warnings)
			}
			m := d.GetResource().AsMap()
			gate, _ := m["spec"].(map[string]any)["managementPolicies"].([]any)
			if gate == nil {
				gate = []any{}
			}
			if diff := cmp.Diff(tc.wantGate, gate); diff != "" {
				t.Errorf("%s\ngate: -want +got:\n%s", tc.reason, diff)
			}
			ann, _ := m["metadata"].(map[string]any)["annotations"].(map[string]any)
			rec, _ := ann[v1alpha1.AnnotationRequestedPolicies].(string)
			if rec != tc.wantRecord {
				t.Errorf("%s\n%s = %q, want %q", tc.reason, v1alpha1.AnnotationRequestedPolicies, rec, tc.wantRecord)
			}
			// An allowance the request makes moot is never stamped: it
			// would open nothing and wait for ever.
			as, err := allowance.Parse(ann[v1alpha1.AnnotationAllowances].(string))
			if err != nil {
				t.Fatal(err)
			}
			creates := slices.ContainsFunc(as, func(a allowance.Allowance) bool {
				return a.Relation == v1alpha1.RelationExternal && a.HasVerb(v1alpha1.VerbCreate)
			})
			if wantCreate := slices.Contains(tc.wantGate, any("Create")); creates != wantCreate {
				t.Errorf("%s\nan External Create allowance stamped: %t, want %t (%s)", tc.reason, creates, wantCreate, ann[v1alpha1.AnnotationAllowances])
			}
		})
	}
}
