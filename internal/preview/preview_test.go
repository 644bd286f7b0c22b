package preview

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

const (
	openUpdate = `[{"relation":"External","target":{"external":{"kind":"RDSInstance","provider":"provider-aws"}},"verbs":["Update"],"mutations":[{"jsonPath":"spec.forProvider.instanceClass","verbs":["Mutate"]}],"generation":2,"initiator":"hans@example.com"}]`
	pending    = `[{"relation":"External","target":{"external":{"kind":"RDSInstance","provider":"provider-aws"}},"verbs":["Update"],"mutations":[{"jsonPath":"spec.forProvider.instanceClass","verbs":["Mutate"]}],"generation":2,"initiator":"hans@example.com","pending":{"spec.forProvider.instanceClass":"04c356016565"}}]`
)

type opt func(*unstructured.Unstructured)

func class(c string) opt {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, c, "spec", "forProvider", "instanceClass")
	}
}

func gate(verbs ...any) opt {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, verbs, "spec", "managementPolicies")
		u.SetLabels(map[string]string{v1alpha1.LabelGated: "true"})
	}
}

func allowances(s string) opt {
	return func(u *unstructured.Unstructured) {
		ann := u.GetAnnotations()
		ann[v1alpha1.AnnotationAllowances] = s
		u.SetAnnotations(ann)
	}
}

func rds(opts ...opt) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rds.aws.crossplane.io/v1alpha1", "kind": "RDSInstance",
		"metadata": map[string]any{"name": "db-1", "annotations": map[string]any{"crossplane.io/composition-resource-name": "rds"}},
		"spec":     map[string]any{"forProvider": map[string]any{"instanceClass": "db.t3.small", "region": "eu-central-1"}},
	}}
	for _, o := range opts {
		o(u)
	}
	return u
}

func xr(conds ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "XDatabase",
		"metadata": map[string]any{"name": "db"},
		"status":   map[string]any{"conditions": conds},
	}}
	return u
}

func cond(t, status, msg string) map[string]any {
	return map[string]any{"type": t, "status": status, "message": msg, "reason": "R", "lastTransitionTime": "2026-11-22T12:00:00Z"}
}

const withheldMsg = "resource rds (RDSInstance db-1): withheld Mutate spec.forProvider.instanceClass: no unconsumed allowance on XDatabase/db grants Update of rdsinstances; policies: p"

func TestCompare(t *testing.T) {
	alice := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Verbs: []string{"Update"}, Generation: 2, Initiator: "alice"}
	old := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Verbs: []string{"Update"}, Generation: 1, Initiator: "bob"}
	cases := map[string]struct {
		in   Inputs
		want Plan
	}{
		"Denied": {
			in:   Inputs{Admission: Admission{Message: "no rule permits spec.size"}},
			want: Plan{Admission: AdmissionPlan{Message: "no rule permits spec.size"}, Summary: Summary{Denied: true}},
		},
		"DeniedAtTheXR": {
			in: Inputs{Admission: Admission{Allowed: true, After: []allowance.Allowance{alice}, Composite: &Admission{Message: "no"}}},
			want: Plan{
				Admission: AdmissionPlan{Allowed: true, New: []allowance.Allowance{alice}, Composite: &AdmissionPlan{Message: "no"}},
				Summary:   Summary{Denied: true},
			},
		},
		"ReachesThroughAnOpenGate": {
			in: Inputs{
				Admission: Admission{Allowed: true, Before: []allowance.Allowance{old}, After: []allowance.Allowance{old, alice}},
				XR:        xr(cond("KausalityAllowed", "True", "")),
				Observed:  []*unstructured.Unstructured{rds(gate("Observe", "LateInitialize"))},
				Rendered:  []*unstructured.Unstructured{rds(class("db.t3.large"), gate("Observe", "Update", "LateInitialize"), allowances(openUpdate))},
				Wanted:    []*unstructured.Unstructured{rds(class("db.t3.large"))},
			},
			want: Plan{
				Admission: AdmissionPlan{Allowed: true, New: []allowance.Allowance{alice}, Kept: []allowance.Allowance{old}},
				Composite: &Composite{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db"},
				Resources: []Resource{{
					Resource: "rds", APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-1", Action: ActionUpdate,
					Gated: true, Gate: []string{"Observe", "Update", "LateInitialize"},
					Open:    []string{"External Update of spec.forProvider.instanceClass (generation 2, by hans@example.com)"},
					Changes: []Change{{Path: "spec.forProvider.instanceClass", Verb: "Mutate", From: "db.t3.small", To: "db.t3.large", Outcome: Reaches, Reason: "the gate opens for Update"}},
				}},
				Summary: Summary{Reaches: 1},
			},
		},
		"Withheld": {
			in: Inputs{
				Admission: Admission{Allowed: true},
				XR:        xr(cond("KausalityAllowed", "False", withheldMsg)),
				Observed:  []*unstructured.Unstructured{rds(gate("Observe", "LateInitialize"))},
				Rendered:  []*unstructured.Unstructured{rds(gate("Observe", "LateInitialize"))},
				Wanted:    []*unstructured.Unstructured{rds(class("db.t3.large"))},
			},
			want: Plan{
				Admission: AdmissionPlan{Allowed: true},
				Composite: &Composite{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Withheld: withheldMsg},
				Resources: []Resource{{
					Resource: "rds", APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-1", Action: ActionUpdate,
					Gated: true, Gate: []string{"Observe", "LateInitialize"},
					Changes: []Change{{
						Path: "spec.forProvider.instanceClass", Verb: "Mutate", From: "db.t3.small", To: "db.t3.large", Outcome: Withheld,
						Reason: "no unconsumed allowance on XDatabase/db grants Update of rdsinstances; policies: p",
					}},
				}},
				Summary: Summary{Withheld: 1},
			},
		},
		"HeldForALaterBatch": {
			in: Inputs{
				Admission: Admission{Allowed: true},
				XR:        xr(cond("Propagated", "False", "1 of 2 held")),
				Observed:  []*unstructured.Unstructured{rds(gate("Observe", "LateInitialize"))},
				Rendered:  []*unstructured.Unstructured{rds(class("db.t3.large"), gate("Observe", "LateInitialize"), allowances(pending))},
				Wanted:    []*unstructured.Unstructured{rds(class("db.t3.large"))},
			},
			want: Plan{
				Admission: AdmissionPlan{Allowed: true},
				Composite: &Composite{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Propagation: "1 of 2 held"},
				Resources: []Resource{{
					Resource: "rds", APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-1", Action: ActionUpdate,
					Gated: true, Gate: []string{"Observe", "LateInitialize"},
					Pending: []string{"External Update of spec.forProvider.instanceClass (generation 2, by hans@example.com)"},
					Changes: []Change{{Path: "spec.forProvider.instanceClass", Verb: "Mutate", From: "db.t3.small", To: "db.t3.large", Outcome: Held, Reason: "propagation control holds it for a later batch: 1 of 2 held"}},
				}},
				Summary: Summary{Held: 1},
			},
		},
		"UngatedCreateAndKeptDelete": {
			in: Inputs{
				Admission: Admission{Allowed: true},
				XR:        xr(),
				Observed:  []*unstructured.Unstructured{rds()},
				Rendered: []*unstructured.Unstructured{rds(), func() *unstructured.Unstructured {
					u := rds()
					u.SetName("")
					u.SetAnnotations(map[string]string{"crossplane.io/composition-resource-name": "replica"})
					return u
				}()},
				Wanted: []*unstructured.Unstructured{},
			},
			want: Plan{
				Admission: AdmissionPlan{Allowed: true},
				Composite: &Composite{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db"},
				Resources: []Resource{
					{Resource: "rds", APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-1", Action: ActionDelete,
						Changes: []Change{{Verb: "Delete", Outcome: Withheld, Reason: "function-kausality keeps the observed value"}}},
					{Resource: "replica", APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Action: ActionCreate,
						Changes: []Change{{Verb: "Create", Outcome: Reaches, Reason: "not gated: no AllowancePolicy restricts its kind"}}},
				},
				Summary: Summary{Reaches: 1, Withheld: 1},
			},
		},
		"NothingChanges": {
			in: Inputs{
				Admission: Admission{Allowed: true},
				XR:        xr(),
				Observed:  []*unstructured.Unstructured{rds(gate("Observe", "LateInitialize"))},
				Rendered:  []*unstructured.Unstructured{rds(gate("Observe", "LateInitialize"))},
				Wanted:    []*unstructured.Unstructured{rds()},
			},
			want: Plan{
				Admission: AdmissionPlan{Allowed: true},
				Composite: &Composite{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db"},
				Resources: []Resource{{Resource: "rds", APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-1", Action: ActionNone,
					Gated: true, Gate: []string{"Observe", "LateInitialize"}}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Compare(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Compare: -want +got:\n%s", diff)
			}
		})
	}
}

func TestBlocked(t *testing.T) {
	cases := map[string]struct {
		s    Summary
		want bool
	}{
		"Clean":    {Summary{Reaches: 2}, false},
		"Held":     {Summary{Held: 1}, false},
		"Withheld": {Summary{Reaches: 1, Withheld: 1}, true},
		"Denied":   {Summary{Denied: true}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (Plan{Summary: tc.s}).Blocked(); got != tc.want {
				t.Errorf("Blocked() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWithheldReason(t *testing.T) {
	r := reasoner{messages: []string{
		`resource a (Bucket a-1): withheld Mutate spec.x: reason one; resource b (Bucket b-1): withheld Mutate spec.y: reason two; policies: p`,
	}}
	cases := map[string]struct{ key, path, want string }{
		"First":     {"a", "spec.x", "reason one"},
		"Second":    {"b", "spec.y", "reason two; policies: p"},
		"Under":     {"b", "spec.y.z", "reason two; policies: p"},
		"Whole":     {"b", "", "reason two; policies: p"},
		"Unmatched": {"c", "spec.z", "function-kausality keeps the observed value"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := r.withheld(tc.key, tc.path); got != tc.want {
				t.Errorf("withheld(%q, %q) = %q, want %q", tc.key, tc.path, got, tc.want)
			}
		})
	}
}
