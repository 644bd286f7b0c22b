package compose

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

const ptPackage = "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform"

// ptUpgrade lets function-patch-and-transform's v0.10 patch releases change
// the instance class and create RDS instances, and opens the gate for both.
const ptUpgrade = `apiVersion: kausality.io/v1alpha1
kind: UpgradeAllowance
metadata: {name: pt-0-10, generation: 3}
spec:
  functions: [{name: function-patch-and-transform, version: "v0.10.*"}]
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, apiVersion: v1alpha1, resource: rdsinstances}
    relation: ControllerChild
    verbs: [Update, Create]
    mutations: [{jsonPath: spec.forProvider.instanceClass, verbs: [Mutate]}]
  - target: {external: {provider: provider-aws, kind: RDSInstance}}
    relation: External
    verbs: [Update, Create]
`

// withFunctions supplies Functions at the given package versions, as
// Crossplane resolves the function's Function requirement; with pipeline,
// the CompositionRevision names those steps.
func withFunctions(t testing.TB, req *fnv1.RunFunctionRequest, versions map[string]string, pipeline ...string) *fnv1.RunFunctionRequest {
	t.Helper()
	items := &fnv1.Resources{}
	for name, v := range versions {
		items.Items = append(items.Items, &fnv1.Resource{Resource: obj(t, "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: "+name+"}\nspec: {package: \""+v+"\"}\n")})
	}
	req.RequiredResources[RequirementFunctions] = items
	if len(pipeline) > 0 {
		steps := make([]any, len(pipeline))
		for i, p := range pipeline {
			steps[i] = map[string]any{"step": p, "functionRef": map[string]any{"name": p}}
		}
		b, _ := yaml.Marshal(map[string]any{"apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositionRevision",
			"metadata": map[string]any{"name": "xdatabases-aws-1"}, "spec": map[string]any{"revision": 1, "pipeline": steps}})
		req.RequiredResources[RequirementRevision] = &fnv1.Resources{Items: []*fnv1.Resource{{Resource: obj(t, string(b))}}}
	}
	return req
}

// rendered is what one run made of the composed resource name.
type rendered struct {
	obj      *unstructured.Unstructured
	messages []string
}

func (r rendered) class() string {
	s, _ := fieldpath.Pave(r.obj.Object).GetString("spec.forProvider.instanceClass")
	return s
}

func (r rendered) policies() []string {
	ps, _ := fieldpath.Pave(r.obj.Object).GetStringArray("spec.managementPolicies")
	return ps
}

func runOnce(t *testing.T, req *fnv1.RunFunctionRequest, name string) rendered {
	t.Helper()
	rsp, err := newTestFunction().RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out rendered
	for _, r := range rsp.GetResults() {
		out.messages = append(out.messages, r.GetMessage())
	}
	if d, ok := rsp.GetDesired().GetResources()[name]; ok {
		out.obj = &unstructured.Unstructured{Object: d.GetResource().AsMap()}
	}
	return out
}

func TestFunctionUpgrade(t *testing.T) {
	old := map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.7", "function-kausality": "xpkg.crossplane.io/kausality-io/function-kausality:v0.1.0"}
	observedAnn := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationApprovedGeneration: "1",
		v1alpha1.AnnotationFunctionVersions: `{"function-kausality":"xpkg.crossplane.io/kausality-io/function-kausality:v0.1.0","function-patch-and-transform":"` + ptPackage + `:v0.10.7"}`,
	}
	// The new build of function-patch-and-transform composes db.t3.large
	// where the old one composed db.t3.small; nobody changed the XR.
	upgraded := func(t *testing.T, version string, upgrades ...string) *fnv1.RunFunctionRequest {
		req := newRequest(t, xr(t, 1, 1, nil), observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.large", "")), policyDB)
		for _, u := range upgrades {
			req.RequiredResources[RequirementUpgrades].Items = append(req.RequiredResources[RequirementUpgrades].Items, &fnv1.Resource{Resource: obj(t, u)})
		}
		versions := map[string]string{"function-patch-and-transform": ptPackage + ":" + version, "function-kausality": old["function-kausality"]}
		return withFunctions(t, req, versions)
	}
	const change = "the logic changed (function-patch-and-transform v0.10.7 → v0.10.8)"

	t.Run("WithoutUpgradeAllowance", func(t *testing.T) {
		got := runOnce(t, upgraded(t, "v0.10.8"), "rds")
		if got.class() != "db.t3.small" || slices.Contains(got.policies(), "Update") {
			t.Errorf("the new build's change went through: class %s, gate %v", got.class(), got.policies())
		}
		if !slices.ContainsFunc(got.messages, func(m string) bool { return strings.Contains(m, change) }) {
			t.Errorf("no message names the upgrade %q: %v", change, got.messages)
		}
		if v := got.obj.GetAnnotations()[v1alpha1.AnnotationFunctionVersions]; v != observedAnn[v1alpha1.AnnotationFunctionVersions] {
			t.Errorf("the withheld resource's record moved to the new build, so a later UpgradeAllowance would not apply: %s", v)
		}
	})
	t.Run("UpgradeAllowanceForAnotherMinor", func(t *testing.T) {
		got := runOnce(t, upgraded(t, "v0.11.0", ptUpgrade), "rds")
		if got.class() != "db.t3.small" || slices.Contains(got.policies(), "Update") {
			t.Errorf("v0.10.* let v0.11.0 through: class %s, gate %v", got.class(), got.policies())
		}
	})
	t.Run("UpgradeAllowanceForThePatchRelease", func(t *testing.T) {
		got := runOnce(t, upgraded(t, "v0.10.8", ptUpgrade), "rds")
		if got.class() != "db.t3.large" || !slices.Contains(got.policies(), "Update") {
			t.Fatalf("the permitted upgrade did not go through: class %s, gate %v, messages %v", got.class(), got.policies(), got.messages)
		}
		as, err := allowance.Parse(got.obj.GetAnnotations()[v1alpha1.AnnotationAllowances])
		if err != nil || len(as) != 1 || as[0].Trace[0].Kind != v1alpha1.UpgradeAllowanceKind || as[0].Trace[0].Name != "pt-0-10" {
			t.Errorf("the External allowance is not traced to the UpgradeAllowance: %v %v", as, err)
		}
		want := `{"function-kausality":"xpkg.crossplane.io/kausality-io/function-kausality:v0.1.0","function-patch-and-transform":"` + ptPackage + `:v0.10.8"}`
		if v := got.obj.GetAnnotations()[v1alpha1.AnnotationFunctionVersions]; v != want {
			t.Errorf("function-versions = %s, want %s: the resource is upgraded once", v, want)
		}
	})
	t.Run("FunctionsUnknownKeepTheRecord", func(t *testing.T) {
		// Crossplane (or crossplane render) supplied no Functions: the
		// resource keeps the record it has, or the next upgrade would pass
		// unnoticed.
		req := newRequest(t, xr(t, 1, 1, nil), observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.small", "")), policyDB)
		got := runOnce(t, req, "rds")
		if v := got.obj.GetAnnotations()[v1alpha1.AnnotationFunctionVersions]; v != observedAnn[v1alpha1.AnnotationFunctionVersions] {
			t.Errorf("function-versions = %q, want the observed record kept", v)
		}
	})
	t.Run("StepsOutsideThePipelineDoNotCount", func(t *testing.T) {
		// function-patch-and-transform is not a step of this revision: its
		// new version is no logic change here, so the message is the plain
		// one.
		req := withFunctions(t, upgraded(t, "v0.10.8"), map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8", "function-kausality": old["function-kausality"]}, "function-kausality")
		got := runOnce(t, req, "rds")
		if got.class() != "db.t3.small" || slices.ContainsFunc(got.messages, func(m string) bool { return strings.Contains(m, "logic changed") }) {
			t.Errorf("class %s, messages %v", got.class(), got.messages)
		}
	})
}

func TestUpgradeAddsResource(t *testing.T) {
	observedAnn := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationFunctionVersions: `{"function-patch-and-transform":"` + ptPackage + `:v0.10.7"}`,
	}
	// The new build adds a replica: a creation no XR allowance covers.
	added := func(t *testing.T, upgrades ...string) *fnv1.RunFunctionRequest {
		req := newRequest(t, xr(t, 1, 1, nil), observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.small", "")), policyDB)
		req.Desired.Resources["replica"] = &fnv1.Resource{Resource: obj(t, strings.Replace(rds("db.t3.small", ""), "name: db-rds", "name: db-replica", 1))}
		for _, u := range upgrades {
			req.RequiredResources[RequirementUpgrades].Items = append(req.RequiredResources[RequirementUpgrades].Items, &fnv1.Resource{Resource: obj(t, u)})
		}
		return withFunctions(t, req, map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8"})
	}
	if got := runOnce(t, added(t), "replica"); got.obj != nil {
		t.Errorf("the new build created a replica without an UpgradeAllowance")
	} else if !slices.ContainsFunc(got.messages, func(m string) bool {
		return strings.Contains(m, "withheld Create") && strings.Contains(m, "function-patch-and-transform v0.10.7 → v0.10.8")
	}) {
		t.Errorf("no message names the withheld creation and the upgrade: %v", got.messages)
	}
	got := runOnce(t, added(t, ptUpgrade), "replica")
	if got.obj == nil {
		t.Fatalf("an UpgradeAllowance granting Create did not let the replica be created: %v", got.messages)
	}
	as, err := allowance.Parse(got.obj.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil || !slices.ContainsFunc(as, func(a allowance.Allowance) bool {
		return a.HasVerb(v1alpha1.VerbCreate) && a.Trace[0].Kind == v1alpha1.UpgradeAllowanceKind
	}) || !slices.Contains(got.policies(), "Create") {
		t.Errorf("the replica's Create gate is not opened by the UpgradeAllowance: %v %v, gate %v", as, err, got.policies())
	}
}

func TestUpgradeDropsResource(t *testing.T) {
	observedAnn := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationFunctionVersions: `{"function-patch-and-transform":"` + ptPackage + `:v0.10.7"}`,
	}
	replica := func(t *testing.T, ann map[string]string, policies string) *structpb.Struct {
		return obj(t, strings.Replace(string(must(yaml.Marshal(observedRDS(t, "db.t3.small", 1, 1, ann, policies).AsMap()))), "name: db-rds", "name: db-replica", 1))
	}
	deletes := strings.NewReplacer("verbs: [Update, Create]", "verbs: [Update, Create, Delete]").Replace(ptUpgrade)
	orphans := strings.Replace(ptUpgrade, "verbs: [Update, Create]\n    mutations", "verbs: [Update, Create, Delete]\n    mutations", 1)
	// The new build no longer composes the replica.
	dropped := func(t *testing.T, observed *structpb.Struct, upgrades ...string) *fnv1.RunFunctionRequest {
		req := newRequest(t, xr(t, 1, 1, nil), observedRDS(t, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]"), obj(t, rds("db.t3.small", "")), policyDB)
		req.Observed.Resources["replica"] = &fnv1.Resource{Resource: observed}
		for _, u := range upgrades {
			req.RequiredResources[RequirementUpgrades].Items = append(req.RequiredResources[RequirementUpgrades].Items, &fnv1.Resource{Resource: obj(t, u)})
		}
		return withFunctions(t, req, map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8"})
	}
	closedReplica := replica(t, observedAnn, "[Observe, LateInitialize]")

	got := runOnce(t, dropped(t, closedReplica), "replica")
	if got.obj == nil || slices.Contains(got.policies(), "Delete") {
		t.Fatalf("without an UpgradeAllowance the replica must be kept behind its closed gate: %v", got.obj)
	}
	if !slices.ContainsFunc(got.messages, func(m string) bool {
		return strings.Contains(m, "withheld Delete") && strings.Contains(m, "v0.10.7 → v0.10.8")
	}) {
		t.Errorf("no message names the withheld deletion and the upgrade: %v", got.messages)
	}

	if got := runOnce(t, dropped(t, closedReplica, orphans), "replica"); got.obj != nil {
		t.Errorf("an UpgradeAllowance granting Delete of the MR alone lets Crossplane delete it (orphaning the cloud resource); it was kept: %v", got.policies())
	}

	// Granting the external Delete too: first the Delete gate opens, traced
	// to the UpgradeAllowance, with the new build recorded for admission.
	first := runOnce(t, dropped(t, closedReplica, deletes), "replica")
	if first.obj == nil || !slices.Contains(first.policies(), "Delete") {
		t.Fatalf("the replica's Delete gate did not open first: %v %v", first.obj, first.messages)
	}
	as, err := allowance.Parse(first.obj.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil || !slices.ContainsFunc(as, upgradeDelete) {
		t.Errorf("no unconsumed Delete allowance rooted at the UpgradeAllowance: %v %v", as, err)
	}
	if v := first.obj.GetAnnotations()[v1alpha1.AnnotationFunctionVersions]; !strings.Contains(v, "v0.10.8") {
		t.Errorf("function-versions = %s: admission checks the UpgradeAllowance against the change the write records", v)
	}
	// Then, observed with that gate open, Crossplane may delete it.
	open := first.obj.GetAnnotations()
	if got := runOnce(t, dropped(t, replica(t, open, "[Observe, Delete]"), deletes), "replica"); got.obj != nil {
		t.Errorf("observed with its Delete gate open, the replica is still kept: %v", got.policies())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestKeptResourceKeepsItsReadiness: a resource the pipeline dropped and
// Kausality keeps is as ready as it is observed, or an XR would never be
// Ready again (and an upgrade's roll-out never count it).
func TestKeptResourceKeepsItsReadiness(t *testing.T) {
	for name, tc := range map[string]struct {
		conditions string
		want       fnv1.Ready
	}{
		"Ready":    {conditions: `{type: Ready, status: "True", reason: Available}`, want: fnv1.Ready_READY_TRUE},
		"NotReady": {conditions: `{type: Ready, status: "False", reason: Unavailable}`, want: fnv1.Ready_READY_UNSPECIFIED},
	} {
		t.Run(name, func(t *testing.T) {
			ann := map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small")}
			m := observedRDS(t, "db.t3.small", 1, 1, ann, "[Observe, LateInitialize]").AsMap()
			var c map[string]any
			if err := yaml.Unmarshal([]byte(tc.conditions), &c); err != nil {
				t.Fatal(err)
			}
			m["status"].(map[string]any)["conditions"] = append(m["status"].(map[string]any)["conditions"].([]any), c)
			observed, err := structpb.NewStruct(m)
			if err != nil {
				t.Fatal(err)
			}
			req := newRequest(t, xr(t, 1, 1, nil), observed, nil, policyDB)
			rsp, err := newTestFunction().RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := rsp.GetDesired().GetResources()["rds"]
			if !ok {
				t.Fatalf("the dropped resource was not kept: %v", rsp.GetResults())
			}
			if d.GetReady() != tc.want {
				t.Errorf("kept resource Ready = %s, want %s", d.GetReady(), tc.want)
			}
		})
	}
}
