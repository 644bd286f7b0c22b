package compose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/internal/metrics"
)

func TestWithheldString(t *testing.T) {
	cases := map[string]struct {
		reason string
		w      withheld
		want   string
	}{
		"Mutation": {reason: "A withheld mutation names the resource, the field and why.",
			w:    withheld{resource: "rds", kind: "RDSInstance", name: "db-rds", verb: "Mutate", path: "spec.forProvider.instanceClass", reason: "no allowance"},
			want: "resource rds (RDSInstance db-rds): withheld Mutate spec.forProvider.instanceClass: no allowance"},
		"Verb": {reason: "A withheld Create or Delete has no field.",
			w:    withheld{resource: "rds", kind: "RDSInstance", name: "rds", verb: "Create", reason: "no allowance"},
			want: "resource rds (RDSInstance rds): withheld Create: no allowance"},
		"Log": {reason: "Log mode says the change went through anyway.",
			w:    withheld{resource: "rds", kind: "RDSInstance", name: "db-rds", verb: "Delete", reason: "no allowance", logOnly: true},
			want: "(Log mode, let through) resource rds (RDSInstance db-rds): withheld Delete: no allowance"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.w.String(); got != tc.want {
				t.Errorf("%s\nString():\nwant %s\n got %s", tc.reason, tc.want, got)
			}
		})
	}
}

func TestChangeWithholds(t *testing.T) {
	cases := map[string]struct {
		reports []withheld
		want    bool
	}{
		"KeptBack":     {reports: []withheld{{resource: "a", verb: "Create"}}, want: true},
		"LogModeOnly":  {reports: []withheld{{resource: "a", verb: "Delete", logOnly: true}}, want: false},
		"Nothing":      {want: false},
		"BothKindsOne": {reports: []withheld{{resource: "a", verb: "Delete", logOnly: true}, {resource: "a", verb: "open gate"}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (change{reports: tc.reports}).withholds(); got != tc.want {
				t.Errorf("withholds() = %v, want %v: only what was really kept back counts, never a Log-mode report", got, tc.want)
			}
		})
	}
}

func TestReport(t *testing.T) {
	cond := func(typ string, status fnv1.Status, reason, msg string, target fnv1.Target) *fnv1.Condition {
		c := &fnv1.Condition{Type: typ, Status: status, Reason: reason, Target: target.Enum()}
		if msg != "" {
			c.Message = &msg
		}
		return c
	}
	warn := func(msg string) *fnv1.Result {
		return &fnv1.Result{Severity: fnv1.Severity_SEVERITY_WARNING, Message: msg, Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()}
	}
	w := withheld{resource: "rds", kind: "RDSInstance", name: "db-rds", verb: "Mutate", path: "spec.x", reason: "no allowance"}
	turn, halted := w, w
	turn.reason, turn.code = "not this one's turn", metrics.ReasonUpgradeTurn
	halted.reason, halted.code = "the roll-out is halted", metrics.ReasonRolloutHalted
	cases := map[string]struct {
		reason string
		r      run
		f      findings
		want   *fnv1.RunFunctionResponse
	}{
		"AllAllowed": {reason: "Nothing withheld, nothing malformed: both conditions True; KausalityAllowed reaches the Claim too, replacing a False Crossplane keeps showing there.", want: &fnv1.RunFunctionResponse{Conditions: []*fnv1.Condition{
			cond(ConditionAnnotations, fnv1.Status_STATUS_CONDITION_TRUE, ReasonAnnotationsValid, "", fnv1.Target_TARGET_COMPOSITE),
			cond(ConditionAllowed, fnv1.Status_STATUS_CONDITION_TRUE, ReasonAllAllowed, "", fnv1.Target_TARGET_COMPOSITE_AND_CLAIM),
		}}},
		"Withheld": {reason: "A withheld change is a warning and a False condition the Claim sees too, and Crossplane comes back soon: what releases it (an UpgradeAllowance, a policy) is nothing it watches.", f: findings{withheld: []withheld{w}, problems: []string{"bad annotation"}},
			want: &fnv1.RunFunctionResponse{
				Meta:    &fnv1.ResponseMeta{Ttl: durationpb.New(WithheldTTL)},
				Results: []*fnv1.Result{warn("bad annotation"), warn(w.String())},
				Conditions: []*fnv1.Condition{
					cond(ConditionAnnotations, fnv1.Status_STATUS_CONDITION_FALSE, ReasonMalformed, "bad annotation", fnv1.Target_TARGET_COMPOSITE_AND_CLAIM),
					cond(ConditionAllowed, fnv1.Status_STATUS_CONDITION_FALSE, ReasonWithheld, w.String(), fnv1.Target_TARGET_COMPOSITE_AND_CLAIM),
				}}},
		"WaitsForTurn": {reason: "A change waiting only for its turn in a roll-out leaves Crossplane's default TTL: the provider gives the turn by writing the XR, which Crossplane watches, and a fleet polling every WithheldTTL slows the batch under way.", f: findings{withheld: []withheld{turn}},
			want: &fnv1.RunFunctionResponse{
				Results: []*fnv1.Result{warn(turn.String())},
				Conditions: []*fnv1.Condition{
					cond(ConditionAnnotations, fnv1.Status_STATUS_CONDITION_TRUE, ReasonAnnotationsValid, "", fnv1.Target_TARGET_COMPOSITE),
					cond(ConditionAllowed, fnv1.Status_STATUS_CONDITION_FALSE, ReasonWithheld, turn.String(), fnv1.Target_TARGET_COMPOSITE_AND_CLAIM),
				}}},
		"Halted": {reason: "A roll-out halted by a blocker waits for an object Crossplane does not watch: come back soon.", f: findings{withheld: []withheld{halted}},
			want: &fnv1.RunFunctionResponse{
				Meta:    &fnv1.ResponseMeta{Ttl: durationpb.New(WithheldTTL)},
				Results: []*fnv1.Result{warn(halted.String())},
				Conditions: []*fnv1.Condition{
					cond(ConditionAnnotations, fnv1.Status_STATUS_CONDITION_TRUE, ReasonAnnotationsValid, "", fnv1.Target_TARGET_COMPOSITE),
					cond(ConditionAllowed, fnv1.Status_STATUS_CONDITION_FALSE, ReasonWithheld, halted.String(), fnv1.Target_TARGET_COMPOSITE_AND_CLAIM),
				}}},
		"Log": {reason: "In Log mode the condition stays True and says what would have been withheld.", r: run{loaded: loaded{log: true}}, f: findings{withheld: []withheld{w}},
			want: &fnv1.RunFunctionResponse{
				Results: []*fnv1.Result{warn(w.String())},
				Conditions: []*fnv1.Condition{
					cond(ConditionAnnotations, fnv1.Status_STATUS_CONDITION_TRUE, ReasonAnnotationsValid, "", fnv1.Target_TARGET_COMPOSITE),
					cond(ConditionAllowed, fnv1.Status_STATUS_CONDITION_TRUE, ReasonLogOnly, w.String(), fnv1.Target_TARGET_COMPOSITE_AND_CLAIM),
				}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := &fnv1.RunFunctionResponse{}
			tc.r.report(rsp, &tc.f)
			if diff := cmp.Diff(tc.want, rsp, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nreport: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
