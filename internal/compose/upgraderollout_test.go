package compose

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
)

// TestUpgradeRollsOutAcrossXRs: with rollout set, a Function upgrade
// reaches the eight XRs of a revision one, then two, then four at a time;
// each batch waits until the one before it applied the upgrade and is Ready.
func TestUpgradeRollsOutAcrossXRs(t *testing.T) {
	observedAnn := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationApprovedGeneration: "1",
		v1alpha1.AnnotationFunctionVersions: `{"function-patch-and-transform":"` + ptPackage + `:v0.10.7"}`,
	}
	next := map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8"}
	key := (&run{loaded: loaded{revision: "xdatabases-aws-1", functions: logic.FormatFunctions(next)}}).logicKey()
	paced := ptUpgrade + "  rollout: {}\n"

	// composite is XR db-<i>; updated: it applied the upgrade; ready: it
	// is Ready.
	composite := func(t *testing.T, i int, updated, ready bool) *structpb.Struct {
		m := xr(t, 1, 1, nil).AsMap()
		m["metadata"].(map[string]any)["name"] = fmt.Sprintf("db-%d", i)
		// Each was created long ago (KausalityCreated), Ready or not now.
		cs := []any{m["status"].(map[string]any)["conditions"].([]any)[0],
			map[string]any{"type": v1alpha1.ConditionCreated, "status": "True", "reason": ReasonCreated}}
		if updated {
			cs = append(cs, map[string]any{"type": ConditionUpgraded, "status": "True", "reason": ReasonCurrent, "message": key + ": every composed resource is produced by the current logic"})
		}
		if ready {
			cs = append(cs, map[string]any{"type": "Ready", "status": "True", "reason": "Available"})
		}
		m["status"].(map[string]any)["conditions"] = cs
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// decide runs XR db-<self> among eight, of which db-1..db-<updated> applied
	// the upgrade, all Ready except those named in notReady.
	decide := func(t *testing.T, self, updated int, notReady ...int) rendered {
		req := newRequest(t, composite(t, self, self <= updated, !slices.Contains(notReady, self)),
			observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
		req.RequiredResources[RequirementUpgrades].Items = []*fnv1.Resource{{Resource: obj(t, paced)}}
		withFunctions(t, req, next)
		all := &fnv1.Resources{}
		for i := 1; i <= 8; i++ {
			all.Items = append(all.Items, &fnv1.Resource{Resource: composite(t, i, i <= updated, !slices.Contains(notReady, i))})
		}
		req.RequiredResources[RequirementComposites] = all
		rsp, err := newTestFunction().RunFunction(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rsp.GetRequirements().GetResources()[RequirementComposites]; !ok {
			t.Errorf("a paced upgrade does not ask for the composites it counts")
		}
		got := runOnce(t, req, "rds")
		for _, c := range rsp.GetConditions() {
			got.messages = append(got.messages, c.GetType()+"="+c.GetStatus().String()+": "+c.GetMessage())
		}
		return got
	}
	takes := func(t *testing.T, self, updated int, want bool, notReady ...int) {
		t.Helper()
		got := decide(t, self, updated, notReady...)
		if took := got.class() == "db.t3.large"; took != want {
			t.Errorf("db-%d with db-1..db-%d updated (not Ready: %v): took the upgrade = %v, want %v; %v", self, updated, notReady, took, want, got.messages)
		}
		// Taking it or waiting, the XR has not applied it yet.
		if !slices.ContainsFunc(got.messages, func(m string) bool {
			return strings.HasPrefix(m, "KausalityUpgraded=STATUS_CONDITION_FALSE: "+key)
		}) {
			t.Errorf("db-%d: KausalityUpgraded is not False naming the logic: %v", self, got.messages)
		}
		if !want && !slices.ContainsFunc(got.messages, func(m string) bool {
			return strings.HasPrefix(m, "Propagated=STATUS_CONDITION_FALSE") && strings.Contains(m, "waits for its turn in the roll-out of UpgradeAllowance pt-0-10")
		}) {
			t.Errorf("db-%d: Propagated does not say it waits for the roll-out: %v", self, got.messages)
		}
	}
	// Batch 1: db-1.
	takes(t, 1, 0, true)
	takes(t, 2, 0, false)
	// Batch 2: db-2, once db-1 applied it and is Ready.
	takes(t, 2, 1, true)
	takes(t, 2, 1, false, 1)
	takes(t, 3, 1, false)
	// Batch 3: db-3 and db-4.
	takes(t, 3, 2, true)
	takes(t, 4, 2, true)
	takes(t, 5, 2, false)
	// Batch 4: the remaining four.
	takes(t, 5, 4, true)
	takes(t, 8, 4, true)

	// Once its resource applied the upgrade (observed at the generation
	// that carries it, the gate's allowance used up), the XR says so.
	applied := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.large"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(t, "db.t3.large"), v1alpha1.AnnotationApprovedGeneration: "2",
		v1alpha1.AnnotationFunctionVersions: logic.FormatFunctions(next),
	}
	req := newRequest(t, composite(t, 1, false, true), observedRDS(t, "db.t3.large", 2, 2, applied, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
	req.RequiredResources[RequirementUpgrades].Items = []*fnv1.Resource{{Resource: obj(t, paced)}}
	withFunctions(t, req, next)
	rsp, err := newTestFunction().RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rsp.GetConditions(), func(c *fnv1.Condition) bool {
		return c.GetType() == ConditionUpgraded && c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE && strings.HasPrefix(c.GetMessage(), key+":")
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
	run := func(t *testing.T, alarm bool) rendered {
		req := newRequest(t, xr(t, 1, 1, nil), observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
		req.RequiredResources[RequirementUpgrades].Items = []*fnv1.Resource{{Resource: obj(t, blocked)}}
		withFunctions(t, req, map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8"})
		req.RequiredResources[RequirementComposites] = &fnv1.Resources{}
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
