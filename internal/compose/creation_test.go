package compose

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// xrWithConditions is the XR at generation 2, reconciled once (Synced), with
// conditions beside Synced.
func xrWithConditions(t *testing.T, cs ...map[string]any) *structpb.Struct {
	t.Helper()
	m := xr(t, 2, 1, nil).AsMap()
	out := []any{m["status"].(map[string]any)["conditions"].([]any)[0]}
	for _, c := range cs {
		out = append(out, c)
	}
	m["status"].(map[string]any)["conditions"] = out
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCreationPhase: an XR is being created until it is first Ready. What
// its pipeline adds meanwhile (a resource composed once what it needs
// exists, a field wired from another resource's status) is part of the
// creation; once the XR has been Ready, the same is a change that needs a
// cause, even while it is not Ready again.
func TestCreationPhase(t *testing.T) {
	notReady := map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Available"}
	createdOnce := map[string]any{"type": v1alpha1.ConditionCreated, "status": "True", "reason": ReasonCreated}
	// observed: an RDS instance created without its subnet group, behind a
	// closed gate.
	observed := func(t *testing.T) *structpb.Struct {
		return observedRDS(t, "db.t3.small", 1, 1, map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small")}, "[Observe, LateInitialize]")
	}
	wired := obj(t, rds("db.t3.small", "")+"    dbSubnetGroupName: sg-1\n")
	resized := obj(t, rds("db.t3.large", ""))

	cases := map[string]struct {
		reason      string
		xr          *structpb.Struct
		observed    func(*testing.T) *structpb.Struct
		desired     *structpb.Struct
		wantLetOn   bool   // the resource is in the desired state with the change
		wantWarning string // a withheld change, "" for none
		wantShips   string // the path a kind-wide External grant ships, "" for a creation
		wantCreated bool   // the response keeps or sets ConditionCreated
	}{
		"DependencyDuringCreation": {reason: "A resource the pipeline adds before the XR is first Ready is created under the creation.",
			xr: xrWithConditions(t, notReady), desired: obj(t, rds("db.t3.small", "")), wantLetOn: true},
		"DependencyOnceTheRestIsReady": {reason: "A resource composed once the rest is Ready is still part of the creation, which goes on.",
			xr: xrWithConditions(t, ready), desired: obj(t, rds("db.t3.small", "")), wantLetOn: true},
		"ReadyWithNothingToAdd": {reason: "The first run that finds the XR Ready with nothing to add ends the creation.",
			xr: xrWithConditions(t, ready), observed: observed, desired: obj(t, rds("db.t3.small", "")), wantCreated: true},
		"DependencyAfterCreation": {reason: "Once the creation is over, a new resource needs a cause.",
			xr: xrWithConditions(t, createdOnce, ready), desired: obj(t, rds("db.t3.small", "")), wantWarning: "withheld Create", wantCreated: true},
		"DependencyCreatedOnceNotReadyNow": {reason: "An XR that was Ready once is not being created again when Ready turns False.",
			xr: xrWithConditions(t, createdOnce, notReady), desired: obj(t, rds("db.t3.small", "")), wantWarning: "withheld Create", wantCreated: true},
		"DependencyAfterAFailedReconcile": {reason: "A reconcile that failed left the record Unknown (Crossplane marks every condition its pipeline did not answer): the creation does not come back, and the record is set True again.",
			xr: xrWithConditions(t, map[string]any{"type": v1alpha1.ConditionCreated, "status": "Unknown", "reason": "FatalError",
				"message": "A fatal error occurred before the status of this condition could be determined."}, ready),
			desired: obj(t, rds("db.t3.small", "")), wantWarning: "withheld Create", wantCreated: true},
		"WiredDuringCreation": {reason: "A field wired in from another resource's status completes the resource during creation; its gate ships that field only.",
			xr: xrWithConditions(t, notReady), observed: observed, desired: wired, wantLetOn: true, wantShips: "spec.forProvider.dbSubnetGroupName"},
		"WiredWhileInitializing": {reason: "Wired in before Crossplane first reports the XR reconciled (the policy's initializing phase), a field completes the resource as it does later in the creation: its gate ships that field, so the spec does not hold a value the cloud never gets.",
			xr:       obj(t, "apiVersion: example.com/v1alpha1\nkind: XDatabase\nmetadata: {name: db, uid: 0d0b0e0f-0000-4000-8000-000000000001, generation: 1}\nspec: {size: small}\n"),
			observed: observed, desired: wired, wantLetOn: true, wantShips: "spec.forProvider.dbSubnetGroupName"},
		"WiredAfterCreation": {reason: "After creation, a wired value is a change like any other.",
			xr: xrWithConditions(t, createdOnce, notReady), observed: observed, desired: wired, wantWarning: "withheld Insert spec.forProvider.dbSubnetGroupName", wantCreated: true},
		"ChangedDuringCreation": {reason: "Creation inserts; changing a value the resource has needs a cause even during creation.",
			xr: xrWithConditions(t, notReady), observed: observed, desired: resized, wantWarning: "withheld Mutate spec.forProvider.instanceClass"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var o *structpb.Struct
			if tc.observed != nil {
				o = tc.observed(t)
			}
			rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, tc.xr, o, tc.desired, policyDB))
			if err != nil {
				t.Fatal(err)
			}
			created := slices.ContainsFunc(rsp.GetConditions(), func(c *fnv1.Condition) bool {
				return c.GetType() == v1alpha1.ConditionCreated && c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE
			})
			if created != tc.wantCreated {
				t.Errorf("%s\ncondition %s True: %t, want %t", tc.reason, v1alpha1.ConditionCreated, created, tc.wantCreated)
			}
			var warnings []string
			for _, r := range rsp.GetResults() {
				warnings = append(warnings, r.GetMessage())
			}
			withheld := slices.ContainsFunc(warnings, func(w string) bool { return tc.wantWarning != "" && strings.Contains(w, tc.wantWarning) })
			if (tc.wantWarning != "") != withheld || (tc.wantWarning == "" && len(warnings) > 0) {
				t.Errorf("%s\nwarnings %q, want one containing %q", tc.reason, warnings, tc.wantWarning)
			}
			d := rsp.GetDesired().GetResources()["rds"]
			if !tc.wantLetOn && tc.wantShips == "" && tc.wantWarning == "" {
				return // nothing changes
			}
			if !tc.wantLetOn {
				if tc.observed == nil && d != nil {
					t.Errorf("%s\nthe resource is created, want it withheld", tc.reason)
				}
				return
			}
			if d == nil {
				t.Fatalf("%s\nthe resource is withheld: %q", tc.reason, warnings)
			}
			m := d.GetResource().AsMap()
			ann, _ := m["metadata"].(map[string]any)["annotations"].(map[string]any)
			as, err := allowance.Parse(ann[v1alpha1.AnnotationAllowances].(string))
			if err != nil {
				t.Fatal(err)
			}
			verb := v1alpha1.VerbCreate
			if tc.wantShips != "" {
				verb = v1alpha1.VerbUpdate
			}
			i := slices.IndexFunc(as, func(a allowance.Allowance) bool {
				return a.Relation == v1alpha1.RelationExternal && slices.Equal(a.Verbs, []string{verb})
			})
			if i < 0 {
				t.Fatalf("%s\nno External %s allowance on the resource: %+v", tc.reason, verb, as)
			}
			a := as[i]
			if first := a.Trace[0]; first.Kind != "XDatabase" {
				t.Errorf("%s\nthe trace starts at %s %s, want the XR's creation", tc.reason, first.Kind, first.Name)
			}
			if tc.wantShips != "" && (len(a.Mutations) != 1 || a.Mutations[0].JSONPath != tc.wantShips || !slices.Equal(a.Mutations[0].Verbs, []v1alpha1.MutationVerb{v1alpha1.MutationInsert})) {
				t.Errorf("%s\nthe gate ships %+v, want Insert of %s only", tc.reason, a.Mutations, tc.wantShips)
			}
		})
	}
}

// TestPolicyForManagedKindKeepsItGated: a policy for a managed kind (that
// lets a team resize RDS instances by hand) leaves the kind as gated when
// an XR composes it. It once made the kind count as a composite: the
// function composed it ungated, admission gated it closed at creation
// with no allowance to open it, and it never reached the cloud.
func TestPolicyForManagedKindKeepsItGated(t *testing.T) {
	byHand := `apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: rdsinstances-by-hand, uid: p-2, generation: 1}
spec:
  for: {apiGroup: rds.aws.crossplane.io, apiVersion: v1alpha1, kind: RDSInstance}
  subjects: [{kind: Group, name: dba, mayInitiate: true}]
  rules:
  - trigger: spec.forProvider.instanceClass
    policies:
    - target: {external: {apiGroup: rds.aws.crossplane.io, kind: RDSInstance}}
      relation: External
      verbs: [Update]
`
	gateOf := func(t *testing.T, policies ...string) (string, []any, string) {
		t.Helper()
		rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, xr(t, 1, 1, nil), nil, obj(t, rds("db.t3.small", "")), policies...))
		if err != nil {
			t.Fatal(err)
		}
		r := rsp.GetDesired().GetResources()["rds"].GetResource().AsMap()
		md, _ := r["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		mp, _ := r["spec"].(map[string]any)["managementPolicies"].([]any)
		label, _ := labels[v1alpha1.LabelGated].(string)
		as, _ := ann[v1alpha1.AnnotationAllowances].(string)
		return label, mp, as
	}
	label, mp, as := gateOf(t, policyDB, byHand)
	if label != "true" {
		t.Errorf("with a policy for RDSInstance, the composed instance's %s label = %q, want true", v1alpha1.LabelGated, label)
	}
	if !slices.Contains(mp, any(v1alpha1.VerbCreate)) {
		t.Errorf("with a policy for RDSInstance, the composed instance's gate = %v, want it open for Create", mp)
	}
	parsed, err := allowance.Parse(as)
	if err != nil || !slices.ContainsFunc(parsed, func(a allowance.Allowance) bool { return a.HasVerb(v1alpha1.VerbCreate) }) {
		t.Errorf("with a policy for RDSInstance, the composed instance's allowances = %s (%v), want a Create allowance", as, err)
	}
	wantLabel, wantMP, _ := gateOf(t, policyDB)
	if label != wantLabel || !slices.Equal(mp, wantMP) {
		t.Errorf("a policy for RDSInstance changed how the XR composes it: label %q gate %v, without it %q %v", label, mp, wantLabel, wantMP)
	}
}

// TestValueComputedDuringCreation follows the load-balancer-controller
// pattern of upbound's configuration-aws-lb-controller (a Release composed
// with replicaCount 0, raised once a composed XR reports its role ARN):
// while the XR is created and nobody changed its spec, a value the
// pipeline itself changes reaches the composed resource and its gate ships
// it under the creation; once a person changed the XR (its trace names the
// field), the same change needs its own cause; after the creation it
// always does.
func TestValueComputedDuringCreation(t *testing.T) {
	notReady := map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Available"}
	createdOnce := map[string]any{"type": v1alpha1.ConditionCreated, "status": "True", "reason": ReasonCreated}
	created := `[{"apiVersion":"example.com/v1alpha1","kind":"XDatabase","name":"db","generation":1,"user":"alice","timestamp":"2026-11-22T11:00:00Z"}]`
	changed := `[{"apiVersion":"example.com/v1alpha1","kind":"XDatabase","name":"db","generation":2,"field":"spec.size","user":"alice","timestamp":"2026-11-22T11:30:00Z"}]`
	withTrace := func(t *testing.T, trace string, cs ...map[string]any) *structpb.Struct {
		m := xrWithConditions(t, cs...).AsMap()
		if trace != "" {
			m["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.AnnotationTrace: trace}
		}
		return mustStruct(t, m)
	}
	cases := map[string]struct {
		reason   string
		xr       *structpb.Struct
		withheld bool
	}{
		"ComputedWhileCreated": {reason: "Nobody changed the XR since its creation: the pipeline's own change of a value is part of the creation.",
			xr: withTrace(t, created, notReady)},
		"ChangedByAPerson": {reason: "Alice changed the XR's spec during the creation: a change of a value may be hers and needs its own cause.",
			xr: withTrace(t, changed, notReady), withheld: true},
		"Untraced": {reason: "Without a trace admission wrote, nothing says the XR is as created: the change needs a cause.",
			xr: withTrace(t, "", notReady), withheld: true},
		"AfterCreation": {reason: "Once the creation is over the same change always needs a cause.",
			xr: withTrace(t, created, createdOnce, ready), withheld: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			observed := observedRDS(t, "db.t3.small", 1, 1, map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small")}, "[Observe, LateInitialize]")
			rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, tc.xr, observed, obj(t, rds("db.t3.large", "")), policyDB))
			if err != nil {
				t.Fatal(err)
			}
			m := rsp.GetDesired().GetResources()["rds"].GetResource().AsMap()
			class, _, _ := unstructured.NestedString(m, "spec", "forProvider", "instanceClass")
			if got := class == "db.t3.small"; got != tc.withheld {
				t.Fatalf("%s\ninstanceClass answered %q, withheld %t, want withheld %t (%v)", tc.reason, class, got, tc.withheld, rsp.GetResults())
			}
			if tc.withheld {
				return
			}
			as, err := allowance.Parse(m["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.AnnotationAllowances].(string))
			if err != nil {
				t.Fatal(err)
			}
			ships := slices.ContainsFunc(as, func(a allowance.Allowance) bool {
				return a.Relation == v1alpha1.RelationExternal && a.HasVerb(v1alpha1.VerbUpdate) && len(a.Mutations) == 1 &&
					a.Mutations[0].JSONPath == "spec.forProvider.instanceClass" && slices.Contains(a.Mutations[0].Verbs, v1alpha1.MutationMutate)
			})
			if !ships {
				t.Errorf("%s\nno External Update allowance ships spec.forProvider.instanceClass: %+v", tc.reason, as)
			}
			gate, _, _ := unstructured.NestedStringSlice(m, "spec", "managementPolicies")
			if !slices.Contains(gate, "Update") {
				t.Errorf("%s\ngate %v, want it open for the Update", tc.reason, gate)
			}
		})
	}
}

// TestCreationGrantsEachCompletion: a creation completes a resource in
// steps. Once the provider created the cloud resource (the creation's
// Create allowance consumed, still on the resource until pruned), a field
// wired in later earns an Update grant of the same creation; once that is
// consumed, the pipeline's next change of the value earns another. Each is
// a grant of its own, not the first issued twice: without it the spec
// holds a value the cloud never gets.
func TestCreationGrantsEachCompletion(t *testing.T) {
	notReady := map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}
	m := xrWithConditions(t, notReady).AsMap()
	m["metadata"].(map[string]any)["annotations"] = map[string]any{
		v1alpha1.AnnotationTrace: `[{"apiVersion":"example.com/v1alpha1","kind":"XDatabase","name":"db","generation":1,"user":"alice","timestamp":"2026-11-22T11:00:00Z"}]`,
	}
	x := mustStruct(t, m)
	withSubnet := func(name string) *structpb.Struct {
		return obj(t, rds("db.t3.small", "")+"    dbSubnetGroupName: "+name+"\n")
	}
	// step answers desired against observed, and gives back the answer as
	// the provider leaves it: every allowance consumed, the gate closed.
	step := func(t *testing.T, observed, desired *structpb.Struct, gen int) (answer map[string]any, as []allowance.Allowance, next *structpb.Struct) {
		t.Helper()
		rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, x, observed, desired, policyDB))
		if err != nil {
			t.Fatal(err)
		}
		d := rsp.GetDesired().GetResources()["rds"]
		if d == nil {
			t.Fatalf("the resource is withheld: %v", rsp.GetResults())
		}
		answer = d.GetResource().AsMap()
		ann := answer["metadata"].(map[string]any)["annotations"].(map[string]any)
		if as, err = allowance.Parse(ann[v1alpha1.AnnotationAllowances].(string)); err != nil {
			t.Fatal(err)
		}
		done := slices.Clone(as)
		for i := range done {
			done[i].Consumed = true
		}
		md := runtimeCopy(answer)
		_ = unstructured.SetNestedField(md, allowance.Format(done), "metadata", "annotations", v1alpha1.AnnotationAllowances)
		_ = unstructured.SetNestedField(md, int64(gen), "metadata", "generation")
		_ = unstructured.SetNestedStringSlice(md, []string{"Observe", "LateInitialize"}, "spec", "managementPolicies")
		_ = unstructured.SetNestedField(md, map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "observedGeneration": int64(gen)}}}, "status")
		return answer, as, mustStruct(t, md)
	}
	ships := func(as []allowance.Allowance, verb v1alpha1.MutationVerb) bool {
		return slices.ContainsFunc(as, func(a allowance.Allowance) bool {
			return !a.Consumed && a.HasVerb(v1alpha1.VerbUpdate) && len(a.Mutations) == 1 &&
				a.Mutations[0].JSONPath == "spec.forProvider.dbSubnetGroupName" && slices.Contains(a.Mutations[0].Verbs, verb)
		})
	}

	_, as, created := step(t, nil, obj(t, rds("db.t3.small", "")), 1)
	if !slices.ContainsFunc(as, func(a allowance.Allowance) bool { return a.HasVerb(v1alpha1.VerbCreate) }) {
		t.Fatalf("the creation stamps no Create allowance: %+v", as)
	}
	answer, as, wired := step(t, created, withSubnet("sg-1"), 2)
	if got, _, _ := unstructured.NestedString(answer, "spec", "forProvider", "dbSubnetGroupName"); got != "sg-1" {
		t.Fatalf("the wired subnet group is withheld: spec %v", answer["spec"])
	}
	if !ships(as, v1alpha1.MutationInsert) {
		t.Errorf("the field wired in after the cloud Create earns no Update grant of the creation: %+v", as)
	}
	answer, as, _ = step(t, wired, withSubnet("sg-2"), 3)
	if got, _, _ := unstructured.NestedString(answer, "spec", "forProvider", "dbSubnetGroupName"); got != "sg-2" {
		t.Fatalf("the pipeline's change of the value is withheld: spec %v", answer["spec"])
	}
	if !ships(as, v1alpha1.MutationMutate) {
		t.Errorf("the pipeline's next change during the creation earns no Update grant: %+v", as)
	}
}
