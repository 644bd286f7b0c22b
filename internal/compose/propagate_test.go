package compose

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

const policyPools = `apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: xpools, uid: p-2, generation: 1}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XPools}
  rules:
  - trigger: spec.size
    policies:
    - target: {apiGroup: eks.aws.m.upbound.io, resource: nodegroups}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: spec.forProvider.scalingConfig.desiredSize, verbs: [Mutate]}
    - target: {external: {kind: NodeGroup}}
      relation: External
      verbs: [Update]
`

// pools simulates Crossplane and a provider around the function for an XR
// with n node pools: it composes, applies the function's output as
// Crossplane would, and lets the provider write what open gates let
// through to a pretend cloud.
type pools struct {
	t        *testing.T
	f        *Function
	input    string
	xrGen    int64
	size     int64
	xrAnn    map[string]string
	observed map[string]map[string]any
	cloud    map[string]int64
	updates  []string // pool names, in the order the cloud saw their updates
	blocker  map[string]any
	last     *fnv1.RunFunctionResponse
}

func newPools(t *testing.T, n int, input string) *pools {
	p := &pools{t: t, f: newTestFunction(), input: input, xrGen: 1, size: 3, observed: map[string]map[string]any{}, cloud: map[string]int64{}}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("pool-%d", i)
		p.observed[name] = map[string]any{
			"apiVersion": "eks.aws.m.upbound.io/v1beta1", "kind": "NodeGroup",
			"metadata": map[string]any{"name": "x-" + name, "generation": int64(1), "labels": map[string]any{v1alpha1.LabelGated: "true"},
				"annotations": map[string]any{v1alpha1.AnnotationComposedGeneration: "1", v1alpha1.AnnotationApprovedGeneration: "1"}},
			"spec":   map[string]any{"forProvider": map[string]any{"scalingConfig": map[string]any{"desiredSize": int64(3)}}, "managementPolicies": []any{"Observe", "LateInitialize"}},
			"status": status(1),
		}
		p.cloud[name] = 3
	}
	return p
}

func status(gen int64) map[string]any {
	return map[string]any{"conditions": []any{
		map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "observedGeneration": gen},
		map[string]any{"type": "Ready", "status": "True", "reason": "Available"},
	}}
}

// resize is a permitted change of spec.size by alice, at the XR's next
// generation, with the allowances admission stamps for it.
func (p *pools) resize(size int64, user string, permitted bool) {
	p.xrGen++
	p.size = size
	p.xrAnn = map[string]string{}
	if !permitted {
		return
	}
	tr := allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XPools", Name: "x", Generation: p.xrGen, Field: "spec.size", User: user, Timestamp: allowance.Timestamp(testNow.Add(-time.Minute))}}
	as := []allowance.Allowance{
		{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "eks.aws.m.upbound.io", Resource: "nodegroups"}, Verbs: []string{"Update"},
			Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.scalingConfig.desiredSize", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}}, Generation: p.xrGen, Initiator: user, Trace: tr},
		{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "NodeGroup"}}, Verbs: []string{"Update"}, Generation: p.xrGen, Initiator: user, Trace: tr},
	}
	p.xrAnn[v1alpha1.AnnotationAllowances] = allowance.Format(as)
}

// step runs one reconcile: the function, Crossplane's apply, the provider.
func (p *pools) step() {
	t := p.t
	t.Helper()
	ann := map[string]any{}
	for k, v := range p.xrAnn {
		ann[k] = v
	}
	x := map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "XPools",
		"metadata": map[string]any{"name": "x", "namespace": "prod", "generation": p.xrGen, "annotations": ann},
		"spec":     map[string]any{"size": p.size},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True", "observedGeneration": p.xrGen - 1},
			map[string]any{"type": "Ready", "status": "True"},
		}},
	}
	req := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "t"},
		Input:    obj(t, "apiVersion: kausality.fn.crossplane.io/v1beta1\nkind: Input\n"+p.input),
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, x)}, Resources: map[string]*fnv1.Resource{}},
		Desired:  &fnv1.State{Resources: map[string]*fnv1.Resource{}},
		RequiredResources: map[string]*fnv1.Resources{
			RequirementPolicies: {Items: []*fnv1.Resource{{Resource: obj(t, policyPools)}}},
			RequirementUpgrades: {},
		},
	}
	if p.blocker != nil {
		req.RequiredResources[RequirementBlockerPrefix+"alarm"] = &fnv1.Resources{Items: []*fnv1.Resource{{Resource: mustStruct(t, p.blocker)}}}
	} else {
		req.RequiredResources[RequirementBlockerPrefix+"alarm"] = &fnv1.Resources{}
	}
	for name, o := range p.observed {
		req.Observed.Resources[name] = &fnv1.Resource{Resource: mustStruct(t, o)}
		req.Desired.Resources[name] = &fnv1.Resource{Resource: mustStruct(t, map[string]any{
			"apiVersion": "eks.aws.m.upbound.io/v1beta1", "kind": "NodeGroup",
			"spec": map[string]any{"forProvider": map[string]any{"scalingConfig": map[string]any{"desiredSize": p.size}}},
		})}
	}
	rsp, err := p.f.RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			t.Fatalf("fatal result: %s", r.GetMessage())
		}
	}
	p.last = rsp
	for name, d := range rsp.GetDesired().GetResources() {
		want := d.GetResource().AsMap()
		integers(want)
		o := p.observed[name]
		dmd := want["metadata"].(map[string]any)
		omd := o["metadata"].(map[string]any)
		// Admission: no write loses an unconsumed allowance or reopens a
		// consumed one, and pending values stay as issued.
		ann := dmd["annotations"].(map[string]any)
		if stored, ok := omd["annotations"].(map[string]any)[v1alpha1.AnnotationAllowances].(string); ok {
			was, _ := allowance.Parse(stored)
			as, err := allowance.Parse(fmt.Sprint(ann[v1alpha1.AnnotationAllowances]))
			if err != nil {
				t.Fatal(err)
			}
			as, _ = allowance.KeepConsumed(as, was)
			as, _ = allowance.KeepUnconsumed(as, was, o)
			as, _ = allowance.KeepPending(as, was)
			ann[v1alpha1.AnnotationAllowances] = allowance.Format(as)
		}
		omd["annotations"], omd["labels"] = ann, dmd["labels"]
		before := fmt.Sprint(o["spec"].(map[string]any)["forProvider"])
		o["spec"] = want["spec"]
		if fmt.Sprint(o["spec"].(map[string]any)["forProvider"]) != before {
			omd["generation"] = omd["generation"].(int64) + 1
		}
		// The provider: it writes the spec to the cloud only through an
		// Update gate, and observes the generation either way.
		gen := omd["generation"].(int64)
		mp := fmt.Sprint(o["spec"].(map[string]any)["managementPolicies"])
		size := o["spec"].(map[string]any)["forProvider"].(map[string]any)["scalingConfig"].(map[string]any)["desiredSize"].(int64)
		if strings.Contains(mp, "Update") && p.cloud[name] != size {
			p.cloud[name] = size
			p.updates = append(p.updates, name)
		}
		o["status"] = status(gen)
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(jsonSafe(m).(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jsonSafe turns int64s into float64s, as structpb wants.
func jsonSafe(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = jsonSafe(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jsonSafe(x)
		}
		return out
	case int64:
		return float64(t)
	}
	return v
}

// allowancesOn are the allowances an observed pool carries.
func allowancesOn(o map[string]any) []allowance.Allowance {
	as, _ := allowance.Parse((&unstructured.Unstructured{Object: o}).GetAnnotations()[v1alpha1.AnnotationAllowances])
	return as
}

// expectNoneOpen fails the test for every pool that keeps an unconsumed
// allowance.
func (p *pools) expectNoneOpen(when string) {
	p.t.Helper()
	for name, o := range p.observed {
		if open := allowance.Unconsumed(allowancesOn(o), o); len(open) > 0 {
			p.t.Errorf("%s: %s keeps allowances open: %v", when, name, open)
		}
	}
}

func (p *pools) condition(typ string) *fnv1.Condition {
	for _, c := range p.last.GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

const exponential = `propagation:
  collections:
  - name: pools
    matchResourceName: pool-*
  blockers:
  - {name: alarm, apiVersion: v1, kind: ConfigMap, matchName: rollout-alarm}
`

// TestRollOutInBatches: Alice's permitted resize reaches six pools in the
// exponential batches of DESIGN §6, each only after the pools before it applied
// it and are ready.
func TestRollOutInBatches(t *testing.T) {
	p := newPools(t, 6, exponential)
	p.resize(5, "alice@example.com", true)
	var batches [][]string
	for range 12 {
		n := len(p.updates)
		p.step()
		if len(p.updates) > n {
			batches = append(batches, slices.Clone(p.updates[n:]))
		}
	}
	want := [][]string{{"pool-1"}, {"pool-2"}, {"pool-3", "pool-4"}, {"pool-5", "pool-6"}}
	if fmt.Sprint(sorted(batches)) != fmt.Sprint(want) {
		t.Errorf("batches = %v, want %v", batches, want)
	}
	if c := p.condition(ConditionPropagated); c == nil || c.GetStatus() != fnv1.Status_STATUS_CONDITION_TRUE {
		t.Errorf("after the roll-out Propagated = %v, want True", c)
	}
	p.expectNoneOpen("after the roll-out")
}

func sorted(bs [][]string) [][]string {
	for _, b := range bs {
		slices.Sort(b)
	}
	return bs
}

// TestRollOutHeldByBlockerAndAnUnpermittedChange: a blocker halts the
// roll-out and names itself; an unpermitted change of the XR in the middle
// does not ride on the pending allowances; the permitted value still
// reaches every pool once the blocker is gone... unless the XR now wants
// another value, which then is withheld.
func TestRollOutHeldByBlocker(t *testing.T) {
	p := newPools(t, 6, exponential)
	p.resize(5, "alice@example.com", true)
	p.step() // pool-1 written
	p.step() // pool-1 applied; pool-2 written
	if got := len(p.updates); got != 2 {
		t.Fatalf("before the blocker: %d updates, want 2", got)
	}
	p.blocker = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "rollout-alarm", "namespace": "prod"}}
	for range 5 {
		p.step()
	}
	if got := len(p.updates); got != 2 {
		t.Fatalf("with the blocker: %d updates, want still 2 (%v)", got, p.updates)
	}
	c := p.condition(ConditionPropagated)
	if c == nil || c.GetStatus() != fnv1.Status_STATUS_CONDITION_FALSE || !strings.Contains(c.GetMessage(), "blocker alarm (ConfigMap rollout-alarm) exists") {
		t.Fatalf("Propagated = %v, want False naming the blocker", c)
	}
	if ttl := p.last.GetMeta().GetTtl().AsDuration(); ttl != WithheldTTL {
		t.Errorf("TTL while held = %s, want %s", ttl, WithheldTTL)
	}
	p.blocker = nil
	for range 8 {
		p.step()
	}
	if got := len(p.updates); got != 6 {
		t.Fatalf("after the blocker: %d updates, want 6 (%v)", got, p.updates)
	}
}

// TestPendingCoversOnlyItsValue: while a blocker holds Alice's change on
// every pool, Bob changes the XR without permission. The pending
// allowances cover Alice's value only, so once the blocker goes Bob's
// value reaches no pool.
func TestPendingCoversOnlyItsValue(t *testing.T) {
	p := newPools(t, 6, exponential)
	p.blocker = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "rollout-alarm", "namespace": "prod"}}
	p.resize(5, "alice@example.com", true)
	p.step()
	p.step()
	for name, o := range p.observed {
		as := allowancesOn(o)
		if len(as) != 1 || !as[0].IsPending() {
			t.Fatalf("%s carries %v, want one pending allowance", name, as)
		}
	}
	p.resize(9, "bob@example.com", false)
	p.blocker = nil
	for range 10 {
		p.step()
	}
	if len(p.updates) != 0 {
		t.Errorf("the cloud saw updates %v (%v), want none", p.updates, p.cloud)
	}
	if c := p.condition(ConditionAllowed); c == nil || c.GetStatus() != fnv1.Status_STATUS_CONDITION_FALSE {
		t.Errorf("KausalityAllowed = %v, want False naming the withheld change", c)
	}
	// Alice's change is superseded, not left waiting: once she permits
	// the new size it rolls out to every pool.
	p.resize(9, "alice@example.com", true)
	for range 10 {
		p.step()
	}
	for name, size := range p.cloud {
		if size != 9 {
			t.Errorf("after Alice permitted 9: %s is at %d", name, size)
		}
	}
}

// TestRevertMidRollOut: Alice reverts in the middle. The pools that took
// the change go back; the others never see the stale value.
func TestRevertMidRollOut(t *testing.T) {
	p := newPools(t, 6, exponential)
	p.resize(5, "alice@example.com", true)
	p.step()
	p.step()
	p.resize(3, "alice@example.com", true)
	for range 10 {
		p.step()
	}
	for name, size := range p.cloud {
		if size != 3 {
			t.Errorf("%s is at %d in the cloud, want the reverted 3", name, size)
		}
	}
	for _, name := range p.updates {
		if name != "pool-1" && name != "pool-2" {
			t.Errorf("%s was written, but only pool-1 and pool-2 ever took the stale value (updates %v)", name, p.updates)
		}
	}
	p.expectNoneOpen("superseded by the revert")
}

// TestWindowTTL: a closed maintenance window holds the change and asks
// Crossplane to come back when it opens.
func TestWindowTTL(t *testing.T) {
	// testNow is Sunday 2026-11-22 12:00 UTC.
	p := newPools(t, 2, `propagation:
  resources:
  - name: pool-1
    propagateWhen: ["inWindow(now, 'Mon-Fri 09:00-17:00', 'UTC')"]
`)
	p.resize(5, "alice@example.com", true)
	p.step()
	if len(p.updates) != 1 || p.updates[0] != "pool-2" {
		t.Fatalf("updates = %v, want only pool-2 (pool-1 waits for its window)", p.updates)
	}
	c := p.condition(ConditionPropagated)
	if c == nil || !strings.Contains(c.GetMessage(), "the window opens at 2026-11-23T09:00:00Z") {
		t.Errorf("Propagated = %v, want the window's opening named", c)
	}
	if ttl := p.last.GetMeta().GetTtl().AsDuration(); ttl != 21*time.Hour {
		t.Errorf("TTL = %s, want 21h, until the window opens", ttl)
	}
	p.f.now = func() time.Time { return time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC) }
	p.step()
	if len(p.updates) != 2 {
		t.Errorf("in the window: updates = %v, want pool-1 too", p.updates)
	}
}

func TestPlanErrors(t *testing.T) {
	for in, want := range map[string]string{
		"propagation:\n  collections:\n  - {name: pools}\n":                                                           "selects nothing",
		"propagation:\n  collections:\n  - {name: item, matchResourceName: 'p-*'}\n":                                  "is a variable every expression has",
		"propagation:\n  collections:\n  - {name: pools, matchResourceName: 'p-*', propagateWhen: ['pools.size(']}\n": "propagation.collections[0] (pools)",
		"propagation:\n  resources:\n  - {name: a, propagateWhen: [\"inWindow(now, 'Mon 9-17', 'UTC')\"]}\n":          "propagation.resources[0] (a)",
		"propagation:\n  blockers:\n  - {name: alarm, kind: ConfigMap, matchName: a}\n":                               "needs apiVersion, kind and matchName",
	} {
		p := newPools(t, 1, in)
		req := &fnv1.RunFunctionRequest{Input: obj(t, "apiVersion: kausality.fn.crossplane.io/v1beta1\nkind: Input\n"+in)}
		rsp, _ := p.f.RunFunction(context.Background(), req)
		if len(rsp.GetResults()) == 0 || !strings.Contains(rsp.GetResults()[0].GetMessage(), want) {
			t.Errorf("input %q: results %v, want a fatal one containing %q", in, rsp.GetResults(), want)
		}
	}
}

// TestHeldBack: holding a change back is a new decision: the held change
// keeps the observed value and records the wanted one as pending, and the
// decision it was made from is left as it was.
func TestHeldBack(t *testing.T) {
	observed := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(1)}}}
	desired := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(2)}}}
	size := mutation.Mutation{Path: "spec.forProvider.size", Verb: v1alpha1.MutationMutate}
	it := &item{resName: "b", observed: observed, desired: desired, ok: true,
		ch: change{passed: []mutation.Mutation{size}, covered: []mutation.Mutation{size}}}

	held, err := heldBack(it)
	if err != nil {
		t.Fatal(err)
	}

	if len(it.ch.passed) != 1 || len(it.ch.held) != 0 {
		t.Errorf("the decision held back was edited: passed %v held %v", it.ch.passed, it.ch.held)
	}
	if len(held.passed) != 0 || !cmp.Equal(held.held, []mutation.Mutation{size}) || !held.rewritten {
		t.Errorf("held change: passed %v held %v rewritten %v; want nothing passed, size held, the spec rewritten", held.passed, held.held, held.rewritten)
	}
	if got, _, _ := unstructured.NestedInt64(held.object(desired), "spec", "forProvider", "size"); got != 1 {
		t.Errorf("size the held change answers with = %d, want the observed 1", got)
	}
	if got, _, _ := unstructured.NestedInt64(desired, "spec", "forProvider", "size"); got != 2 {
		t.Errorf("the pipeline's desired size after holding back = %d, want its own 2 untouched", got)
	}
	if _, ok := held.pending["spec.forProvider.size"]; !ok {
		t.Errorf("held change pending %v, want the wanted size recorded", held.pending)
	}
}
