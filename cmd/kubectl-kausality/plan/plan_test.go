package plan

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/crossplanerender"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/preview"
	xprender "github.com/kausality-io/kausality-crossplane/test/render"
)

// The tests run the plan as the CLI does, on a fake cluster holding an
// example's objects, with the real `crossplane render`, function-kausality
// and function-patch-and-transform: only admission is missing (the fake
// client admits everything), so the file's allowances stand for what it
// would stamp.
var (
	root      string
	tools     xprender.Tools
	functions string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if root, err = xprender.Root(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if tools, err = xprender.FindTools(root); err != nil {
		fmt.Fprintln(os.Stderr, "the plan tests need the tools:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kausality-plan-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir) //nolint:errcheck // best effort
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fns, err := xprender.StartFunctions(ctx, root, dir, tools, xprender.ExampleFunctions)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer fns.Stop()
	if functions, err = fns.Rewrite(filepath.Join(root, "examples", "database", "functions.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var (
	xdbGVK   = schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XDatabase"}
	rdsGVK   = schema.GroupVersionKind{Group: "rds.aws.crossplane.io", Version: "v1alpha1", Kind: "RDSInstance"}
	claimGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "DatabaseClaim"}
)

func objects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path) //nolint:gosec // test data
	if err != nil {
		t.Fatal(err)
	}
	us, err := crossplanerender.Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return us
}

// cluster is a fake API server holding the database example: the XR
// before the change (generation 1, no allowances), its RDS instance as
// observed, the Composition and the policies.
func fakeCluster(t *testing.T, caseDir string) (client.Client, meta.RESTMapper) {
	t.Helper()
	ex := filepath.Join(root, "examples", "database")
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{xdbGVK, rdsGVK, compositionGVK, compositionRevisionGVK, functionGVK, functionRevisionGVK, v1alpha1.AllowancePolicyGroupVersionKind, v1alpha1.UpgradeAllowanceGroupVersionKind} {
		m.Add(gvk, meta.RESTScopeRoot)
	}
	m.Add(namespaceGVK, meta.RESTScopeRoot)
	m.Add(claimGVK, meta.RESTScopeNamespace)
	live := objects(t, filepath.Join(caseDir, "xr.yaml"))[0]
	// As Crossplane left it: generation 2 not yet composed (the fake
	// client's dry run does not bump it), no allowances yet (the file's
	// stand for what admission would stamp), composing the observed
	// resources.
	live.SetAnnotations(nil)
	live.SetResourceVersion("")
	objs := []client.Object{live}
	var refs []any
	for _, u := range objects(t, filepath.Join(caseDir, "observed.yaml")) {
		refs = append(refs, map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "name": u.GetName()})
		objs = append(objs, u)
	}
	if err := unstructured.SetNestedSlice(live.Object, refs, "spec", "resourceRefs"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(ex, "composition.yaml"), filepath.Join(ex, "policies.yaml")} {
		for _, u := range objects(t, f) {
			objs = append(objs, u)
		}
	}
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithRESTMapper(m).WithObjects(objs...).Build(), m
}

func TestBuild(t *testing.T) {
	cases := map[string]struct {
		caseName string
		want     preview.Outcome
		blocked  bool
		output   []string
	}{
		"Allowed": {
			caseName: "2-allowed-change", want: preview.Reaches,
			output: []string{"Update rds RDSInstance/my-database-x7k2p-83634bf08ab7  gate [Observe, Update, LateInitialize]", `~ spec.forProvider.instanceClass: "db.t3.small" -> "db.t3.large"  reaches: the gate opens for Update`},
		},
		"Withheld": {
			caseName: "3-withheld-change", want: preview.Withheld, blocked: true,
			output: []string{`! spec.forProvider.instanceClass: "db.t3.small" -> "db.t3.large"  withheld: no unconsumed allowance on XDatabase/my-database-x7k2p grants Update of rdsinstances`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, "examples", "database", "cases", tc.caseName)
			cl, m := fakeCluster(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			p, err := Build(ctx, Options{
				Client: cl, Mapper: m, File: filepath.Join(dir, "xr.yaml"), Functions: functions,
				Crossplane: tools.Crossplane, CrossplaneBinary: tools.CrossplaneCore, Warnings: &Warnings{}, Timeout: time.Minute,
			})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := Print(&out, p, "default"); err != nil {
				t.Fatal(err)
			}
			t.Logf("plan:\n%s", out.String())
			if !p.Admission.Allowed {
				t.Fatalf("admission: %s", p.Admission.Message)
			}
			if len(p.Resources) != 1 || len(p.Resources[0].Changes) != 1 {
				t.Fatalf("want one resource with one change, got %+v", p.Resources)
			}
			c := p.Resources[0].Changes[0]
			if c.Path != "spec.forProvider.instanceClass" || c.Outcome != tc.want {
				t.Errorf("change = %+v, want spec.forProvider.instanceClass %s", c, tc.want)
			}
			if p.Blocked() != tc.blocked {
				t.Errorf("Blocked() = %v, want %v", p.Blocked(), tc.blocked)
			}
			for _, s := range tc.output {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q", s)
				}
			}
		})
	}
}

func TestMerged(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "DatabaseClaim",
		"metadata": map[string]any{"name": "db", "resourceVersion": "7", "annotations": map[string]any{
			v1alpha1.AnnotationAllowances: "[]", v1alpha1.AnnotationTrace: "[]", "jira": "OLD-1", "kausality.io/freeze": "alice",
		}},
		"spec": map[string]any{"size": "small", "resourceRef": map[string]any{"name": "db-x"}},
	}}
	file := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "DatabaseClaim",
		"metadata": map[string]any{"name": "db", "annotations": map[string]any{"jira": "NEW-2", "kausality.io/freeze": ""}},
		"spec":     map[string]any{"size": "large"},
	}}
	got := merged(live, file)
	if got.GetResourceVersion() != "7" {
		t.Errorf("resourceVersion = %q, want the live one", got.GetResourceVersion())
	}
	want := map[string]string{v1alpha1.AnnotationAllowances: "[]", v1alpha1.AnnotationTrace: "[]", "jira": "NEW-2", "kausality.io/freeze": ""}
	if fmt.Sprint(got.GetAnnotations()) != fmt.Sprint(want) {
		t.Errorf("annotations = %v, want %v", got.GetAnnotations(), want)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "spec", "size"); s != "large" {
		t.Errorf("spec.size = %q, want the file's", s)
	}
}

// TestRunClaim plans hans's resize of the example's Claim: the Claim's
// allowances are what admission's own code stamps (the fake client runs
// no webhooks), and the plan must carry them to the XR as admission would
// when Crossplane syncs the Claim, so the RDS instance's new class
// reaches the cloud.
func TestRunClaim(t *testing.T) {
	now, err := time.Parse(time.RFC3339, xprender.FixedTime)
	if err != nil {
		t.Fatal(err)
	}
	ex := filepath.Join(root, "examples", "database")
	dir := filepath.Join(ex, "cases", "3-withheld-change")
	cl, m := fakeCluster(t, dir)
	ctx := context.Background()
	x := &unstructured.Unstructured{}
	x.SetGroupVersionKind(xdbGVK)
	if err := cl.Get(ctx, client.ObjectKey{Name: "my-database-x7k2p"}, x); err != nil {
		t.Fatal(err)
	}
	// Created and Ready: a change now is a change, not part of the
	// creation.
	created := []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-20T10:05:00Z"},
		map[string]any{"type": v1alpha1.ConditionCreated, "status": "True", "reason": "Created", "lastTransitionTime": "2026-11-20T10:05:00Z"},
		map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-11-20T10:05:00Z", "observedGeneration": int64(1)},
	}
	_ = unstructured.SetNestedField(x.Object, "small", "spec", "size")
	_ = unstructured.SetNestedSlice(x.Object, created, "status", "conditions")
	x.SetGeneration(1)
	if err := cl.Update(ctx, x); err != nil {
		t.Fatal(err)
	}

	live := objects(t, filepath.Join(ex, "claim.yaml"))[0]
	_ = unstructured.SetNestedMap(live.Object, map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "XDatabase", "name": "my-database-x7k2p"}, "spec", "resourceRef")
	live.SetGeneration(1)
	_ = unstructured.SetNestedSlice(live.Object, created, "status", "conditions")
	changed := live.DeepCopy()
	_ = unstructured.SetNestedField(changed.Object, "large", "spec", "size")
	var ps []v1alpha1.AllowancePolicy
	for _, u := range objects(t, filepath.Join(ex, "policies.yaml")) {
		p := v1alpha1.AllowancePolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	set, errs := policy.NewCache().For("example.com/v1alpha1", "DatabaseClaim", ps)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	d, err := set.Evaluate(policy.Request{Object: changed.Object, OldObject: live.Object, User: policy.Identity{Username: "hans@example.com", Groups: []string{"platform-team"}}, Now: now})
	if err != nil || len(d.Violations) > 0 || len(d.Allowances) == 0 {
		t.Fatalf("the Claim's admission: %v, %+v", err, d)
	}
	if err := admit.Inject(live, changed, d, nil); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(changed.Object)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "claim.yaml")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	p, err := Build(ctx, Options{
		Client: cl, Mapper: m, File: file, Functions: functions, Now: func() time.Time { return now },
		Crossplane: tools.Crossplane, CrossplaneBinary: tools.CrossplaneCore, Warnings: &Warnings{},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Print(&out, p, "default"); err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", out.String())
	if c := p.Admission.Composite; c == nil || !c.Allowed || len(c.New) != 2 {
		t.Fatalf("the XR's admission = %+v, want allowed with a ControllerChild and an External allowance", c)
	}
	if len(p.Resources) != 1 || len(p.Resources[0].Changes) != 1 || p.Resources[0].Changes[0].Outcome != preview.Reaches {
		t.Errorf("want the instance class to reach the cloud, got %+v", p.Resources)
	}
}

func TestSyncedSpec(t *testing.T) {
	obj := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	}
	ref := map[string]any{"name": "rev-1"}
	cases := map[string]struct {
		liveClaim, claim, xr map[string]any
		want                 map[string]any
	}{
		"CopiesUserFieldsAndSelection": {
			liveClaim: map[string]any{"size": "small", "resourceRef": map[string]any{"name": "x"}},
			claim:     map[string]any{"size": "large", "resourceRef": map[string]any{"name": "x"}, "compositionRef": map[string]any{"name": "c"}, "writeConnectionSecretToRef": map[string]any{"name": "s"}, "compositeDeletePolicy": "Foreground"},
			xr:        map[string]any{"size": "small", "resourceRefs": []any{"r"}, "claimRef": map[string]any{"name": "claim"}},
			want:      map[string]any{"size": "large", "compositionRef": map[string]any{"name": "c"}, "resourceRefs": []any{"r"}, "claimRef": map[string]any{"name": "claim"}},
		},
		"RemovesWhatTheClaimDropped": {
			liveClaim: map[string]any{"size": "small", "engine": "postgres"},
			claim:     map[string]any{"size": "small"},
			xr:        map[string]any{"size": "small", "engine": "postgres", "resourceRefs": []any{"r"}},
			want:      map[string]any{"size": "small", "resourceRefs": []any{"r"}},
		},
		"RevisionNotCopiedWhenAutomatic": {
			liveClaim: map[string]any{},
			claim:     map[string]any{"compositionRevisionRef": ref},
			xr:        map[string]any{"compositionRevisionRef": map[string]any{"name": "rev-2"}},
			want:      map[string]any{"compositionRevisionRef": map[string]any{"name": "rev-2"}},
		},
		"RevisionWhenManual": {
			liveClaim: map[string]any{},
			claim:     map[string]any{"compositionRevisionRef": ref},
			xr:        map[string]any{"compositionRevisionRef": map[string]any{"name": "rev-2"}, "compositionUpdatePolicy": "Manual"},
			want:      map[string]any{"compositionRevisionRef": ref, "compositionUpdatePolicy": "Manual"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := syncedSpec(obj(tc.liveClaim), obj(tc.claim), obj(tc.xr))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("syncedSpec: -want +got:\n%s", diff)
			}
		})
	}
}
