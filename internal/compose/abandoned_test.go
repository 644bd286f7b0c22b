package compose

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// TestAbandonedChange: a resize whose gate closed before the cloud took it
// (the allowance expired; the gate's approval went back to the class the
// cloud has) is not left in the spec, where it would keep every later
// change's gate shut or ride along with one: the function answers the
// instance with the class the cloud has, records it as what it let
// through, and says why. Only a value the approval holds is taken, and a
// change still in flight, or one applied, is left alone.
func TestAbandonedChange(t *testing.T) {
	const path = "spec.forProvider.instanceClass"
	previous := func(class string) string { return `{"` + path + `":"` + class + `"}` }
	live := allowance.Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "RDSInstance", "provider": "provider-aws"}},
		Verbs: []string{v1alpha1.VerbUpdate}, Generation: 3, Initiator: "hans@example.com",
		Trace:     allowance.Trace{{APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-rds", Generation: 3, Timestamp: allowance.Timestamp(testNow)}},
		Mutations: []v1alpha1.MutationBound{{JSONPath: path, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
	}
	cases := map[string]struct {
		reason       string
		approvedAs   string // the class the approval holds
		previous     string
		allowances   []allowance.Allowance
		wantClass    string
		wantPrevious string // "" for none
		wantWarning  string
	}{
		"Abandoned": {reason: "The resize's gate closed unapplied and the approval holds the small class again: the instance is answered with it, until a new cause.",
			approvedAs: "db.t3.small", previous: previous("db.t3.small"), wantClass: "db.t3.small", wantWarning: "withheld Mutate " + path + ": its change did not reach the cloud"},
		"StillInFlight": {reason: "An allowance that may still open the gate ships the resize: it stays.",
			approvedAs: "db.t3.small", previous: previous("db.t3.small"), allowances: []allowance.Allowance{live}, wantClass: "db.t3.large", wantPrevious: previous("db.t3.small")},
		"Applied": {reason: "The approval holds the large class: the resize went through, and the record of what came before is dropped.",
			approvedAs: "db.t3.large", previous: previous("db.t3.small"), wantClass: "db.t3.large"},
		"ForgedValue": {reason: "A recorded value the approval does not hold is never taken: the spec stays, held at the gate as before.",
			approvedAs: "db.t3.small", previous: previous("db.t3.2xlarge"), wantClass: "db.t3.large", wantPrevious: previous("db.t3.2xlarge")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ann := map[string]string{
				v1alpha1.AnnotationApplied:            appliedFor(t, "db.t3.large"),
				v1alpha1.AnnotationApproved:           appliedFor(t, tc.approvedAs),
				v1alpha1.AnnotationApprovedGeneration: "3",
				v1alpha1.AnnotationPrevious:           tc.previous,
			}
			if tc.allowances != nil {
				ann[v1alpha1.AnnotationAllowances] = allowance.Format(tc.allowances)
			}
			observed := observedRDS(t, "db.t3.large", 3, 3, ann, "[Observe, LateInitialize]")
			rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, xr(t, 2, 2, nil), observed, obj(t, rds("db.t3.large", "")), policyDB))
			if err != nil {
				t.Fatal(err)
			}
			m := rsp.GetDesired().GetResources()["rds"].GetResource().AsMap()
			u := &unstructured.Unstructured{Object: m}
			class, _, _ := unstructured.NestedString(m, "spec", "forProvider", "instanceClass")
			if class != tc.wantClass {
				t.Errorf("%s\ninstanceClass answered %q, want %q", tc.reason, class, tc.wantClass)
			}
			if got := u.GetAnnotations()[v1alpha1.AnnotationPrevious]; got != tc.wantPrevious {
				t.Errorf("%s\n%s = %q, want %q", tc.reason, v1alpha1.AnnotationPrevious, got, tc.wantPrevious)
			}
			applied, err := mutation.ParseApplied(u.GetAnnotations()[v1alpha1.AnnotationApplied])
			if err != nil {
				t.Fatal(err)
			}
			want, _ := mutation.ParseApplied(appliedFor(t, tc.wantClass))
			if applied[path] != want[path] {
				t.Errorf("%s\nthe applied record holds %s for the class, want the record of %s", tc.reason, applied[path], tc.wantClass)
			}
			var warnings []string
			for _, r := range rsp.GetResults() {
				warnings = append(warnings, r.GetMessage())
			}
			found := slices.ContainsFunc(warnings, func(w string) bool { return tc.wantWarning != "" && strings.Contains(w, tc.wantWarning) })
			if (tc.wantWarning != "") != found {
				t.Errorf("%s\nwarnings %q, want one containing %q", tc.reason, warnings, tc.wantWarning)
			}
		})
	}
}
