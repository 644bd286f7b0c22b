package e2e

// `kubectl kausality plan` checked against what then happens: a user plans
// a change of their Claim, applies it, and the cloud must see exactly what
// the plan said would reach it, and nothing it said would be withheld.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/internal/preview"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// planners is the group the plan runs with besides the user's own: it may
// read what a plan renders from (Compositions and their revisions,
// Functions, AllowancePolicies, UpgradeAllowances, the XRs and their
// Buckets, Namespaces), as a platform engineer who plans would. A group
// of its own, so no other scenario's user gains a right.
const planners = "kausality-planners"

// allowPlanning gives the planners group read access to what a plan reads.
func allowPlanning(t *testing.T) {
	t.Helper()
	read := []string{"get", "list"}
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: planners},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apiextensions.crossplane.io"}, Resources: []string{"compositions", "compositionrevisions"}, Verbs: read},
			{APIGroups: []string{"pkg.crossplane.io"}, Resources: []string{"functions", "functionrevisions"}, Verbs: read},
			{APIGroups: []string{"kausality.io"}, Resources: []string{"allowancepolicies", "upgradeallowances"}, Verbs: read},
			{APIGroups: []string{"example.com"}, Resources: []string{"xdatabases"}, Verbs: read},
			{APIGroups: []string{"recorder.kausality.io"}, Resources: []string{"buckets"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: planners},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: planners},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: planners}},
	}
	for _, o := range []runtime.Object{role, binding} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Apply(context.Background(), &unstructured.Unstructured{Object: m}); err != nil {
			t.Fatal(err)
		}
	}
}

// planFunctions starts function-kausality and function-patch-and-transform
// for crossplane render on free addresses, on the real clock, and returns
// the Functions file pointing at them.
func planFunctions(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	fns, err := render.StartFunctions(context.Background(), cp.Root, dir, cp.Tools, render.FunctionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fns.Stop)
	path, err := fns.File(render.FunctionPatchTransform, render.FunctionKausality)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// planOf runs `kubectl kausality plan -o json` as user (with groups and
// planners) for the Claim c written to a file, and returns the plan and
// the command's error (a blocked plan with --exit-code fails).
func planOf(t *testing.T, functions, user string, groups []string, c *unstructured.Unstructured, extra ...string) (preview.Plan, error) {
	t.Helper()
	raw, err := yaml.Marshal(c.Object)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "claim.yaml")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"plan", "-f", file, "--functions", functions, "-o", "json",
		"--crossplane", cp.Tools.Crossplane, "--crossplane-binary", cp.Tools.CrossplaneCore,
		"--crossplane-user", controlplane.CrossplaneUser}, extra...)
	out, runErr := cp.Kausality(context.Background(), user, append(append([]string{}, groups...), planners), args...)
	var p preview.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan output is not a plan (%v): %s", runErr, out)
	}
	return p, runErr
}

// reachesCloud says whether the plan has an Update of resource reach the
// cloud.
func reachesCloud(p preview.Plan, resource string) bool {
	for _, r := range p.Resources {
		if r.Resource != resource {
			continue
		}
		for _, c := range r.Changes {
			if c.Outcome == preview.Reaches {
				return true
			}
		}
	}
	return false
}

// outcome is what the plan says becomes of resource's field.
func outcome(p preview.Plan, resource, path string) preview.Outcome {
	for _, r := range p.Resources {
		for _, c := range r.Changes {
			if r.Resource == resource && c.Path == path {
				return c.Outcome
			}
		}
	}
	return ""
}

// expectAsPlanned checks that every bucket's cloud Updates grew by one
// exactly when the plan said a change of it reaches the cloud.
func expectAsPlanned(t *testing.T, key client.ObjectKey, p preview.Plan, before map[string][3]int) map[string][3]int {
	t.Helper()
	want := map[string][3]int{}
	for res, c := range before {
		if reachesCloud(p, res) {
			c[1]++
		}
		want[res] = c
	}
	expectCalls(t, key, want)
	return want
}

func TestPlanPredictsWhatHappens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	allowPlanning(t)
	functions := planFunctions(t)
	comp := composition(t, 1)
	key := created(t, comp, "plan", "orders")
	platform := []string{"platform-team"}
	change := func(size string) *unstructured.Unstructured {
		c := claim(key.Namespace, key.Name, size, map[string]string{"jira": "INFRA-1"})
		_ = unstructured.SetNestedField(c.Object, comp, "spec", "compositionRef", "name")
		return c
	}
	apply := func(user client.Client, size string) {
		t.Helper()
		c := claim(key.Namespace, key.Name, "", nil)
		if err := controlplane.Update(user, c, func() { _ = unstructured.SetNestedField(c.Object, size, "spec", "size") }); err != nil {
			t.Fatalf("resize to %s: %v", size, err)
		}
	}
	calls := map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}}
	expectCalls(t, key, calls)

	// Bob may not resize: admission denies it, and the plan says so
	// before he tries.
	p, err := planOf(t, functions, controlplane.Bob, nil, change("large"), "--exit-code")
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("plan of Bob's resize with --exit-code: err = %v, want exit status 2", err)
	}
	if p.Admission.Allowed || !p.Summary.Denied {
		t.Errorf("plan of Bob's resize: admission %+v, want denied", p.Admission)
	}
	if c := claim(key.Namespace, key.Name, "", nil); controlplane.Update(as(t, controlplane.Bob), c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }) == nil {
		t.Error("Bob's resize was admitted, which the plan said would be denied")
	}

	// Alice's permitted resize: the plan says the data bucket's size
	// reaches the cloud and the logs bucket does not change.
	p, err = planOf(t, functions, controlplane.Alice, platform, change("large"), "--exit-code")
	if err != nil {
		t.Fatalf("plan of Alice's resize: %v", err)
	}
	if !p.Admission.Allowed || len(p.Admission.New) == 0 || p.Admission.Composite == nil || len(p.Admission.Composite.New) == 0 {
		t.Errorf("plan of Alice's resize: admission %+v, want allowed with new allowances on the Claim and the XR", p.Admission)
	}
	if got := outcome(p, "data", "spec.forProvider.size"); got != preview.Reaches {
		t.Errorf("plan: data bucket's size %q, want %s; plan %+v", got, preview.Reaches, p.Resources)
	}
	if reachesCloud(p, "logs") {
		t.Errorf("plan: the logs bucket changes: %+v", p.Resources)
	}
	apply(alice(t), "large")
	settle(t, key)
	calls = expectAsPlanned(t, key, p, calls)
	expectClosed(t, key)

	// A new Composition revision changes the data bucket's tier; no
	// UpgradeAllowance names it, so the function withholds it. Alice's
	// next resize goes through; the plan says the tier stays withheld.
	if err := cp.Composition(ctx, filepath.Join("testdata", "composition-3.yaml"), comp); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the XR to report the withheld tier", func() (bool, string) {
		c := controlplane.Condition(xr(t, key), "KausalityAllowed")
		return c.Status == "False" && strings.Contains(c.Message, "spec.forProvider.tags.tier"), c.Message
	})
	p, err = planOf(t, functions, controlplane.Alice, platform, change("small"), "--exit-code")
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("plan of Alice's resize beside a withheld tier with --exit-code: err = %v, want exit status 2", err)
	}
	if got := outcome(p, "data", "spec.forProvider.size"); got != preview.Reaches {
		t.Errorf("plan: data bucket's size %q, want %s; plan %+v; admission %+v; notes %q", got, preview.Reaches, p.Resources, p.Admission, p.Notes)
	}
	if got := outcome(p, "data", "spec.forProvider.tags.tier"); got != preview.Withheld {
		t.Errorf("plan: data bucket's tier %q, want %s; plan %+v", got, preview.Withheld, p.Resources)
	}
	apply(alice(t), "small")
	settle(t, key)
	expectAsPlanned(t, key, p, calls)
	expectClosed(t, key)
	s, _ := cp.Cloud.Get(buckets(t, key)["data"].GetName())
	if s.Size != 1 || s.Tags["tier"] != "standard" {
		t.Errorf("cloud = size %d tier %q, want 1 and standard: the plan said the size reaches it and the tier is withheld", s.Size, s.Tags["tier"])
	}
}
