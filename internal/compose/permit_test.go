package compose

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// permitRun is a run under policyDB for the XR of fn_test.go, with the
// given phase and the XR allowances of xrAllowances when allowed.
func permitRun(t *testing.T, phase policy.Phase, allowed bool) *run {
	t.Helper()
	p := v1alpha1.AllowancePolicy{}
	if err := yaml.Unmarshal([]byte(policyDB), &p); err != nil {
		t.Fatal(err)
	}
	set, errs := policy.NewCache().For("example.com/v1alpha1", "XDatabase", []v1alpha1.AllowancePolicy{p})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	x := &unstructured.Unstructured{}
	x.SetAPIVersion("example.com/v1alpha1")
	x.SetKind("XDatabase")
	x.SetName("db")
	r := &run{loaded: loaded{xr: x, set: set, phase: phase, revision: "xdatabases-aws-2", rev: policy.Revision{Name: "xdatabases-aws-2"}, logic: logic.Logic{Revision: "xdatabases-aws-2"}}}
	if allowed {
		as, err := allowance.Parse(xrAllowances)
		if err != nil {
			t.Fatal(err)
		}
		r.allowances = as
	}
	return r
}

func TestPermit(t *testing.T) {
	rdsKind := policy.Kinds{}.ChildOf("rds.aws.crossplane.io/v1alpha1", "RDSInstance")
	bucket := policy.Kinds{}.ChildOf("s3.aws.crossplane.io/v1beta1", "Bucket")
	class := mutation.Mutation{Path: "spec.forProvider.instanceClass", Verb: v1alpha1.MutationMutate}
	region := mutation.Mutation{Path: "spec.forProvider.region", Verb: v1alpha1.MutationMutate}
	// observedAt is the logic change of a resource last produced by rev.
	observedAt := func(r *run, rev string) *upgrade {
		up, _ := r.upgradeOf(map[string]string{v1alpha1.AnnotationCompositionRevision: rev}) // a revision alone always reads
		return up
	}
	type want struct {
		ok      bool
		by      bool // justified by an XR allowance
		upgrade bool
		reason  string // substring
	}
	cases := map[string]struct {
		reason string
		r      func(*testing.T) *run
		decide func(*run) decision
		want   want
	}{
		"UnrestrictedKind": {reason: "A kind no policy names needs no cause.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, false) },
			decide: func(r *run) decision { return r.permitChild(bucket, 0, v1alpha1.VerbDelete) }, want: want{ok: true}},
		"CreateWhileInitializing": {reason: "The initializing bound lets the composite create its RDS instance.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseInitializing, false) },
			decide: func(r *run) decision { return r.permitChild(rdsKind, 0, v1alpha1.VerbCreate) }, want: want{ok: true}},
		"CreateSteady": {reason: "Once steady, a create needs an allowance.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			decide: func(r *run) decision { return r.permitChild(rdsKind, 0, v1alpha1.VerbCreate) }, want: want{reason: "grants Create of rdsinstances"}},
		"DeleteSteady": {reason: "No allowance grants Delete: the resource is kept.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			decide: func(r *run) decision { return r.permitChild(rdsKind, 0, v1alpha1.VerbDelete) }, want: want{reason: "grants Delete of rdsinstances"}},
		"UsedUpForResource": {reason: "The XR allowance of generation 2 is used up for a resource last composed from generation 2: the change it covered reached it already.",
			r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			decide: func(r *run) decision {
				return r.permitMutation(rdsKind, 2, class, false, observedAt(r, "xdatabases-aws-2"))
			}, want: want{reason: "no unconsumed"}},
		"CoveredMutation": {reason: "The spec.size allowance covers instanceClass and is named as the cause.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			decide: func(r *run) decision {
				return r.permitMutation(rdsKind, 0, class, false, observedAt(r, "xdatabases-aws-2"))
			}, want: want{ok: true, by: true}},
		"UncoveredMutation": {reason: "The allowance bounds its mutations: region is not among them.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			decide: func(r *run) decision {
				return r.permitMutation(rdsKind, 0, region, false, observedAt(r, "xdatabases-aws-2"))
			}, want: want{reason: "no unconsumed allowance on XDatabase/db grants Update"}},
		"Drift": {reason: "The pipeline wants what it last let through: correcting the resource is drift, denied by default even with an allowance.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			decide: func(r *run) decision {
				return r.permitMutation(rdsKind, 0, class, true, observedAt(r, "xdatabases-aws-2"))
			}, want: want{reason: "drift"}},
		"DriftAllowed": {reason: "Policy drift: Allow lets drift correction through.", r: func(t *testing.T) *run {
			r := permitRun(t, policy.PhaseSteady, false)
			r.drift = v1alpha1.DriftAllow
			return r
		},
			decide: func(r *run) decision {
				return r.permitMutation(rdsKind, 0, class, true, observedAt(r, "xdatabases-aws-2"))
			}, want: want{ok: true}},
		"RevisionChanged": {reason: "A new composition revision's own change needs an UpgradeAllowance.", r: func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, false) },
			decide: func(r *run) decision {
				return r.permitMutation(rdsKind, 0, region, false, observedAt(r, "xdatabases-aws-1"))
			}, want: want{reason: "the logic changed (Composition revision xdatabases-aws-1 → xdatabases-aws-2) and no UpgradeAllowance"}},
		"PoliciesUnknown": {reason: "Unknown policies fail closed, even for kinds no policy names and in the initializing phase.", r: func(t *testing.T) *run {
			r := permitRun(t, policy.PhaseInitializing, false)
			r.restrictAll = true
			return r
		},
			decide: func(r *run) decision { return r.permitChild(bucket, 0, v1alpha1.VerbCreate) }, want: want{reason: "AllowancePolicies are not known"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := tc.decide(tc.r(t))
			if d.ok != tc.want.ok || (d.by != nil) != tc.want.by || (d.upgrade != nil) != tc.want.upgrade || !strings.Contains(d.reason, tc.want.reason) {
				t.Errorf("%s\ngot ok=%v by=%v upgrade=%v reason=%q\nwant ok=%v by=%v upgrade=%v reason containing %q",
					tc.reason, d.ok, d.by != nil, d.upgrade != nil, d.reason, tc.want.ok, tc.want.by, tc.want.upgrade, tc.want.reason)
			}
		})
	}
}
