package compose

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
)

func TestRunFunctionCountsDecisions(t *testing.T) {
	observedAnn := map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1"}
	type count struct{ outcome, reason, policy string }
	cases := map[string]struct {
		reason string
		xrAnn  map[string]string
		want   count
	}{
		"Withheld": {reason: "A change no allowance covers counts once as withheld for lack of an allowance, labelled with the policy that restricts the kind.",
			want: count{metrics.OutcomeWithheld, metrics.ReasonNoAllowance, "xdatabase-policy"}},
		"LetThrough": {reason: "A change the XR's allowance covers counts as let through by an allowance.",
			xrAnn: map[string]string{v1alpha1.AnnotationAllowances: xrAllowances},
			want:  count{metrics.OutcomeLetThrough, metrics.ReasonAllowance, "xdatabase-policy"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f := newTestFunction()
			f.metrics = metrics.NewFunction(reg)
			req := newRequest(t, xr(t, 2, 1, tc.xrAnn), observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
			if _, err := f.RunFunction(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := testutil.ToFloat64(f.metrics.Decisions.WithLabelValues("XDatabase", tc.want.outcome, tc.want.reason, tc.want.policy)); got != 1 {
				t.Errorf("%s\n%s{outcome=%q,reason=%q,policy=%q} = %v, want 1", tc.reason, metrics.NameFunctionDecisions, tc.want.outcome, tc.want.reason, tc.want.policy, got)
			}
			if n := testutil.CollectAndCount(f.metrics.Decisions); n != 1 {
				t.Errorf("%s\none composed resource makes one series, got %d", tc.reason, n)
			}
		})
	}
}

func TestRecordRanksOutcomes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewFunction(reg)
	r := &run{metrics: m, loaded: loaded{restrictAll: true, xr: &unstructured.Unstructured{Object: map[string]any{"kind": "XDatabase"}}}}
	f := findings{
		withheld: []withheld{
			{resource: "a", code: metrics.ReasonUpgradeTurn},
			{resource: "a", code: metrics.ReasonNoAllowance},
			{resource: "b", code: metrics.ReasonNoAllowance, logOnly: true},
			{resource: "c", code: metrics.ReasonRolloutHalted},
		},
	}
	counts := []counted{{resource: "c", outcome: metrics.OutcomeHeld, reason: metrics.ReasonBlocker}, {resource: "d", outcome: metrics.OutcomeHeld, reason: metrics.ReasonWindow}}
	r.record(&f, counts)
	for _, c := range []struct{ outcome, reason string }{
		{metrics.OutcomeWithheld, metrics.ReasonNoAllowance},  // a: withheld outranks pending
		{metrics.OutcomeLogOnly, metrics.ReasonNoAllowance},   // b
		{metrics.OutcomePending, metrics.ReasonRolloutHalted}, // c: pending outranks held
		{metrics.OutcomeHeld, metrics.ReasonWindow},           // d
	} {
		if got := testutil.ToFloat64(m.Decisions.WithLabelValues("XDatabase", c.outcome, c.reason, "")); got != 1 {
			t.Errorf("%s/%s = %v, want 1: each resource counts once, as its most restrictive outcome", c.outcome, c.reason, got)
		}
	}
	if n := testutil.CollectAndCount(m.Decisions); n != 4 {
		t.Errorf("want 4 series, one per resource, got %d", n)
	}
}
