package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// FuzzCompile feeds policy authors' text (CEL, trigger, capture and mutation
// paths) through Compile and, when it compiles, through evaluation. Neither
// may panic, and an invalid policy must say why.
func FuzzCompile(f *testing.F) {
	f.Add("!has(object.status.observedGeneration)", "object.spec.size > oldObject.spec.size", "spec.size", "metadata.annotations[jira]", "spec.forProvider.instanceClass")
	f.Add("", "'jira' in object.metadata.annotations", "spec.containers[*].image", "spec", "*")
	f.Add("object.(", "1 +", "spec[", "]", "a[")
	f.Add("object.spec.items.all(a, a != 'x')", "size(object.spec) > 2", "spec['a.b']", "metadata.labels", "spec.x[0]")
	f.Fuzz(func(t *testing.T, when, cond, trigger, capture, path string) {
		p := &v1alpha1.AllowancePolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz"},
			Spec: v1alpha1.AllowancePolicySpec{
				For:          v1alpha1.ObjectKind{APIGroup: "example.com", Kind: "XDatabase"},
				Initializing: &v1alpha1.InitializingPhase{When: when},
				Rules: []v1alpha1.Rule{{
					Trigger: trigger, Conditions: []string{cond}, Capture: []string{capture},
					Policies: []v1alpha1.PolicyEntry{{
						Target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", Resource: "rdsinstances"}, Verbs: []string{"Update"},
						Mutations: []v1alpha1.MutationBound{{JSONPath: path, Verbs: []v1alpha1.MutationVerb{"Mutate"}}},
					}},
				}},
			},
		}
		c, err := Compile(p)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("Compile() returned an empty error")
			}
			return
		}
		s := Set{policies: []*Compiled{c}}
		old := map[string]any{"metadata": map[string]any{"name": "db", "generation": int64(1)}, "spec": map[string]any{"size": "small"}, "status": map[string]any{"observedGeneration": int64(1)}}
		obj := map[string]any{"metadata": map[string]any{"name": "db", "generation": int64(1), "annotations": map[string]any{"jira": "X-1"}}, "spec": map[string]any{"size": "large"}, "status": map[string]any{"observedGeneration": int64(1)}}
		_, _ = s.Phase(obj)
		if _, err := s.Evaluate(Request{Object: obj, OldObject: old, User: Identity{Username: "u"}}); err != nil {
			t.Fatalf("Evaluate() of a compiled policy: %v", err)
		}
	})
}
