package compose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// created is the condition the function keeps on an XR that has been Ready.
var created = &fnv1.Condition{Type: v1alpha1.ConditionCreated, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonCreated,
	Message: ptr("the XR was Ready with nothing left to add; what the pipeline adds from now on is a change that needs a cause"), Target: fnv1.Target_TARGET_COMPOSITE.Enum()}

// restricted is the condition on an XR whose policies name every managed
// kind it composes.
var restricted = &fnv1.Condition{Type: v1alpha1.ConditionRestricted, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonAllRestricted, Target: fnv1.Target_TARGET_COMPOSITE.Enum()}

const (
	xrdb = `apiVersion: example.com/v1alpha1
kind: XDatabase
metadata:
  name: db
  uid: 0d0b0e0f-0000-4000-8000-000000000001
  generation: %GEN%
  annotations: %ANN%
spec:
  size: large
  compositionRevisionRef: {name: xdatabases-aws-1}
status:
  conditions:
  - {type: Synced, status: "True", reason: ReconcileSuccess, observedGeneration: %OBS%}
  - {type: Ready, status: "True", reason: Available}
`
	policyDB = `apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: xdatabase-policy, uid: p-1, generation: 1}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XDatabase}
  initializing:
    policies:
    - target: {apiGroup: rds.aws.crossplane.io, apiVersion: v1alpha1, resource: rdsinstances}
      relation: ControllerChild
      verbs: [Create]
    - target: {external: {kind: RDSInstance}}
      relation: External
      verbs: [Create]
  rules:
  - trigger: spec.size
    policies:
    - target: {apiGroup: rds.aws.crossplane.io, apiVersion: v1alpha1, resource: rdsinstances}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: spec.forProvider.instanceClass, verbs: [Mutate]}
    - target: {external: {provider: provider-aws, kind: RDSInstance}}
      relation: External
      verbs: [Update]
`
	// The allowances admission leaves on the XR for a change of spec.size at
	// generation 2, traced Claim -> XR.
	xrAllowances = `[{"relation":"ControllerChild","target":{"apiGroup":"rds.aws.crossplane.io","apiVersion":"v1alpha1","resource":"rdsinstances"},"verbs":["Update"],"mutations":[{"jsonPath":"spec.forProvider.instanceClass","verbs":["Mutate"]}],"generation":2,"initiator":"hans@example.com","trace":[{"apiVersion":"example.com/v1alpha1","kind":"DatabaseClaim","name":"db","generation":4,"field":"spec.size","user":"hans@example.com","timestamp":"2026-11-22T11:59:00Z"},{"apiVersion":"example.com/v1alpha1","kind":"XDatabase","name":"db","generation":2,"field":"spec.size","user":"system:serviceaccount:crossplane-system:crossplane","timestamp":"2026-11-22T11:59:01Z"}]},` +
		`{"relation":"External","target":{"external":{"kind":"RDSInstance","provider":"provider-aws"}},"verbs":["Update"],"generation":2,"initiator":"hans@example.com","trace":[{"apiVersion":"example.com/v1alpha1","kind":"DatabaseClaim","name":"db","generation":4,"field":"spec.size","user":"hans@example.com","timestamp":"2026-11-22T11:59:00Z"},{"apiVersion":"example.com/v1alpha1","kind":"XDatabase","name":"db","generation":2,"field":"spec.size","user":"system:serviceaccount:crossplane-system:crossplane","timestamp":"2026-11-22T11:59:01Z"}]}]`
)

// obj builds a struct from YAML, failing the test on bad fixtures.
func obj(t testing.TB, y string) *structpb.Struct {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatalf("bad fixture: %v\n%s", err, y)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return s
}

func xr(t testing.TB, gen, observed int, annotations map[string]string) *structpb.Struct {
	t.Helper()
	ann := "{}"
	if len(annotations) > 0 {
		b, _ := yaml.Marshal(annotations)
		ann = "\n" + indent(string(b), "    ")
	}
	y := strings.NewReplacer("%GEN%", itoa(gen), "%OBS%", itoa(observed), "%ANN%", ann).Replace(xrdb)
	return obj(t, y)
}

// xrRecorded is xr with a KausalityComposed condition holding rec.
func xrRecorded(t testing.TB, gen, observed int, annotations map[string]string, rec allowance.Composed) *structpb.Struct {
	t.Helper()
	m := xr(t, gen, observed, annotations).AsMap()
	st, _ := m["status"].(map[string]any)
	cs, _ := st["conditions"].([]any)
	st["conditions"] = append(cs, map[string]any{"type": v1alpha1.ConditionComposed, "status": "True", "reason": ReasonComposed, "message": rec.String()})
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// composedCond is the KausalityComposed condition the function answers
// with for rec.
func composedCond(rec allowance.Composed) *fnv1.Condition {
	return &fnv1.Condition{Type: v1alpha1.ConditionComposed, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonComposed,
		Message: ptr(rec.String()), Target: fnv1.Target_TARGET_COMPOSITE.Enum()}
}

// withLeftAsStored is ann with kausality.io/left-as-stored s, or without
// it for "".
func withLeftAsStored(ann map[string]string, s string) map[string]string {
	if s != "" {
		ann[v1alpha1.AnnotationLeftAsStored] = s
	}
	return ann
}

// withComposedGeneration is ann with kausality.io/composed-generation g,
// or without it for "".
func withComposedGeneration(ann map[string]string, g string) map[string]string {
	if g != "" {
		ann[v1alpha1.AnnotationComposedGeneration] = g
	}
	return ann
}

func itoa(i int) string { return strconv.Itoa(i) }

func indent(s, p string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = p + lines[i]
	}
	return strings.Join(lines, "\n")
}

// rds is a composed RDS instance as earlier steps desire it, or as observed.
func rds(class string, extra string) string {
	return `apiVersion: rds.aws.crossplane.io/v1alpha1
kind: RDSInstance
metadata:
  name: db-rds
` + extra + `
spec:
  forProvider:
    region: eu-central-1
    instanceClass: ` + class + "\n"
}

func appliedFor(t testing.TB, class string) string {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(rds(class, "")), &m); err != nil {
		t.Fatal(err)
	}
	return mutation.Record("spec", m["spec"], skipManaged).String()
}

// approvedBefore is the record of the leaves at paths of an RDSInstance of
// class: what an approval that changes them records as before.
func approvedBefore(t testing.TB, class string, paths ...string) string {
	t.Helper()
	rec, err := mutation.ParseApplied(appliedFor(t, class))
	if err != nil {
		t.Fatal(err)
	}
	out := mutation.Applied{}
	for _, p := range paths {
		out[p] = rec[p]
	}
	return out.String()
}

func observedRDS(t testing.TB, class string, gen, observedGen int, ann map[string]string, policies string) *structpb.Struct {
	t.Helper()
	// Its provider created it in the cloud, as crossplane-runtime records.
	ann = maps.Clone(ann)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[annotationExternalCreateSucceeded] = "2026-11-22T11:00:00Z"
	b, _ := yaml.Marshal(map[string]any{"annotations": ann, "generation": gen})
	y := rds(class, indent(string(b), "  ")) + "  managementPolicies: " + policies + "\nstatus:\n  conditions:\n  - {type: Synced, status: \"True\", reason: ReconcileSuccess, observedGeneration: " + itoa(observedGen) + "}\n"
	return obj(t, y)
}

func newRequest(t testing.TB, x *structpb.Struct, observed, desired *structpb.Struct, policies ...string) *fnv1.RunFunctionRequest {
	t.Helper()
	req := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "t"},
		Input:    obj(t, "apiVersion: kausality.fn.crossplane.io/v1beta1\nkind: Input\n"),
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: x}},
		Desired:  &fnv1.State{Resources: map[string]*fnv1.Resource{}},
		RequiredResources: map[string]*fnv1.Resources{
			RequirementPolicies: {},
			RequirementUpgrades: {},
		},
	}
	if observed != nil {
		req.Observed.Resources = map[string]*fnv1.Resource{"rds": {Resource: observed}}
	}
	if desired != nil {
		req.Desired.Resources["rds"] = &fnv1.Resource{Resource: desired, Ready: fnv1.Ready_READY_TRUE}
	}
	for _, p := range policies {
		req.RequiredResources[RequirementPolicies].Items = append(req.RequiredResources[RequirementPolicies].Items, &fnv1.Resource{Resource: obj(t, p)})
	}
	return req
}

// claimed is the XR with a Claim in Namespace prod.
func claimed(t testing.TB, x *structpb.Struct) *structpb.Struct {
	t.Helper()
	m := x.AsMap()
	m["spec"].(map[string]any)["claimRef"] = map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "DatabaseClaim", "namespace": "prod", "name": "db"}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inNamespace supplies the Namespace prod, with annotations, as Crossplane
// resolves the function's Namespace requirement.
func inNamespace(t testing.TB, req *fnv1.RunFunctionRequest, ann map[string]string) *fnv1.RunFunctionRequest {
	t.Helper()
	b, _ := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "prod", "annotations": ann}})
	req.RequiredResources[RequirementNamespace] = &fnv1.Resources{Items: []*fnv1.Resource{{Resource: obj(t, string(b))}}}
	return req
}

// namespaced is x in the Namespace prod, as a v2 XR and what it composes
// are.
func namespaced(t testing.TB, x *structpb.Struct) *structpb.Struct {
	t.Helper()
	m := x.AsMap()
	m["metadata"].(map[string]any)["namespace"] = "prod"
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRequirementsNamespace(t *testing.T) {
	want := wantRequirements()
	want.Resources[RequirementNamespace] = &fnv1.ResourceSelector{ApiVersion: "v1", Kind: "Namespace", Match: &fnv1.ResourceSelector_MatchName{MatchName: "prod"}}
	rsp, err := newTestFunction().RunFunction(context.Background(), newRequest(t, claimed(t, xr(t, 1, 1, nil)), nil, nil, policyDB))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, rsp.GetRequirements(), protocmp.Transform()); diff != "" {
		t.Errorf("A Claim's XR asks for the Claim's Namespace, whose mode and freeze apply: -want +got:\n%s", diff)
	}
}

func newTestFunction() *Function {
	f := NewFunction(logging.NewNopLogger(), Options{})
	f.now = func() time.Time { return testNow }
	return f
}

// desiredRDS returns the desired resource as the function should emit it.
func desiredRDS(t testing.TB, class string, ann map[string]string, policies string) *structpb.Struct {
	t.Helper()
	b, _ := yaml.Marshal(map[string]any{"annotations": ann, "labels": map[string]string{v1alpha1.LabelGated: "true"}})
	return obj(t, rds(class, indent(string(b), "  "))+"  managementPolicies: "+policies+"\n")
}

func TestRunFunction(t *testing.T) {
	claimXR := allowance.Trace{
		{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "db", Generation: 4, Field: "spec.size", User: "hans@example.com", Timestamp: "2026-11-22T11:59:00Z"},
		{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 2, Field: "spec.size", User: "system:serviceaccount:crossplane-system:crossplane", Timestamp: "2026-11-22T11:59:01Z"},
	}
	mrHop := allowance.Hop{APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-rds", Generation: 2, Field: "spec.forProvider.instanceClass", Timestamp: "2026-11-22T12:00:00Z"}
	fullTrace := append(append(allowance.Trace{}, claimXR...), mrHop)
	mrAllowance := []allowance.Allowance{{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "RDSInstance", "provider": "provider-aws"}},
		Verbs: []string{"Update"}, Generation: 2, Initiator: "hans@example.com", Trace: fullTrace,
		Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceClass", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
		// Pinned to the class let through: a stale run writing the old
		// class back is not shipped under it.
		Values: allowance.ValuesOf(map[string]any{"spec": map[string]any{"forProvider": map[string]any{"instanceClass": "db.t3.large"}}},
			[]mutation.Mutation{{Path: "spec.forProvider.instanceClass", Verb: v1alpha1.MutationMutate}}, nil),
	}}
	observedAnn := map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1"}

	type want struct {
		rsp *fnv1.RunFunctionResponse
	}
	// allowedWant is the answer letting the class change through, the
	// XR's record of the resources left as stored holding untouched.
	allowedWant := func(untouched []string) want {
		return want{rsp: &fnv1.RunFunctionResponse{
			Meta: &fnv1.ResponseMeta{Tag: "t", Ttl: durationpb.New(time.Minute)},
			Desired: &fnv1.State{Resources: map[string]*fnv1.Resource{"rds": {
				Ready: fnv1.Ready_READY_TRUE,
				Resource: desiredRDS(t, "db.t3.large", map[string]string{
					v1alpha1.AnnotationAllowances:          allowance.Format(mrAllowance),
					v1alpha1.AnnotationTrace:               allowance.FormatTrace(fullTrace),
					v1alpha1.AnnotationApplied:             appliedFor(t, "db.t3.large"),
					v1alpha1.AnnotationApproved:            appliedFor(t, "db.t3.large"),
					v1alpha1.AnnotationApprovedGeneration:  "2",
					v1alpha1.AnnotationApprovedBefore:      approvedBefore(t, "db.t3.small", "spec.forProvider.instanceClass"),
					v1alpha1.AnnotationPrevious:            `{"spec.forProvider.instanceClass":"db.t3.small"}`,
					v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
					v1alpha1.AnnotationComposedGeneration:  "2",
				}, "[Observe, Update, LateInitialize]"),
			}}},
			Conditions: []*fnv1.Condition{
				{Type: ConditionAnnotations, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonAnnotationsValid, Target: fnv1.Target_TARGET_COMPOSITE.Enum()},
				{Type: ConditionAllowed, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonAllAllowed, Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()},
				created,
				composedCond(allowance.Composed{Generation: 2, Untouched: untouched}),
				restricted,
			},
			Requirements: wantRequirements(),
		}}
	}
	// withoutRecord is w without the XR's KausalityComposed condition: the
	// run has nothing to record and the XR no record to keep.
	withoutRecord := func(w want) want {
		w.rsp.Conditions = slices.DeleteFunc(w.rsp.Conditions, func(c *fnv1.Condition) bool { return c.GetType() == v1alpha1.ConditionComposed })
		return w
	}
	// withheldWant is the answer withholding the class change: the
	// resource untouched, keeping its own record of the composed
	// generation (composedGen, "" for none), which the XR's record
	// completes.
	//
	// leftAsStored is the record the resource carries for the XR's,
	// "" for none; recorded the resources the XR's record names.
	withheldWant := func(composedGen, leftAsStored string, recorded ...string) want {
		return want{rsp: &fnv1.RunFunctionResponse{
			Meta: &fnv1.ResponseMeta{Tag: "t", Ttl: durationpb.New(WithheldTTL)},
			Desired: &fnv1.State{Resources: map[string]*fnv1.Resource{"rds": {
				Ready: fnv1.Ready_READY_TRUE,
				Resource: desiredRDS(t, "db.t3.small", withLeftAsStored(withComposedGeneration(map[string]string{
					v1alpha1.AnnotationAllowances:          "[]",
					v1alpha1.AnnotationTrace:               "[]",
					v1alpha1.AnnotationApplied:             appliedFor(t, "db.t3.small"),
					v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
				}, composedGen), leftAsStored), "[Observe, LateInitialize]"),
			}}},
			Results: []*fnv1.Result{{
				Severity: fnv1.Severity_SEVERITY_WARNING,
				Message:  "resource rds (RDSInstance db-rds): withheld Mutate spec.forProvider.instanceClass: no unconsumed allowance on XDatabase/db grants Update of rdsinstances; policies: xdatabase-policy",
				Target:   fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
			}},
			Conditions: []*fnv1.Condition{
				{Type: ConditionAnnotations, Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: ReasonAnnotationsValid, Target: fnv1.Target_TARGET_COMPOSITE.Enum()},
				{Type: ConditionAllowed, Status: fnv1.Status_STATUS_CONDITION_FALSE, Reason: ReasonWithheld, Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
					Message: ptr("resource rds (RDSInstance db-rds): withheld Mutate spec.forProvider.instanceClass: no unconsumed allowance on XDatabase/db grants Update of rdsinstances; policies: xdatabase-policy")},
				created,
				composedCond(allowance.Composed{Generation: 2, Untouched: recorded}),
				restricted,
			},
			Requirements: wantRequirements(),
		}}
	}
	type testCase struct {
		reason string
		req    *fnv1.RunFunctionRequest
		want   want
	}
	cases := map[string]testCase{
		"AllowedChange": {
			reason: "An unconsumed XR allowance for spec.size lets the instance class through, opens the gate for Update and traces Claim -> XR -> MR.",
			req: newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}),
				observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"),
				obj(t, rds("db.t3.large", "")), policyDB),
			want: withoutRecord(allowedWant(nil)),
		},
		"WithheldChange": {
			reason: "Without an allowance the instance class keeps its observed value, the gate stays read-only and a Warning names the field.",
			req: newRequest(t, xr(t, 2, 1, nil),
				observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"),
				obj(t, rds("db.t3.large", "")), policyDB),
			want: withoutRecord(withheldWant("", "")),
		},
	}
	// Crossplane marks an XR observed at the generation a concurrent write
	// (the claim controller syncing a Claim) raised while it composed the
	// previous one: the XR allowance of that generation still applies to a
	// resource not yet composed from it, and no longer to one that was.
	cases["ObservedBeforeComposed"] = testCase{
		reason: "An XR allowance of the XR's generation lets the change through although the XR reports that generation observed, while the resource was not yet composed from it.",
		req: newRequest(t, xr(t, 2, 2, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}),
			observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"),
			obj(t, rds("db.t3.large", "")), policyDB),
		want: cases["AllowedChange"].want,
	}
	composedAnn := maps.Clone(observedAnn)
	composedAnn[v1alpha1.AnnotationComposedGeneration] = "2"
	cases["AllowanceUsedUp"] = testCase{
		reason: "An XR allowance is used up for a resource already composed from its generation: the change is withheld.",
		req: newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}),
			observedRDS(t, "db.t3.small", 1, 1, composedAnn, "[Observe, LateInitialize]"),
			obj(t, rds("db.t3.large", "")), policyDB),
		want: withoutRecord(withheldWant("2", "")),
	}
	// A run that left the resource untouched at the XR's generation
	// recorded that on the XR, not on the resource: a later change of it at
	// the same generation (a Composition revision, a function upgrade) does
	// not ride on the allowance either.
	cases["AllowanceUsedUpByTheXRRecord"] = testCase{
		reason: "An XR allowance is used up for a resource the XR's KausalityComposed record says was left as stored at its generation, without a record of its own.",
		req: newRequest(t, xrRecorded(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}, allowance.Composed{Generation: 2, Untouched: []string{"rds"}}),
			observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"),
			obj(t, rds("db.t3.large", "")), policyDB),
		want: withheldWant("", `composed from generation 2; left as stored: ["rds"]`, "rds"),
	}
	cases["XRRecordOfOtherResources"] = testCase{
		reason: "The XR's record of other resources leaves the allowance to this one.",
		req: newRequest(t, xrRecorded(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}, allowance.Composed{Generation: 2, Untouched: []string{"logs"}}),
			observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"),
			obj(t, rds("db.t3.large", "")), policyDB),
		want: allowedWant([]string{"logs"}),
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := newTestFunction().RunFunction(context.Background(), tc.req)
			if err != nil {
				t.Fatalf("%s\nRunFunction(...): unexpected error %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.rsp, rsp, protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want rsp, +got rsp:\n%s", tc.reason, diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func wantRequirements() *fnv1.Requirements {
	return &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		RequirementPolicies:          selectAll("kausality.io/v1alpha1", "AllowancePolicy"),
		RequirementUpgrades:          selectAll("kausality.io/v1alpha1", "UpgradeAllowance"),
		RequirementFunctions:         selectAll("pkg.crossplane.io/v1", "Function"),
		RequirementFunctionRevisions: selectAll("pkg.crossplane.io/v1", "FunctionRevision"),
		RequirementRevision: {ApiVersion: "apiextensions.crossplane.io/v1", Kind: "CompositionRevision",
			Match: &fnv1.ResourceSelector_MatchName{MatchName: "xdatabases-aws-1"}},
	}}
}

// TestRunFunctionFailsClosed feeds bad or missing input and checks that
// nothing unallowed goes through, nothing is lost, and the XR says why.
func TestRunFunctionFailsClosed(t *testing.T) {
	observedAnn := map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1"}
	observed := func() *structpb.Struct {
		return observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]")
	}
	brokenPolicy := strings.Replace(policyDB, "  - trigger: spec.size\n", "  - trigger: spec.size\n    conditions: [\"object.spec.size ==\"]\n", 1)
	unresolved := newRequest(t, xr(t, 2, 1, nil), observed(), obj(t, rds("db.t3.large", "")), policyDB)
	unresolved.RequiredResources = nil
	logMode := newRequest(t, xr(t, 2, 1, nil), observed(), obj(t, rds("db.t3.large", "")), policyDB)
	logMode.Input = obj(t, "apiVersion: kausality.fn.crossplane.io/v1beta1\nkind: Input\nmode: Log\n")
	dropped := newRequest(t, xr(t, 2, 1, nil), observed(), nil, policyDB)
	nsLog := inNamespace(t, newRequest(t, claimed(t, xr(t, 2, 1, nil)), observed(), obj(t, rds("db.t3.large", "")), policyDB),
		map[string]string{v1alpha1.AnnotationMode: "Log"})
	nsFrozen := inNamespace(t, newRequest(t, claimed(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances})), observed(), obj(t, rds("db.t3.large", "")), policyDB),
		map[string]string{v1alpha1.AnnotationFreeze: `{"user":"carol@example.com","message":"incident 42","at":"2026-11-22T11:00:00Z"}`})

	cases := map[string]struct {
		reason        string
		req           *fnv1.RunFunctionRequest
		wantClass     string // instanceClass of the emitted rds; "" when rds must be absent
		wantGate      []any
		wantAllowed   fnv1.Status
		wantValid     fnv1.Status
		wantInMessage []string // substrings of the joined Warning results
	}{
		"MalformedXRAllowances": {
			reason:    "A malformed allowances annotation is no allowance: the change is withheld and the annotation is named.",
			req:       newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: "[{not json"}), observed(), obj(t, rds("db.t3.large", "")), policyDB),
			wantClass: "db.t3.small", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_FALSE, wantValid: fnv1.Status_STATUS_CONDITION_FALSE,
			wantInMessage: []string{"cannot parse annotation kausality.io/allowances on XDatabase/db", "withheld Mutate spec.forProvider.instanceClass"},
		},
		"HugeXRAllowances": {
			reason:    "An annotation over the size limit is rejected like a malformed one.",
			req:       newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: "[" + strings.Repeat(" ", allowance.MaxAnnotationBytes) + "]"}), observed(), obj(t, rds("db.t3.large", "")), policyDB),
			wantClass: "db.t3.small", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_FALSE, wantValid: fnv1.Status_STATUS_CONDITION_FALSE,
			wantInMessage: []string{"kausality.io/allowances", "withheld Mutate spec.forProvider.instanceClass"},
		},
		"PoliciesUnresolved": {
			reason:    "Before Crossplane resolves the policy requirement every kind counts as restricted; only an XR allowance could let a change through.",
			req:       unresolved,
			wantClass: "db.t3.small", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_FALSE, wantValid: fnv1.Status_STATUS_CONDITION_TRUE,
			wantInMessage: []string{"AllowancePolicies are not known"},
		},
		"BrokenPolicy": {
			reason:    "A policy whose CEL does not compile makes everything restricted and is named with its expression.",
			req:       newRequest(t, xr(t, 2, 1, nil), observed(), obj(t, rds("db.t3.large", "")), brokenPolicy),
			wantClass: "db.t3.small", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_FALSE, wantValid: fnv1.Status_STATUS_CONDITION_FALSE,
			wantInMessage: []string{`AllowancePolicy xdatabase-policy is invalid: spec.rules[0].conditions[0] "object.spec.size =="`},
		},
		"DroppedResource": {
			reason:    "A composed resource the pipeline drops is kept as observed with a closed gate unless Delete is allowed.",
			req:       dropped,
			wantClass: "db.t3.small", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_FALSE, wantValid: fnv1.Status_STATUS_CONDITION_TRUE,
			wantInMessage: []string{"resource rds (RDSInstance db-rds): withheld Delete"},
		},
		"ModeOnXRIgnored": {
			reason:    "kausality.io/mode on the XR (Crossplane copies it from the Claim) does not switch enforcement off; the XR says it is ignored.",
			req:       newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationMode: "Log"}), observed(), obj(t, rds("db.t3.large", "")), policyDB),
			wantClass: "db.t3.small", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_FALSE, wantValid: fnv1.Status_STATUS_CONDITION_FALSE,
			wantInMessage: []string{`annotation kausality.io/mode="Log" on XDatabase db is ignored: only a Namespace may set the mode`, "withheld Mutate spec.forProvider.instanceClass"},
		},
		"NamespaceLogMode": {
			reason:    "The Claim's Namespace says Log: the change goes through and is reported.",
			req:       nsLog,
			wantClass: "db.t3.large", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_TRUE, wantValid: fnv1.Status_STATUS_CONDITION_TRUE,
			wantInMessage: []string{"(Log mode, let through)", "spec.forProvider.instanceClass"},
		},
		"NamespaceFrozen": {
			reason:    "A freeze on the Claim's Namespace keeps the gate closed under an allowed change.",
			req:       nsFrozen,
			wantClass: "db.t3.large", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_FALSE, wantValid: fnv1.Status_STATUS_CONDITION_TRUE,
			wantInMessage: []string{"is frozen by carol@example.com on Namespace prod"},
		},
		"LogMode": {
			reason:    "In Log mode the change goes through and is reported as what would have been withheld.",
			req:       logMode,
			wantClass: "db.t3.large", wantGate: []any{"Observe", "LateInitialize"},
			wantAllowed: fnv1.Status_STATUS_CONDITION_TRUE, wantValid: fnv1.Status_STATUS_CONDITION_TRUE,
			wantInMessage: []string{"(Log mode, let through)", "spec.forProvider.instanceClass"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := newTestFunction().RunFunction(context.Background(), tc.req)
			if err != nil {
				t.Fatalf("%s\nRunFunction(...): bad input must not be a gRPC error, got %v", tc.reason, err)
			}
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					t.Fatalf("%s\nRunFunction(...): fatal result %q", tc.reason, r.GetMessage())
				}
			}
			res := rsp.GetDesired().GetResources()["rds"].GetResource().AsMap()
			spec, _ := res["spec"].(map[string]any)
			fp, _ := spec["forProvider"].(map[string]any)
			if got := fp["instanceClass"]; got != tc.wantClass {
				t.Errorf("%s\ninstanceClass = %v, want %v", tc.reason, got, tc.wantClass)
			}
			if diff := cmp.Diff(tc.wantGate, spec["managementPolicies"]); diff != "" {
				t.Errorf("%s\nmanagementPolicies: -want +got:\n%s", tc.reason, diff)
			}
			status := map[string]fnv1.Status{}
			for _, c := range rsp.GetConditions() {
				status[c.GetType()] = c.GetStatus()
			}
			if status[ConditionAllowed] != tc.wantAllowed || status[ConditionAnnotations] != tc.wantValid {
				t.Errorf("%s\nconditions %s=%s %s=%s, want %s and %s", tc.reason, ConditionAllowed, status[ConditionAllowed], ConditionAnnotations, status[ConditionAnnotations], tc.wantAllowed, tc.wantValid)
			}
			var msgs []string
			for _, r := range rsp.GetResults() {
				msgs = append(msgs, r.GetMessage())
			}
			joined := strings.Join(msgs, "\n")
			for _, w := range tc.wantInMessage {
				if !strings.Contains(joined, w) {
					t.Errorf("%s\nresults %q do not contain %q", tc.reason, joined, w)
				}
			}
		})
	}
}

// TestAuditMode: in a Namespace in Audit mode, or under policies that all
// say Audit, the function withholds nothing and gates nothing: the change
// goes through, the resource gets neither the gated label nor a gate (the
// Composition's management policies stand), and the XR names what Enforce
// would have withheld. A policy that enforces for the same kind wins.
func TestAuditMode(t *testing.T) {
	observedAnn := map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1"}
	observed := func() *structpb.Struct {
		return observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]")
	}
	auditPolicy := strings.Replace(policyDB, "spec:\n", "spec:\n  mode: Audit\n", 1)
	enforcing := strings.NewReplacer("name: xdatabase-policy, uid: p-1", "name: other-policy, uid: p-2", "kind: XDatabase", "kind: XOther").Replace(policyDB)
	cases := map[string]struct {
		reason     string
		req        *fnv1.RunFunctionRequest
		wantClass  string
		wantGate   any // nil: none
		wantGated  bool
		wantReason string
	}{
		"NamespaceAudits": {
			reason: "The v2 XR's Namespace says Audit: its resources, in that Namespace, are audited, although the pipeline's desired resource names no Namespace (Crossplane sets it).",
			req: inNamespace(t, newRequest(t, namespaced(t, xr(t, 2, 1, nil)), namespaced(t, observed()), obj(t, rds("db.t3.large", "")), policyDB),
				map[string]string{v1alpha1.AnnotationMode: "Audit"}),
			wantClass: "db.t3.large", wantReason: ReasonAuditOnly,
		},
		"ClusterScopedResourceStaysGated": {
			reason: "A legacy Claim's Namespace says Audit: the XR reports in Audit, but its cluster-scoped resources answer to no Namespace (admission cannot trust one for them), so their gates stay closed, as in Log mode.",
			req: inNamespace(t, newRequest(t, claimed(t, xr(t, 2, 1, nil)), observed(), obj(t, rds("db.t3.large", "")), policyDB),
				map[string]string{v1alpha1.AnnotationMode: "Audit"}),
			wantClass: "db.t3.large", wantGate: []any{"Observe", "LateInitialize"}, wantGated: true, wantReason: ReasonAuditOnly,
		},
		"PolicyAudits": {
			reason:    "The only policy says Audit.",
			req:       newRequest(t, xr(t, 2, 1, nil), observed(), obj(t, rds("db.t3.large", "")), auditPolicy),
			wantClass: "db.t3.large", wantReason: ReasonAuditOnly,
		},
		"AnotherPolicyEnforces": {
			reason:    "Another kind's policy restricts RDSInstances in Enforce: they stay gated, so the change is let through the function (the XR's policy says Audit) but the gate stays closed.",
			req:       newRequest(t, xr(t, 2, 1, nil), observed(), obj(t, rds("db.t3.large", "")), auditPolicy, enforcing),
			wantClass: "db.t3.large", wantGate: []any{"Observe", "LateInitialize"}, wantGated: true, wantReason: ReasonAuditOnly,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := newTestFunction().RunFunction(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			res := rsp.GetDesired().GetResources()["rds"].GetResource().AsMap()
			u := unstructured.Unstructured{Object: res}
			if got, _, _ := unstructured.NestedString(res, "spec", "forProvider", "instanceClass"); got != tc.wantClass {
				t.Errorf("%s\ninstanceClass = %v, want %v", tc.reason, got, tc.wantClass)
			}
			spec, _ := res["spec"].(map[string]any)
			if diff := cmp.Diff(tc.wantGate, spec["managementPolicies"]); diff != "" {
				t.Errorf("%s\nmanagementPolicies: -want +got:\n%s", tc.reason, diff)
			}
			if got := u.GetLabels()[v1alpha1.LabelGated] == "true"; got != tc.wantGated {
				t.Errorf("%s\ngated label: %t, want %t", tc.reason, got, tc.wantGated)
			}
			if u.GetAnnotations()[v1alpha1.AnnotationTrace] == "" {
				t.Errorf("%s\nno trace: an audited resource is still traced", tc.reason)
			}
			var reason string
			for _, c := range rsp.GetConditions() {
				if c.GetType() == ConditionAllowed {
					reason = c.GetReason()
					if c.GetStatus() != fnv1.Status_STATUS_CONDITION_TRUE || !strings.Contains(c.GetMessage(), "spec.forProvider.instanceClass") {
						t.Errorf("%s\n%s = %s %q, want True naming what Enforce would withhold", tc.reason, ConditionAllowed, c.GetStatus(), c.GetMessage())
					}
				}
			}
			if reason != tc.wantReason {
				t.Errorf("%s\n%s reason = %q, want %q", tc.reason, ConditionAllowed, reason, tc.wantReason)
			}
		})
	}
}

// TestDefaultsAreNotPending: the API server fills in fields the pipeline
// never sets (a provider's CRD defaults spec.deletionPolicy). Crossplane's
// apply leaves them, so they are no pending change: the permitted change
// opens the gate and nothing is reported withheld.
func TestDefaultsAreNotPending(t *testing.T) {
	observed := observedRDS(t, "db.t3.small", 1, 1, map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
	}, "[Observe, LateInitialize]")
	observed.Fields["spec"].GetStructValue().Fields["deletionPolicy"] = structpb.NewStringValue("Delete")
	req := newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}), observed, obj(t, rds("db.t3.large", "")), policyDB)
	rsp, err := newTestFunction().RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rsp.GetResults() {
		if strings.Contains(r.GetMessage(), "open gate") {
			t.Errorf("result %q: a field the API server defaulted is reported pending", r.GetMessage())
		}
	}
	mp := rsp.GetDesired().GetResources()["rds"].GetResource().GetFields()["spec"].GetStructValue().GetFields()["managementPolicies"].GetListValue().AsSlice()
	if fmt.Sprint(mp) != "[Observe Update LateInitialize]" {
		t.Errorf("gate = %v, want [Observe Update LateInitialize]", mp)
	}
}

// TestRunFunctionRecovers: a panic while deciding one XR answers that XR
// with a Fatal result, on which Crossplane applies nothing, and leaves the
// server serving the next request.
func TestRunFunctionRecovers(t *testing.T) {
	f := newTestFunction()
	f.now = func() time.Time { panic("boom") }
	req := newRequest(t, xr(t, 2, 1, nil), observedRDS(t, "db.t3.small", 1, 1, nil, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
	rsp, err := f.RunFunction(context.Background(), req)
	if err != nil {
		t.Fatalf("RunFunction(...): %v, want a Fatal result", err)
	}
	want := []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_FATAL, Message: "function-kausality failed deciding XDatabase/db (boom); nothing of this run is applied, and the next run tries again", Target: fnv1.Target_TARGET_COMPOSITE.Enum()}}
	if diff := cmp.Diff(want, rsp.GetResults(), protocmp.Transform()); diff != "" {
		t.Errorf("results: -want +got:\n%s", diff)
	}
	f.now = func() time.Time { return testNow }
	if rsp, err := f.RunFunction(context.Background(), req); err != nil || len(rsp.GetDesired().GetResources()) != 1 {
		t.Errorf("the next run after a panic: %v, %d resources; want it decided", err, len(rsp.GetDesired().GetResources()))
	}
}
