package render

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current render output")

// The render tests need the real crossplane CLI and core binary and both
// functions. They never skip: without the tools they fail and say how to
// build them.
var (
	root  string
	tools Tools
	fns   *Functions
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer Occupy()()
	var err error
	if root, err = Root(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if tools, err = FindTools(root); err != nil {
		fmt.Fprintln(os.Stderr, "render tests need the tools:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kausality-render-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir) //nolint:errcheck // best effort
	fns, err = StartFunctions(ctx, root, dir, tools, ExampleFunctions)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer fns.Stop()
	return m.Run()
}

// rendered renders a case once per test binary run.
var rendered = map[string][]byte{}

func renderCase(t *testing.T, c Case) []byte {
	t.Helper()
	if out, ok := rendered[c.ID()]; ok {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.Render(ctx, tools, fns)
	if err != nil {
		t.Fatalf("render %s: %v", c.ID(), err)
	}
	rendered[c.ID()] = out
	return out
}

func allCases(t *testing.T) []Case {
	t.Helper()
	cs, err := Cases(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 {
		t.Fatal("no example cases found under examples/*/cases or examples/corpus/*/cases")
	}
	return cs
}

// TestGolden compares every case's full render output with its golden file.
// Run `make golden` after an intended change and review the diff.
func TestGolden(t *testing.T) {
	for _, c := range allCases(t) {
		t.Run(c.ID(), func(t *testing.T) {
			compareGolden(t, filepath.Join("testdata", c.Example, c.Name+".yaml"), renderCase(t, c))
		})
	}
}

// compareGolden compares render output got with the golden file, which
// -update rewrites first.
func compareGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden) //nolint:gosec // test data
	if err != nil {
		t.Fatalf("cannot read golden file (run `make golden` to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("render output differs from %s (-want +got); run `make golden` if intended:\n%s", golden, diff)
	}
}

// rendering is one case's output, parsed.
type rendering struct {
	xr       *unstructured.Unstructured
	composed map[string]*unstructured.Unstructured // by composition resource name
	results  []*unstructured.Unstructured
}

func parse(t *testing.T, out []byte) rendering {
	t.Helper()
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	r := rendering{xr: objs[0], composed: map[string]*unstructured.Unstructured{}}
	for _, o := range objs[1:] {
		if o.GetKind() == "Result" {
			r.results = append(r.results, o)
			continue
		}
		if n := o.GetAnnotations()["crossplane.io/composition-resource-name"]; n != "" {
			r.composed[n] = o
		}
	}
	return r
}

// expectComposed says the render composed exactly the resources names.
func expectComposed(t *testing.T, r rendering, names []string) {
	t.Helper()
	expectSlice(t, "composed resources", slices.Sorted(maps.Keys(r.composed)), names)
}

func (r rendering) mr(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u, ok := r.composed[name]
	if !ok {
		t.Fatalf("render output has no composed resource %q", name)
	}
	return u
}

func str(t *testing.T, u *unstructured.Unstructured, path string) string {
	t.Helper()
	v, err := fieldpath.Pave(u.Object).GetValue(path)
	if err != nil {
		t.Fatalf("%s: %v", Sprint(u), err)
	}
	return fmt.Sprint(v)
}

func gate(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	v, err := fieldpath.Pave(u.Object).GetStringArray("spec.managementPolicies")
	if err != nil {
		t.Fatalf("%s: spec.managementPolicies: %v", Sprint(u), err)
	}
	return v
}

func traceKinds(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	tr, err := allowance.ParseTrace(u.GetAnnotations()[v1alpha1.AnnotationTrace])
	if err != nil {
		t.Fatalf("%s: %v", Sprint(u), err)
	}
	var out []string
	for _, h := range tr {
		out = append(out, h.Kind)
	}
	return out
}

func warnings(r rendering) []string {
	var out []string
	for _, res := range r.results {
		if s, _ := res.Object["severity"].(string); s == "Warning" {
			m, _ := res.Object["message"].(string)
			out = append(out, m)
		}
	}
	return out
}

func condition(t *testing.T, xr *unstructured.Unstructured, typ string) map[string]any {
	t.Helper()
	c := fixture.Condition(xr, typ)
	if c == nil {
		t.Fatalf("XR has no condition %s", typ)
	}
	return c
}

var (
	closed      = []string{"Observe", "LateInitialize"}
	openUpdate  = []string{"Observe", "Update", "LateInitialize"}
	openCreate  = []string{"Observe", "Create", "LateInitialize"}
	claimXRMR   = []string{"DatabaseClaim", "XDatabase", "RDSInstance"}
	noWarnings  = func(t *testing.T, r rendering) { t.Helper(); expectWarnings(t, r) }
	allowedTrue = func(t *testing.T, r rendering) {
		t.Helper()
		if c := condition(t, r.xr, "KausalityAllowed"); c["status"] != "True" {
			t.Errorf("KausalityAllowed = %v, want True", c)
		}
	}
)

// expectWarnings checks that there is exactly one Warning per substring set,
// each containing every substring given.
func expectWarnings(t *testing.T, r rendering, each ...[]string) {
	t.Helper()
	ws := warnings(r)
	if len(ws) != len(each) {
		t.Fatalf("got %d Warning results, want %d: %q", len(ws), len(each), ws)
	}
	for i, subs := range each {
		for _, s := range subs {
			if !strings.Contains(ws[i], s) {
				t.Errorf("Warning %q does not contain %q", ws[i], s)
			}
		}
	}
}

func expect[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func expectSlice(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// TestBehaviour states, per case, what the golden files must show, so a
// golden update cannot quietly accept a regression.
func TestBehaviour(t *testing.T) {
	checks := map[string]func(t *testing.T, r rendering){
		"database/1-create": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expectSlice(t, "gate", gate(t, rds), openCreate)
			expectSlice(t, "trace", traceKinds(t, rds), claimXRMR)
			noWarnings(t, r)
		},
		"database/13-observe-only-import": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expectSlice(t, "gate", gate(t, rds), []string{"Observe"})
			expect(t, "requested-policies", rds.GetAnnotations()[v1alpha1.AnnotationRequestedPolicies], `["Observe"]`)
			noWarnings(t, r)
		},
		"database/14-keep-on-delete": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expectSlice(t, "gate", gate(t, rds), openCreate)
			expect(t, "requested-policies", rds.GetAnnotations()[v1alpha1.AnnotationRequestedPolicies], `["Create","Update","Observe","LateInitialize"]`)
			noWarnings(t, r)
		},
		"database/2-allowed-change": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "instanceClass", str(t, rds, "spec.forProvider.instanceClass"), "db.t3.large")
			expectSlice(t, "gate", gate(t, rds), openUpdate)
			expectSlice(t, "trace", traceKinds(t, rds), claimXRMR)
			as, err := allowance.Parse(rds.GetAnnotations()[v1alpha1.AnnotationAllowances])
			if err != nil || len(as) != 1 || as[0].Relation != v1alpha1.RelationExternal || as[0].Initiator != "hans@example.com" || as[0].Generation != 2 {
				t.Errorf("MR allowances = %+v (%v), want one External allowance for generation 2 initiated by hans", as, err)
			}
			noWarnings(t, r)
			allowedTrue(t, r)
		},
		"database/3-withheld-change": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "instanceClass", str(t, rds, "spec.forProvider.instanceClass"), "db.t3.small")
			expectSlice(t, "gate", gate(t, rds), closed)
			expectWarnings(t, r, []string{"withheld Mutate spec.forProvider.instanceClass", "no unconsumed allowance", "xdatabase-policy"})
			c := condition(t, r.xr, "KausalityAllowed")
			expect(t, "KausalityAllowed status", c["status"], any("False"))
			if m, _ := c["message"].(string); !strings.Contains(m, "spec.forProvider.instanceClass") {
				t.Errorf("KausalityAllowed message %q does not name the field", m)
			}
		},
		"database/4-gate-open": func(t *testing.T, r rendering) {
			expectSlice(t, "gate", gate(t, r.mr(t, "rds")), openUpdate)
			noWarnings(t, r)
		},
		"database/5-gate-closed": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expectSlice(t, "gate", gate(t, rds), closed)
			expect(t, "allowances", rds.GetAnnotations()[v1alpha1.AnnotationAllowances], "[]")
			noWarnings(t, r)
		},
		"database/6-composition-change": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "allocatedStorage", str(t, rds, "spec.forProvider.allocatedStorage"), "20")
			expectSlice(t, "gate", gate(t, rds), closed)
			expect(t, "composition-revision", rds.GetAnnotations()[v1alpha1.AnnotationCompositionRevision], "xdatabases-aws-3f9c2a1")
			expectWarnings(t, r, []string{"withheld Mutate spec.forProvider.allocatedStorage", "Composition revision xdatabases-aws-3f9c2a1 → xdatabases-aws-8d41e07", "UpgradeAllowance"})
		},
		"database/7-composition-upgrade": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "allocatedStorage", str(t, rds, "spec.forProvider.allocatedStorage"), "100")
			expectSlice(t, "gate", gate(t, rds), openUpdate)
			expectSlice(t, "trace", traceKinds(t, rds), []string{"UpgradeAllowance", "XDatabase", "RDSInstance"})
			expect(t, "composition-revision", rds.GetAnnotations()[v1alpha1.AnnotationCompositionRevision], "xdatabases-aws-8d41e07")
			noWarnings(t, r)
		},
		"database/9-function-upgrade": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "allocatedStorage", str(t, rds, "spec.forProvider.allocatedStorage"), "20")
			expectSlice(t, "gate", gate(t, rds), closed)
			expect(t, "function-versions", rds.GetAnnotations()[v1alpha1.AnnotationFunctionVersions], functionVersions("v0.10.7"))
			expectWarnings(t, r, []string{"withheld Mutate spec.forProvider.allocatedStorage", "function-patch-and-transform v0.10.7 → v0.10.8", "UpgradeAllowance"})
		},
		"database/10-function-upgrade-allowed": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "allocatedStorage", str(t, rds, "spec.forProvider.allocatedStorage"), "100")
			expectSlice(t, "gate", gate(t, rds), openUpdate)
			expectSlice(t, "trace", traceKinds(t, rds), []string{"UpgradeAllowance", "XDatabase", "RDSInstance"})
			expect(t, "function-versions", rds.GetAnnotations()[v1alpha1.AnnotationFunctionVersions], functionVersions("v0.10.8"))
			noWarnings(t, r)
		},
		"database/11-environment-change": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "allocatedStorage", str(t, rds, "spec.forProvider.allocatedStorage"), "20")
			expectSlice(t, "gate", gate(t, rds), closed)
			expectWarnings(t, r, []string{"withheld Mutate spec.forProvider.allocatedStorage", "EnvironmentConfig team-a-env generation 1 → 2", "no UpgradeAllowance"})
			expect(t, "input-versions", rds.GetAnnotations()[v1alpha1.AnnotationInputVersions], `{"EnvironmentConfig/team-a-env":"1"}`)
		},
		"database/12-environment-change-allowed": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "allocatedStorage", str(t, rds, "spec.forProvider.allocatedStorage"), "100")
			expectSlice(t, "gate", gate(t, rds), openUpdate)
			expectSlice(t, "trace", traceKinds(t, rds), []string{"UpgradeAllowance", "XDatabase", "RDSInstance"})
			expect(t, "input-versions", rds.GetAnnotations()[v1alpha1.AnnotationInputVersions], `{"EnvironmentConfig/team-a-env":"2"}`)
			noWarnings(t, r)
		},
		"database/8-drift": func(t *testing.T, r rendering) {
			rds := r.mr(t, "rds")
			expect(t, "instanceClass", str(t, rds, "spec.forProvider.instanceClass"), "db.t3.2xlarge")
			expectSlice(t, "gate", gate(t, rds), closed)
			expectWarnings(t, r, []string{"spec.forProvider.instanceClass", "drift"})
		},
		"cluster/1-create": func(t *testing.T, r rendering) {
			for _, n := range []string{"cluster", "system-pool", "gpu-pool"} {
				expectSlice(t, n+" gate", gate(t, r.mr(t, n)), openCreate)
			}
			noWarnings(t, r)
		},
		"cluster/2-gpu-scale": func(t *testing.T, r rendering) {
			gpu := r.mr(t, "gpu-pool")
			expect(t, "gpu desiredSize", str(t, gpu, "spec.forProvider.scalingConfig.desiredSize"), "4")
			expectSlice(t, "gpu gate", gate(t, gpu), openUpdate)
			expectSlice(t, "system gate", gate(t, r.mr(t, "system-pool")), closed)
			expectSlice(t, "cluster gate", gate(t, r.mr(t, "cluster")), closed)
			noWarnings(t, r)
		},
		"cluster/4-rollout": func(t *testing.T, r rendering) {
			expect(t, "pool-1 desiredSize", str(t, r.mr(t, "pool-1"), "spec.forProvider.scalingConfig.desiredSize"), "4")
			expectSlice(t, "pool-1 gate", gate(t, r.mr(t, "pool-1")), openUpdate)
			for i := 2; i <= 6; i++ {
				p := r.mr(t, fmt.Sprintf("pool-%d", i))
				expect(t, p.GetName()+" desiredSize", str(t, p, "spec.forProvider.scalingConfig.desiredSize"), "2")
				expectSlice(t, p.GetName()+" gate", gate(t, p), closed)
				as, err := allowance.Parse(p.GetAnnotations()[v1alpha1.AnnotationAllowances])
				if err != nil || len(as) != 1 || !as[0].IsPending() || as[0].Initiator != "alice@example.com" {
					t.Errorf("pool-%d allowances = %+v (%v), want one pending allowance initiated by alice", i, as, err)
				}
			}
			c := condition(t, r.xr, "Propagated")
			expect(t, "Propagated status", c["status"], any("False"))
			if m, _ := c["message"].(string); !strings.Contains(m, "pool-6") || !strings.Contains(m, "exponentiallyUpdated(item, pools)") {
				t.Errorf("Propagated message %q does not name the held pools and the expression", m)
			}
			noWarnings(t, r)
			allowedTrue(t, r)
		},
		"app/1-create": func(t *testing.T, r rendering) {
			for _, n := range []string{"deployment", "service"} {
				ungated(t, r.mr(t, n))
			}
			expectSlice(t, "trace", traceKinds(t, r.mr(t, "deployment")), []string{"App", "Deployment"})
			expect(t, "image", str(t, r.mr(t, "deployment"), "spec.template.spec.containers[0].image"), "nginx:1.27")
			noWarnings(t, r)
		},
		"app/2-allowed-image": func(t *testing.T, r rendering) {
			d := r.mr(t, "deployment")
			ungated(t, d)
			expect(t, "image", str(t, d, "spec.template.spec.containers[0].image"), "nginx:1.28")
			expectSlice(t, "trace", traceKinds(t, d), []string{"App", "Deployment"})
			tr, err := allowance.ParseTrace(d.GetAnnotations()[v1alpha1.AnnotationTrace])
			if err != nil || tr.Initiator() != "alice@example.com" {
				t.Errorf("Deployment trace %v (%v) does not start with alice", tr, err)
			}
			noWarnings(t, r)
			allowedTrue(t, r)
		},
		"app/3-withheld-image": func(t *testing.T, r rendering) {
			d := r.mr(t, "deployment")
			ungated(t, d)
			expect(t, "image", str(t, d, "spec.template.spec.containers[0].image"), "nginx:1.27")
			expectWarnings(t, r, []string{"withheld Mutate spec.template.spec.containers[0].image", "no unconsumed allowance on App/my-app"})
		},
		"app/4-composition-change": func(t *testing.T, r rendering) {
			d := r.mr(t, "deployment")
			ungated(t, d)
			expect(t, "replicas", str(t, d, "spec.replicas"), "2")
			expectWarnings(t, r, []string{"withheld Mutate spec.replicas", "Composition revision app-yaml-1 → app-yaml-2", "UpgradeAllowance"})
		},
		"app/7-service-exposed": func(t *testing.T, r rendering) {
			s := r.mr(t, "service")
			ungated(t, s)
			for _, k := range []string{"service.beta.kubernetes.io/aws-load-balancer-scheme", "external-dns.alpha.kubernetes.io/hostname"} {
				if v, ok := s.GetAnnotations()[k]; ok {
					t.Errorf("the Service has annotation %s=%q from a revision nothing approved", k, v)
				}
			}
			if v, ok := s.GetLabels()["exposure"]; ok {
				t.Errorf("the Service has label exposure=%q from a revision nothing approved", v)
			}
			why := []string{"Composition revision app-yaml-1 → app-yaml-2", "UpgradeAllowance"}
			expectWarnings(t, r,
				append([]string{"withheld Insert metadata.annotations[external-dns.alpha.kubernetes.io/hostname]"}, why...),
				append([]string{"withheld Insert metadata.annotations[service.beta.kubernetes.io/aws-load-balancer-scheme]"}, why...),
				append([]string{"withheld Insert metadata.labels.exposure"}, why...))
		},
		"access-keys/1-create": func(t *testing.T, r rendering) {
			for _, n := range []string{"user", "accesskey-0", "accesskey-1"} {
				expectSlice(t, n+" gate", gate(t, r.mr(t, n)), openCreate)
				expectSlice(t, n+" trace", traceKinds(t, r.mr(t, n)), []string{"UserAccessKey", r.mr(t, n).GetKind()})
			}
			// patch-and-transform composes the connection Secret once the
			// keys publish connection details, not before.
			expectComposed(t, r, []string{"accesskey-0", "accesskey-1", "user"})
			noWarnings(t, r)
			allowedTrue(t, r)
		},
		"access-keys/2-create-go-templating": func(t *testing.T, r rendering) {
			for _, n := range []string{"user", "accesskey-0", "accesskey-1"} {
				expectSlice(t, n+" gate", gate(t, r.mr(t, n)), openCreate)
			}
			// The template composes the Secret at once, empty; a Secret has
			// no spec.managementPolicies and gets no gate, and with no
			// policy naming Secrets nothing is recorded on it.
			expectComposed(t, r, []string{"accesskey-0", "accesskey-1", "connection-secret", "user"})
			ungated(t, r.mr(t, "connection-secret"))
			noWarnings(t, r)
			allowedTrue(t, r)
		},
		"eks/1-create": func(t *testing.T, r rendering) {
			for _, n := range []string{"controlplaneRole", "nodegroupRole", "kubernetesCluster"} {
				expectSlice(t, n+" gate", gate(t, r.mr(t, n)), openCreate)
			}
			expectComposed(t, r, []string{"controlplaneRole", "kubernetesCluster", "nodegroupRole"})
			noWarnings(t, r)
			allowedTrue(t, r)
		},
		"eks/2-cluster-ready": func(t *testing.T, r rendering) {
			// Composed a reconcile after the XR's creation, the addon and
			// the access entry are still created under its initializing
			// phase: their gates open for Create.
			for _, n := range []string{"vpc-cni-addon", "accessEntry"} {
				expectSlice(t, n+" gate", gate(t, r.mr(t, n)), openCreate)
			}
			for _, n := range []string{"controlplaneRole", "nodegroupRole", "kubernetesCluster"} {
				expectSlice(t, n+" gate", gate(t, r.mr(t, n)), closed)
			}
			expectComposed(t, r, []string{"accessEntry", "controlplaneRole", "kubernetesCluster", "nodegroupRole", "vpc-cni-addon"})
			noWarnings(t, r)
			allowedTrue(t, r)
		},
		"cluster/3-gpu-scale-with-drift": func(t *testing.T, r rendering) {
			gpu, sys := r.mr(t, "gpu-pool"), r.mr(t, "system-pool")
			expect(t, "gpu desiredSize", str(t, gpu, "spec.forProvider.scalingConfig.desiredSize"), "4")
			expectSlice(t, "gpu gate", gate(t, gpu), openUpdate)
			expect(t, "system desiredSize", str(t, sys, "spec.forProvider.scalingConfig.desiredSize"), "5")
			expectSlice(t, "system gate", gate(t, sys), closed)
			expectWarnings(t, r, []string{"system-pool", "spec.forProvider.scalingConfig.desiredSize", "drift"})
		},
	}
	// The guide's templated YAML Composition composes what its
	// patch-and-transform one does: the same checks hold.
	checks["app/5-create-go-templating"] = checks["app/1-create"]
	checks["app/6-allowed-image-go-templating"] = checks["app/2-allowed-image"]
	maps.Copy(checks, lbControllerChecks)
	for _, c := range allCases(t) {
		check, ok := checks[c.ID()]
		if !ok {
			t.Errorf("example case %s has no behaviour check; add one to TestBehaviour", c.ID())
			continue
		}
		delete(checks, c.ID())
		t.Run(c.ID(), func(t *testing.T) { check(t, parse(t, renderCase(t, c))) })
	}
	for id := range checks {
		t.Errorf("behaviour check for %s has no example case", id)
	}
}

// ungated fails unless u, a kind without managementPolicies, was left
// without a gate: a real API server refuses a field its schema does not
// declare.
func ungated(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "managementPolicies"); ok {
		t.Errorf("%s got spec.managementPolicies", Sprint(u))
	}
	if l, ok := u.GetLabels()[v1alpha1.LabelGated]; ok {
		t.Errorf("%s is labelled %s=%s", Sprint(u), v1alpha1.LabelGated, l)
	}
}

// functionVersions is the database example's function-versions record with
// function-patch-and-transform at version.
func functionVersions(version string) string {
	return `{"function-kausality":"xpkg.crossplane.io/kausality-io/function-kausality:v0.1.0","function-patch-and-transform":"xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:` + version + `"}`
}
