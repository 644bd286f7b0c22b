package compose

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// policyApp restricts the Deployment an App composes, as an older
// `policy derive` wrote it: with an External entry for a kind that has no
// external resource.
var policyApp = xdatabasePolicy(`  rules:
  - trigger: spec.image
    policies:
    - target: {apiGroup: apps, apiVersion: v1, resource: deployments}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: "spec.template.spec.containers[*].image", verbs: [Mutate]}
    - target: {external: {apiGroup: apps, kind: Deployment}}
      relation: External
      verbs: [Update]
`)

// xdatabasePolicy is the AllowancePolicy for XDatabases with the spec
// fields after spec.for (rules, phases) that body, indented by two, holds.
func xdatabasePolicy(body string) string {
	return `apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: xdatabase-policy, uid: p-1, generation: 1}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XDatabase}
` + body
}

func deployment(image string) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "app", "namespace": "default"},
		"spec": map[string]any{
			"replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}}},
		},
	}
}

// TestUnmanagedKind: a composed kind without managementPolicies (a
// Deployment) never gets a gate, which a real API server would refuse;
// an uncaused change of it is withheld by keeping the observed object,
// and a permitted one goes through.
func TestUnmanagedKind(t *testing.T) {
	imageAllowance := allowance.Allowance{
		Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "apps", APIVersion: "v1", Resource: "deployments"},
		Verbs: []string{v1alpha1.VerbUpdate}, Generation: 2, Initiator: "alice",
		Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.template.spec.containers[*].image", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
		Trace:     allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 2, Field: "spec.image", User: "alice", Timestamp: "2026-11-22T11:59:01Z"}},
	}
	cases := map[string]struct {
		reason    string
		xrAnn     map[string]string
		policies  []string
		unknown   bool // Crossplane has not resolved the policy requirement yet
		wantImage string
		withheld  bool
	}{
		"Withheld": {reason: "No allowance covers the image change: the Deployment keeps its observed image, and the XR says so.",
			policies: []string{policyApp}, wantImage: "nginx:1", withheld: true},
		"Permitted": {reason: "An XR allowance for the Deployment's image lets it through, with no gate.",
			xrAnn: map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{imageAllowance})}, policies: []string{policyApp}, wantImage: "nginx:2"},
		"PoliciesUnknown": {reason: "With the policies unknown every change is withheld, and still no gate is written.",
			unknown: true, wantImage: "nginx:1", withheld: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, xr(t, 2, 1, tc.xrAnn), nil, nil, tc.policies...)
			req.Observed.Resources = map[string]*fnv1.Resource{"app": {Resource: mustStruct(t, deployment("nginx:1"))}}
			req.Desired.Resources["app"] = &fnv1.Resource{Resource: mustStruct(t, deployment("nginx:2")), Ready: fnv1.Ready_READY_TRUE}
			if tc.unknown {
				req.RequiredResources = nil
			}
			rsp, err := newTestFunction().RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := rsp.GetDesired().GetResources()["app"].GetResource().AsMap()
			if _, ok, _ := unstructured.NestedFieldNoCopy(got, "spec", "managementPolicies"); ok {
				t.Errorf("%s\nthe Deployment got spec.managementPolicies, which its schema does not declare", tc.reason)
			}
			if l, _, _ := unstructured.NestedString(got, "metadata", "labels", v1alpha1.LabelGated); l != "" {
				t.Errorf("%s\nthe Deployment is labelled %s=%s; it has no gate", tc.reason, v1alpha1.LabelGated, l)
			}
			cs, _, _ := unstructured.NestedSlice(got, "spec", "template", "spec", "containers")
			var image string
			if len(cs) == 1 {
				image, _ = cs[0].(map[string]any)["image"].(string)
			}
			if diff := cmp.Diff(tc.wantImage, image); diff != "" {
				t.Errorf("%s\nimage: -want +got:\n%s", tc.reason, diff)
			}
			if w := hasWarning(rsp); w != tc.withheld {
				t.Errorf("%s\na Warning result: %t, want %t (%v)", tc.reason, w, tc.withheld, rsp.GetResults())
			}
		})
	}
}

func hasWarning(rsp *fnv1.RunFunctionResponse) bool {
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_WARNING {
			return true
		}
	}
	return false
}

// TestShutAtCreation: a gated resource composed, or composed earlier and
// never created in the cloud, whose gate does not open Create is reported
// as withheld, so the XR does not say all is allowed while it waits.
func TestShutAtCreation(t *testing.T) {
	// policyDB without its initializing External entry: the RDS instance
	// may be composed, but nothing grants its external Create; a rule's
	// External entry makes its gate Kausality's.
	policy := strings.Replace(policyDB, "    - target: {external: {kind: RDSInstance}}\n      relation: External\n      verbs: [Create]\n", "", 1)
	if policy == policyDB {
		t.Fatal("policyDB no longer grants the external Create this test takes away")
	}
	initializing := obj(t, "apiVersion: example.com/v1alpha1\nkind: XDatabase\nmetadata: {name: db, uid: 0d0b0e0f-0000-4000-8000-000000000001, generation: 1}\nspec: {size: large}\n")
	rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, initializing, nil, obj(t, rds("db.t3.small", "")), policy))
	if err != nil {
		t.Fatal(err)
	}
	got := rsp.GetDesired().GetResources()["rds"].GetResource().AsMap()
	ps, _, _ := unstructured.NestedStringSlice(got, "spec", "managementPolicies")
	if diff := cmp.Diff([]string{"Observe", "LateInitialize"}, ps); diff != "" {
		t.Errorf("gate: -want +got:\n%s", diff)
	}
	var msgs []string
	for _, r := range rsp.GetResults() {
		msgs = append(msgs, r.GetMessage())
	}
	want := "resource rds (RDSInstance db-rds): withheld Create: its gate stays closed: no unconsumed External allowance grants Create of rds.aws.crossplane.io RDSInstance, so it is not created in the cloud"
	if diff := cmp.Diff([]string{want}, msgs); diff != "" {
		t.Errorf("results: -want +got:\n%s", diff)
	}
	for _, c := range rsp.GetConditions() {
		if c.GetType() == v1alpha1.ConditionAllowed && c.GetStatus() != fnv1.Status_STATUS_CONDITION_FALSE {
			t.Errorf("%s = %s, want False while the creation waits", c.GetType(), c.GetStatus())
		}
	}

	// Later the XR is Ready (Crossplane's Ready needs no cloud resource of
	// a gate that never opened) with the instance composed and never
	// created in the cloud: the XR's creation does not end while it waits.
	ready := obj(t, "apiVersion: example.com/v1alpha1\nkind: XDatabase\nmetadata: {name: db, uid: 0d0b0e0f-0000-4000-8000-000000000001, generation: 1}\nspec: {size: large}\n"+
		"status: {conditions: [{type: Synced, status: 'True'}, {type: Ready, status: 'True'}]}\n")
	observedRDS := obj(t, rds("db.t3.small", "  annotations: {crossplane.io/composition-resource-name: rds}"))
	rsp, err = newTestFunction().RunFunction(context.Background(), newRequest(t, ready, observedRDS, obj(t, rds("db.t3.small", "")), policy))
	if err != nil {
		t.Fatal(err)
	}
	waits := false
	for _, r := range rsp.GetResults() {
		waits = waits || strings.Contains(r.GetMessage(), "resource rds (RDSInstance db-rds): withheld Create")
	}
	if !waits {
		t.Errorf("no Result names the instance whose creation waits: %v", rsp.GetResults())
	}
	for _, c := range rsp.GetConditions() {
		if c.GetType() == v1alpha1.ConditionCreated && c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE {
			t.Errorf("%s = True (%s) while the instance's creation waits behind a closed gate", c.GetType(), c.GetMessage())
		}
	}

	cases := map[string]struct {
		reason   string
		ch       change
		observed map[string]any
		have     []allowance.Allowance
		policies []string
		want     bool
	}{
		"CreatedNow":         {reason: "Composed now with a closed gate.", ch: change{create: true}, policies: []string{"Observe", "LateInitialize"}, want: true},
		"CreateOpen":         {reason: "Its gate opens Create.", ch: change{create: true}, policies: []string{"Observe", "Create", "LateInitialize"}},
		"Held":               {reason: "Propagation control holds it, and says so.", ch: change{create: true, held: []mutation.Mutation{{Path: "spec"}}}, policies: []string{"Observe", "LateInitialize"}},
		"NeverCreated":       {reason: "Composed earlier, never created by its provider, not Ready.", observed: map[string]any{"metadata": map[string]any{"name": "x"}}, policies: []string{"Observe", "LateInitialize"}, want: true},
		"CreatedInTheCloud":  {reason: "Its provider recorded the creation.", observed: map[string]any{"metadata": map[string]any{"name": "x", "annotations": map[string]any{annotationExternalCreateSucceeded: "t"}}}, policies: []string{"Observe", "LateInitialize"}},
		"ReadyWithoutRecord": {reason: "Ready (imported, observed) though nothing recorded a creation.", observed: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}, policies: []string{"Observe", "LateInitialize"}},
		"PendingCreate": {reason: "Its creation is held back as a pending allowance.", observed: map[string]any{"metadata": map[string]any{"name": "x"}},
			have: []allowance.Allowance{{Relation: v1alpha1.RelationExternal, Verbs: []string{v1alpha1.VerbCreate}, Pending: map[string]string{"spec": allowance.Absent}}}, policies: []string{"Observe", "LateInitialize"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := shutAtCreation(tc.ch, tc.observed, tc.have, tc.policies); got != tc.want {
				t.Errorf("%s\nshutAtCreation(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

// TestUnmanagedContent: a kind without a spec (a Secret holds data) is
// compared, withheld and kept by its top-level fields: an uncaused change
// of its data keeps the observed value, and a Secret the pipeline drops is
// kept with its data, which Crossplane's apply would otherwise remove.
func TestUnmanagedContent(t *testing.T) {
	policy := xdatabasePolicy(`  rules:
  - trigger: spec.password
    policies:
    - target: {apiVersion: v1, resource: secrets}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: data.password, verbs: [Mutate]}
`)
	secret := func(password string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db-conn", "namespace": "default"},
			"type": "Opaque", "data": map[string]any{"password": password, "user": "YWRtaW4="}}
	}
	allowed := allowance.Allowance{
		Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIVersion: "v1", Resource: "secrets"},
		Verbs: []string{v1alpha1.VerbUpdate}, Generation: 2, Initiator: "alice",
		Mutations: []v1alpha1.MutationBound{{JSONPath: "data.password", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
		Trace:     allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 2, Field: "spec.password", User: "alice", Timestamp: "2026-11-22T11:59:01Z"}},
	}
	cases := map[string]struct {
		reason   string
		xrAnn    map[string]string
		desired  map[string]any // nil: the pipeline drops the Secret
		want     map[string]any
		warnings []string
	}{
		"Withheld": {reason: "No allowance covers the new password: the observed one is kept, the rest of the Secret as desired.",
			desired: secret("bmV3"), want: map[string]any{"password": "b2xk", "user": "YWRtaW4="},
			warnings: []string{"resource app (Secret db-conn): withheld Mutate data.password: no unconsumed allowance on XDatabase/db grants Update of secrets; policies: xdatabase-policy"}},
		"Permitted": {reason: "An XR allowance for data.password lets it through.",
			xrAnn:   map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{allowed})},
			desired: secret("bmV3"), want: map[string]any{"password": "bmV3", "user": "YWRtaW4="}},
		"DroppedKeepsData": {reason: "A dropped Secret no allowance lets go is kept with its data.",
			want:     map[string]any{"password": "b2xk", "user": "YWRtaW4="},
			warnings: []string{"resource app (Secret db-conn): withheld Delete: no unconsumed allowance on XDatabase/db grants Delete of secrets; policies: xdatabase-policy"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, xr(t, 2, 1, tc.xrAnn), nil, nil, policy)
			req.Observed.Resources = map[string]*fnv1.Resource{"app": {Resource: mustStruct(t, secret("b2xk"))}}
			if tc.desired != nil {
				req.Desired.Resources["app"] = &fnv1.Resource{Resource: mustStruct(t, tc.desired), Ready: fnv1.Ready_READY_TRUE}
			}
			rsp, err := newTestFunction().RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := rsp.GetDesired().GetResources()["app"].GetResource().AsMap()
			if diff := cmp.Diff(tc.want, got["data"]); diff != "" {
				t.Errorf("%s\ndata: -want +got:\n%s", tc.reason, diff)
			}
			if _, ok := got["spec"]; ok {
				t.Errorf("%s\nthe Secret got a spec, which a real API server refuses", tc.reason)
			}
			var ws []string
			for _, r := range rsp.GetResults() {
				ws = append(ws, r.GetMessage())
			}
			if diff := cmp.Diff(tc.warnings, ws); diff != "" {
				t.Errorf("%s\nresults: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
