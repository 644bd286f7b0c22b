package compose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// onOlderLogic are the annotations of an RDS instance of class
// db.t3.small that revision 1 composed with function-patch-and-transform
// v0.10.7.
func onOlderLogic(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationApprovedGeneration: "1",
		v1alpha1.AnnotationFunctionVersions: `{"function-patch-and-transform":"` + ptPackage + `:v0.10.7"}`,
	}
}

// nextLogic is the Function the run composes with: v0.10.8.
func nextLogic() map[string]string {
	return map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8"}
}

// TestUpgradeRollsOutAcrossXRs: with rollout set, an XR takes a Function
// upgrade only when the provider recorded on it that it is its turn, for
// the UpgradeAllowance's current generation and the logic the run
// composes with; a turn for another generation or logic, a forged or an
// unreadable record holds it back. Which XRs get a turn is the
// provider's (rollout.Decide, provider/rollouts).
func TestUpgradeRollsOutAcrossXRs(t *testing.T) {
	observedAnn := onOlderLogic(t)
	next := nextLogic()
	key := (&run{loaded: loaded{revision: "xdatabases-aws-1", functions: logic.FormatFunctions(next)}}).logicKey()
	paced := ptUpgrade + "  rollout: {}\nstatus: {rollout: {composites: 8, updated: 1, turns: 2, message: 'exponentiallyUpdated(xr, xrs) is false'}}\n"

	// decide runs XR db-1 with the given turns annotation ("" for none).
	decide := func(t *testing.T, turns string) rendered {
		m := xr(t, 1, 1, nil).AsMap()
		md := m["metadata"].(map[string]any)
		md["name"] = "db-1"
		if turns != "" {
			md["annotations"] = map[string]any{v1alpha1.AnnotationRolloutTurns: turns}
		}
		m["status"].(map[string]any)["conditions"] = append(m["status"].(map[string]any)["conditions"].([]any),
			map[string]any{"type": v1alpha1.ConditionCreated, "status": "True", "reason": ReasonCreated},
			map[string]any{"type": "Ready", "status": "True", "reason": "Available"})
		composite, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		req := newRequest(t, composite, observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
		req.RequiredResources[RequirementUpgrades].Items = []*fnv1.Resource{{Resource: obj(t, paced)}}
		withFunctions(t, req, next)
		rsp, err := newTestFunction().RunFunction(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(rsp.GetRequirements().GetResources()) > 0 {
			for name := range rsp.GetRequirements().GetResources() {
				if !strings.HasPrefix(name, "kausality-") || strings.Contains(name, "composites") {
					t.Errorf("a paced upgrade asks for %s: the fleet is the provider's to count", name)
				}
			}
		}
		got := runOnce(t, req, "rds")
		for _, c := range rsp.GetConditions() {
			got.messages = append(got.messages, c.GetType()+"="+c.GetStatus().String()+": "+c.GetMessage())
		}
		for _, r := range rsp.GetResults() {
			got.messages = append(got.messages, "result: "+r.GetMessage())
		}
		return got
	}
	turn := func(upgrade string, generation int, logic string) string {
		return fmt.Sprintf(`[{"upgrade":%q,"generation":%d,"logic":%q}]`, upgrade, generation, logic)
	}
	cases := map[string]struct {
		reason string
		turns  string
		takes  bool
		says   string // a part of a condition or result, when it does not take it
	}{
		"Turn":            {reason: "The provider gave it a turn for the current generation and logic.", turns: turn("pt-0-10", 3, key), takes: true},
		"NoTurn":          {reason: "No record: not its turn.", says: "waits for its turn in the roll-out of UpgradeAllowance pt-0-10: exponentiallyUpdated(xr, xrs) is false"},
		"OlderGeneration": {reason: "A turn worked out for an older generation of the UpgradeAllowance counts for nothing.", turns: turn("pt-0-10", 2, key), says: "waits for its turn"},
		"OtherLogic":      {reason: "A turn worked out for another logic (an earlier upgrade) counts for nothing.", turns: turn("pt-0-10", 3, "logic 000000000000"), says: "waits for its turn"},
		"OtherUpgrade":    {reason: "A turn in another UpgradeAllowance's roll-out is not this one's.", turns: turn("other", 3, key), says: "waits for its turn"},
		"Unreadable":      {reason: "A record it cannot read holds it back, and says so.", turns: `[{"upgrade":"pt-0-10","generation":3,"logic":"` + key + `","batch":1}]`, says: "annotation kausality.io/rollout-turns"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := decide(t, tc.turns)
			if took := got.class() == "db.t3.large"; took != tc.takes {
				t.Errorf("%s\ntook the upgrade = %v, want %v; %v", tc.reason, took, tc.takes, got.messages)
			}
			// Taking it or waiting, the XR has not applied it yet, and says
			// which logic it runs: the provider counts the fleet by it.
			if !slices.ContainsFunc(got.messages, func(m string) bool {
				return strings.HasPrefix(m, "KausalityUpgraded=STATUS_CONDITION_FALSE: "+key)
			}) {
				t.Errorf("%s\nKausalityUpgraded is not False naming the logic: %v", tc.reason, got.messages)
			}
			if tc.says != "" && !slices.ContainsFunc(got.messages, func(m string) bool { return strings.Contains(m, tc.says) }) {
				t.Errorf("%s\nnothing says %q: %v", tc.reason, tc.says, got.messages)
			}
		})
	}

	// A waiting XR's conditions and results do not change as the fleet
	// moves (other XRs take their turns): each change would be a status
	// write on every waiting XR, and a reconcile of it.
	t.Run("StableWhileWaiting", func(t *testing.T) {
		before := decide(t, "")
		saved := paced
		t.Cleanup(func() { paced = saved })
		paced = strings.Replace(paced, "updated: 1, turns: 2", "updated: 5, turns: 6", 1)
		if paced == saved {
			t.Fatal("the test's UpgradeAllowance status did not change")
		}
		if after := decide(t, ""); !slices.Equal(before.messages, after.messages) {
			t.Errorf("a waiting XR's messages changed with the fleet's counts:\nbefore %v\nafter  %v", before.messages, after.messages)
		}
	})

	// Once its resource applied the upgrade (observed at the generation
	// that carries it, the gate's allowance used up), the XR says so.
	applied := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.large"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(t, "db.t3.large"), v1alpha1.AnnotationApprovedGeneration: "2",
		v1alpha1.AnnotationFunctionVersions: logic.FormatFunctions(next),
	}
	req := newRequest(t, xr(t, 1, 1, nil), observedRDS(t, "db.t3.large", 2, 2, applied, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
	req.RequiredResources[RequirementUpgrades].Items = []*fnv1.Resource{{Resource: obj(t, paced)}}
	withFunctions(t, req, next)
	rsp, err := newTestFunction().RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rsp.GetConditions(), func(c *fnv1.Condition) bool {
		return c.GetType() == v1alpha1.ConditionUpgraded && c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE && strings.HasPrefix(c.GetMessage(), key+":")
	}) {
		t.Errorf("an XR whose resource applied the upgrade does not say KausalityUpgraded=True: %v", rsp.GetConditions())
	}
}

// TestUpgradeRollOutHaltedByBlocker: a blocker of the rollout that exists
// halts it, even for the XR whose turn it is.
func TestUpgradeRollOutHaltedByBlocker(t *testing.T) {
	observedAnn := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationApprovedGeneration: "1",
		v1alpha1.AnnotationFunctionVersions: `{"function-patch-and-transform":"` + ptPackage + `:v0.10.7"}`,
	}
	blocked := ptUpgrade + "  rollout:\n    blockers: [{name: alarm, apiVersion: v1, kind: ConfigMap, namespace: ops, matchName: upgrade-alarm}]\n"
	const requirement = RequirementUpgradeBlockerPrefix + "pt-0-10-alarm"
	next := map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8"}
	key := (&run{loaded: loaded{revision: "xdatabases-aws-1", functions: logic.FormatFunctions(next)}}).logicKey()
	// The XR has its turn: only the blocker may hold it back.
	m := xr(t, 1, 1, nil).AsMap()
	m["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.AnnotationRolloutTurns: rollout.Turns{{Upgrade: "pt-0-10", Generation: 3, Logic: key}}.Format()}
	turned, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, alarm bool) rendered {
		req := newRequest(t, turned, observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
		req.RequiredResources[RequirementUpgrades].Items = []*fnv1.Resource{{Resource: obj(t, blocked)}}
		withFunctions(t, req, next)
		req.RequiredResources[requirement] = &fnv1.Resources{}
		if alarm {
			req.RequiredResources[requirement].Items = []*fnv1.Resource{{Resource: obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: upgrade-alarm, namespace: ops}\n")}}
		}
		rsp, err := newTestFunction().RunFunction(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if sel := rsp.GetRequirements().GetResources()[requirement]; sel.GetMatchName() != "upgrade-alarm" || sel.GetNamespace() != "ops" {
			t.Errorf("the rollout's blocker is not asked for: %v", sel)
		}
		got := runOnce(t, req, "rds")
		for _, c := range rsp.GetConditions() {
			got.messages = append(got.messages, c.GetType()+": "+c.GetMessage())
		}
		return got
	}
	if got := run(t, false); got.class() != "db.t3.large" {
		t.Errorf("without the alarm the only XR takes the upgrade: class %s, %v", got.class(), got.messages)
	}
	got := run(t, true)
	if got.class() != "db.t3.small" {
		t.Errorf("the alarm did not halt the roll-out: class %s", got.class())
	}
	if !slices.ContainsFunc(got.messages, func(m string) bool {
		return strings.HasPrefix(m, "Propagated: ") && strings.Contains(m, "roll-out of UpgradeAllowance pt-0-10 is halted: blocker alarm (ConfigMap upgrade-alarm) exists")
	}) {
		t.Errorf("Propagated does not name the blocker: %v", got.messages)
	}
}

// TestUpgradedReportedBeforePacing: an XR whose composed resources record
// older logic says so (KausalityUpgraded=False, naming the logic it runs)
// before any UpgradeAllowance paces it, so the provider counts it in a
// roll-out's first pass; once said, the condition is kept current; an XR
// that never was behind gets no condition.
func TestUpgradedReportedBeforePacing(t *testing.T) {
	older, next := onOlderLogic(t), nextLogic()
	current := onOlderLogic(t)
	current[v1alpha1.AnnotationFunctionVersions] = logic.FormatFunctions(next)
	key := (&run{loaded: loaded{revision: "xdatabases-aws-1", functions: logic.FormatFunctions(next)}}).logicKey()
	// reverted is current with a resize to db.t3.large still pending,
	// which the pipeline, back at db.t3.small, no longer wants.
	reverted := maps.Clone(current)
	large := map[string]any{}
	if err := yaml.Unmarshal([]byte(rds("db.t3.large", "")), &large); err != nil {
		t.Fatal(err)
	}
	const field = "spec.forProvider.instanceClass"
	reverted[v1alpha1.AnnotationAllowances] = allowance.Format([]allowance.Allowance{{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "RDSInstance"}},
		Verbs: []string{v1alpha1.VerbUpdate}, Generation: 1, Initiator: "hans@example.com",
		Mutations: []v1alpha1.MutationBound{{JSONPath: field, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
		Pending:   map[string]string{field: mutation.Record("spec", large["spec"], skipManaged)[field]},
	}})
	cases := map[string]struct {
		reason   string
		observed map[string]string
		desired  string // the class the new logic composes
		reported bool   // the XR already carries the condition
		want     string
	}{
		"Behind":          {reason: "The new logic's change is withheld, no UpgradeAllowance yet: False, naming the logic.", observed: older, desired: "db.t3.large", want: "STATUS_CONDITION_FALSE"},
		"NoChange":        {reason: "New logic that changes nothing is taken up at once: never behind, no condition.", observed: older, desired: "db.t3.small"},
		"CurrentReported": {reason: "Current again after it said it was behind: True, not a stale False.", observed: current, desired: "db.t3.small", reported: true, want: "STATUS_CONDITION_TRUE"},
		"NeverBehind":     {reason: "Never behind, never reported: no condition.", observed: current, desired: "db.t3.small"},
		"CurrentAfterRevert": {reason: "A pending resize the pipeline reverted is superseded this run: it leaves nothing to apply, so True, not behind.",
			observed: reverted, desired: "db.t3.small", reported: true, want: "STATUS_CONDITION_TRUE"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := xr(t, 1, 1, nil).AsMap()
			if tc.reported {
				m["status"].(map[string]any)["conditions"] = append(m["status"].(map[string]any)["conditions"].([]any),
					map[string]any{"type": v1alpha1.ConditionUpgraded, "status": "False", "reason": ReasonUpgradeWaiting, "message": key + ": some"})
			}
			composite, err := structpb.NewStruct(m)
			if err != nil {
				t.Fatal(err)
			}
			req := newRequest(t, composite, observedRDS(t, "db.t3.small", 1, 1, tc.observed, "[Observe, LateInitialize]"), obj(t, rds(tc.desired, "")), policyDB)
			withFunctions(t, req, next)
			rsp, err := newTestFunction().RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, c := range rsp.GetConditions() {
				if c.GetType() == v1alpha1.ConditionUpgraded {
					got = c.GetStatus().String()
					if !strings.HasPrefix(c.GetMessage(), key+":") {
						t.Errorf("%s\nKausalityUpgraded does not name the logic %q: %q", tc.reason, key, c.GetMessage())
					}
				}
			}
			if got != tc.want {
				t.Errorf("%s\nKausalityUpgraded = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
