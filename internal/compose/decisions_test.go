package compose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// TestDeleted: the decision about a composed resource the pipeline dropped
// is a value: whether Crossplane may delete it, what is kept (as observed,
// its gate closed), and what is reported.
func TestDeleted(t *testing.T) {
	observed := func(t *testing.T) map[string]any {
		return observedRDS(t, "db.t3.small", 1, 1, map[string]string{}, "[Observe, Update, LateInitialize]").AsMap()
	}
	bucket := map[string]any{"apiVersion": "s3.aws.crossplane.io/v1beta1", "kind": "Bucket", "metadata": map[string]any{"name": "db-bucket"}}
	type want struct {
		deletes  bool     // Crossplane may delete it
		gate     []string // the kept resource's managementPolicies
		withheld string   // the reported line, "" for none
	}
	cases := map[string]struct {
		reason   string
		r        func(*testing.T) *run
		observed func(*testing.T) map[string]any
		want     want
	}{
		"UnrestrictedKind": {
			reason:   "A kind no policy names is Crossplane's to delete.",
			r:        func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			observed: func(*testing.T) map[string]any { return bucket },
			want:     want{deletes: true},
		},
		"NoAllowanceKeepsIt": {
			reason:   "No allowance grants Delete of the RDS instance: it is kept as observed with its gate closed, and the Delete is reported.",
			r:        func(t *testing.T) *run { return permitRun(t, policy.PhaseSteady, true) },
			observed: observed,
			want: want{gate: gate.DefaultReadOnly,
				withheld: "resource rds (RDSInstance db-rds): withheld Delete: no unconsumed allowance on XDatabase/db grants Delete of rdsinstances; policies: xdatabase-policy"},
		},
		"LogModeLetsItGo": {
			reason: "In Log mode the deletion goes and is reported as what Enforce would withhold.",
			r: func(t *testing.T) *run {
				r := permitRun(t, policy.PhaseSteady, true)
				r.log = true
				return r
			},
			observed: observed,
			want: want{deletes: true,
				withheld: "(Log mode, let through) resource rds (RDSInstance db-rds): withheld Delete: no unconsumed allowance on XDatabase/db grants Delete of rdsinstances; policies: xdatabase-policy"},
		},
		"PoliciesUnknownKeepIt": {
			reason: "Unknown policies fail closed: even a kind no policy names is kept.",
			r: func(t *testing.T) *run {
				r := permitRun(t, policy.PhaseSteady, false)
				r.restrictAll = true
				return r
			},
			observed: func(*testing.T) map[string]any { return bucket },
			want:     want{gate: gate.DefaultReadOnly, withheld: "resource rds (Bucket db-bucket): withheld Delete: the AllowancePolicies are not known (not resolved yet, or unreadable), so every change is withheld"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := tc.r(t)
			r.cfg.gate = r.cfg.gate.Defaulted()
			d := r.deleted("rds", tc.observed(t))
			if deletes := d.kept == nil; deletes != tc.want.deletes {
				t.Errorf("%s\nCrossplane may delete it: %v, want %v", tc.reason, deletes, tc.want.deletes)
			}
			if d.kept != nil {
				got, _, _ := unstructured.NestedStringSlice(d.kept.Object, "spec", "managementPolicies")
				if diff := cmp.Diff(tc.want.gate, got); diff != "" {
					t.Errorf("%s\nkept gate: -want +got:\n%s", tc.reason, diff)
				}
			}
			var line string
			if d.withheld != nil {
				line = d.withheld.String()
			}
			if diff := cmp.Diff(tc.want.withheld, line); diff != "" {
				t.Errorf("%s\nreported: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDecideReports: deciding a desired resource carries what it withholds
// in its change, and whether keeping observed values rewrote its spec.
func TestDecideReports(t *testing.T) {
	desired := func(t *testing.T, class string) map[string]any {
		return observedRDS(t, class, 1, 1, map[string]string{}, "[Observe, LateInitialize]").AsMap()
	}
	// moved is the instance the pipeline wants in another region.
	moved := func() map[string]any {
		d := desired(t, "db.t3.small")
		_ = unstructured.SetNestedField(d, "us-east-1", "spec", "forProvider", "region")
		return d
	}
	cases := map[string]struct {
		reason   string
		log      bool
		observed map[string]any // nil: a creation
		desired  map[string]any
		want     []string
		// rewritten: the spec keeps an observed value, so the resource
		// is encoded whole.
		rewritten bool
	}{
		"CreateWithheld": {
			reason:  "Once steady, creating the RDS instance needs an allowance.",
			desired: desired(t, "db.t3.small"),
			want:    []string{"resource rds (RDSInstance db-rds): withheld Create: no unconsumed allowance on XDatabase/db grants Create of rdsinstances; policies: xdatabase-policy"},
		},
		"MutationWithheld": {
			reason:    "Moving the region is no allowance's.",
			observed:  desired(t, "db.t3.small"),
			desired:   moved(),
			want:      []string{"resource rds (RDSInstance db-rds): withheld Mutate spec.forProvider.region: no unconsumed allowance on XDatabase/db grants Update of rdsinstances; policies: xdatabase-policy"},
			rewritten: true,
		},
		"MutationLogged": {
			reason:   "In Log mode the same change goes through, reported.",
			log:      true,
			observed: desired(t, "db.t3.small"),
			desired:  moved(),
			want:     []string{"(Log mode, let through) resource rds (RDSInstance db-rds): withheld Mutate spec.forProvider.region: no unconsumed allowance on XDatabase/db grants Update of rdsinstances; policies: xdatabase-policy"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := permitRun(t, policy.PhaseSteady, true)
			r.log = tc.log
			r.cfg.gate = r.cfg.gate.Defaulted()
			before := runtimeCopy(tc.desired)
			it := r.decide("rds", tc.observed, tc.desired)
			if diff := cmp.Diff(before, tc.desired); diff != "" {
				t.Errorf("%s\ndeciding wrote the pipeline's desired resource: -before +after:\n%s", tc.reason, diff)
			}
			var got []string
			for _, w := range it.ch.reports {
				got = append(got, w.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nreports: -want +got:\n%s", tc.reason, diff)
			}
			if it.ch.rewritten != tc.rewritten {
				t.Errorf("%s\nrewritten = %v, want %v", tc.reason, it.ch.rewritten, tc.rewritten)
			}
			// What the change answers with: the withheld region as observed.
			wantRegion := "eu-central-1"
			if tc.log {
				wantRegion = "us-east-1"
			}
			if got, _, _ := unstructured.NestedString(it.ch.object(tc.desired), "spec", "forProvider", "region"); tc.observed != nil && got != wantRegion {
				t.Errorf("%s\nthe change answers with region %q, want %q", tc.reason, got, wantRegion)
			}
		})
	}
}
