package compose

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// TestOverdueGateClosesAlone: a gate found open longer than maxGateOpen
// (the provider, which closes it at the limit, is down) is answered with
// the resource as observed and only its gate closed, the one write the API
// server admits without the provider; whatever else the run would change
// waits, and a Warning says so. Within the limit the run answers as ever.
func TestOverdueGateClosesAlone(t *testing.T) {
	hop := allowance.Hop{APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-rds", Generation: 2, Field: "spec.forProvider.instanceClass", Timestamp: allowance.Timestamp(testNow)}
	open := []allowance.Allowance{{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "RDSInstance", "provider": "provider-aws"}},
		Verbs: []string{"Update"}, Generation: 2, Initiator: "hans@example.com", Trace: allowance.Trace{hop},
		Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceClass", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
	}}
	// The provider applied generation 2 and observed it; nobody marked the
	// allowance consumed or closed the gate.
	ann := map[string]string{v1alpha1.AnnotationAllowances: allowance.Format(open), v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.large"),
		v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1", v1alpha1.AnnotationComposedGeneration: "2"}
	observed := func() map[string]any {
		return observedRDS(t, "db.t3.large", 2, 2, ann, "[Observe, Update, LateInitialize]").AsMap()
	}
	cases := map[string]struct {
		reason  string
		after   time.Duration
		desired string // the class the pipeline wants
		closing bool
	}{
		"Overdue": {
			reason: "Two hours after the allowance was stamped (the limit is one), the gate is closed and nothing else of the resource changes.",
			after:  2 * time.Hour, desired: "db.t3.large", closing: true,
		},
		"OverdueWithANewChange": {
			reason: "A change the pipeline wants meanwhile is not part of the closing write: it would make the write need the provider.",
			after:  2 * time.Hour, desired: "db.t3.xlarge", closing: true,
		},
		"WithinTheLimit": {
			reason: "A minute after, the run closes the gate as it always does: the allowance pruned with it.",
			after:  time.Minute, desired: "db.t3.large",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newTestFunction()
			f.now = func() time.Time { return testNow.Add(tc.after) }
			req := newRequest(t, xr(t, 2, 2, nil), observedRDS(t, "db.t3.large", 2, 2, ann, "[Observe, Update, LateInitialize]"), obj(t, rds(tc.desired, "")), policyDB)
			rsp, err := f.RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := rsp.GetDesired().GetResources()["rds"].GetResource().AsMap()
			want := observed()
			_ = setManagementPolicies(want, []string{"Observe", "LateInitialize"})
			// What the API server keeps of the resource is not the answer's.
			delete(want, "status")
			delete(want["metadata"].(map[string]any), "generation")
			var warned bool
			for _, r := range rsp.GetResults() {
				warned = warned || strings.Contains(r.GetMessage(), "maxGateOpen")
			}
			if !tc.closing {
				if cmp.Equal(want["metadata"], got["metadata"]) || warned {
					t.Errorf("%s\nthe run answered the observed annotations (closing only) or warned of an overdue gate: %v", tc.reason, rsp.GetResults())
				}
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nRunFunction(...): desired rds -want (observed, gate closed), +got:\n%s", tc.reason, diff)
			}
			if !warned {
				t.Errorf("%s\nno Result says the gate stayed open past maxGateOpen: %v", tc.reason, rsp.GetResults())
			}
		})
	}
}
