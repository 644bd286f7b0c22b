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
// change still in flight, or one applied, is left alone. Until the
// pipeline wants another class or a new cause lets the resize through, the
// XR keeps saying why it is withheld (kausality.io/abandoned).
func TestAbandonedChange(t *testing.T) {
	const path = "spec.forProvider.instanceClass"
	previous := func(class string) string { return `{"` + path + `":"` + class + `"}` }
	const unapplied = "withheld Mutate " + path + ": its change did not reach the cloud"
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
		// The class observed (and recorded as let through) and the one
		// the pipeline wants; both db.t3.large when empty.
		observedClass, desiredClass string
		abandoned, wantAbandoned    string // records of abandoned changes, "" for none
		caused                      bool   // the XR carries a new cause of the resize
	}{
		"Abandoned": {reason: "The resize's gate closed unapplied and the approval holds the small class again: the instance is answered with it, until a new cause.",
			approvedAs: "db.t3.small", previous: previous("db.t3.small"), wantClass: "db.t3.small", wantWarning: unapplied, wantAbandoned: previous("db.t3.large")},
		"StillSaid": {reason: "A run after the revert: the pipeline still wants the large class and nothing covers it, so the XR still says the resize did not reach the cloud.",
			observedClass: "db.t3.small", approvedAs: "db.t3.small", abandoned: previous("db.t3.large"), wantClass: "db.t3.small", wantWarning: unapplied, wantAbandoned: previous("db.t3.large")},
		"WantsAnother": {reason: "The pipeline now wants a medium class: that is a change of its own, withheld for want of a cause, and the abandoned record is dropped.",
			observedClass: "db.t3.small", desiredClass: "db.t3.medium", approvedAs: "db.t3.small", abandoned: previous("db.t3.large"), wantClass: "db.t3.small", wantWarning: "withheld Mutate " + path + ": no "},
		"NewCause": {reason: "A new allowance covers the resize: it goes through, and the abandoned record is dropped.",
			observedClass: "db.t3.small", approvedAs: "db.t3.small", abandoned: previous("db.t3.large"), caused: true, wantClass: "db.t3.large", wantPrevious: previous("db.t3.small")},
		"StillInFlight": {reason: "An allowance that may still open the gate ships the resize: it stays.",
			approvedAs: "db.t3.small", previous: previous("db.t3.small"), allowances: []allowance.Allowance{live}, wantClass: "db.t3.large", wantPrevious: previous("db.t3.small")},
		"Applied": {reason: "The approval holds the large class: the resize went through, and the record of what came before is dropped.",
			approvedAs: "db.t3.large", previous: previous("db.t3.small"), wantClass: "db.t3.large"},
		"ForgedValue": {reason: "A recorded value the approval does not hold is never taken: the spec stays, held at the gate as before.",
			approvedAs: "db.t3.small", previous: previous("db.t3.2xlarge"), wantClass: "db.t3.large", wantPrevious: previous("db.t3.2xlarge")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.observedClass == "" {
				tc.observedClass = "db.t3.large"
			}
			if tc.desiredClass == "" {
				tc.desiredClass = "db.t3.large"
			}
			ann := map[string]string{
				v1alpha1.AnnotationApplied:            appliedFor(t, tc.observedClass),
				v1alpha1.AnnotationApproved:           appliedFor(t, tc.approvedAs),
				v1alpha1.AnnotationApprovedGeneration: "3",
				v1alpha1.AnnotationPrevious:           tc.previous,
				v1alpha1.AnnotationAbandoned:          tc.abandoned,
			}
			if tc.allowances != nil {
				ann[v1alpha1.AnnotationAllowances] = allowance.Format(tc.allowances)
			}
			observed := observedRDS(t, tc.observedClass, 3, 3, ann, "[Observe, LateInitialize]")
			var xrAnn map[string]string
			if tc.caused {
				xrAnn = map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}
			}
			rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, xr(t, 2, 2, xrAnn), observed, obj(t, rds(tc.desiredClass, "")), policyDB))
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
			if got := u.GetAnnotations()[v1alpha1.AnnotationAbandoned]; got != tc.wantAbandoned {
				t.Errorf("%s\n%s = %q, want %q", tc.reason, v1alpha1.AnnotationAbandoned, got, tc.wantAbandoned)
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

func TestSameUnder(t *testing.T) {
	const p = "spec.forProvider.tags"
	base := mutation.Applied{"spec.forProvider.tags.a": "1", "spec.forProvider.tags.b": "2", "spec.forProvider.size": "3"}
	with := func(k, h string) mutation.Applied {
		out := mutation.Applied{}
		for key, v := range base {
			out[key] = v
		}
		if h == "" {
			delete(out, k)
		} else {
			out[k] = h
		}
		return out
	}
	cases := map[string]struct {
		reason string
		a, b   mutation.Applied
		want   bool
	}{
		"Same":           {reason: "The same leaves under p are the same.", a: base, b: base, want: true},
		"OutsideIgnored": {reason: "A leaf outside p does not count.", a: base, b: with("spec.forProvider.size", "9"), want: true},
		"HashDiffers":    {reason: "A leaf under p with another hash differs.", a: base, b: with("spec.forProvider.tags.b", "9"), want: false},
		"MissingInB":     {reason: "A leaf under p only a has differs.", a: base, b: with("spec.forProvider.tags.b", ""), want: false},
		"MissingInA":     {reason: "A leaf under p only b has differs.", a: with("spec.forProvider.tags.a", ""), b: base, want: false},
		"BothEmpty":      {reason: "Nothing under p on either side is the same.", a: nil, b: mutation.Applied{"spec.x": "1"}, want: true},
		"AtP":            {reason: "A leaf at p itself counts.", a: mutation.Applied{p: "1"}, b: nil, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sameUnder(tc.a, tc.b, p); got != tc.want {
				t.Errorf("%s\nsameUnder(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}
