package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

func TestPermitting(t *testing.T) {
	p := v1alpha1.AllowancePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: v1alpha1.AllowancePolicySpec{
			For:      v1alpha1.ObjectKind{APIGroup: "example.org", Kind: "XDatabase"},
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: "alice", MayInitiate: true}, {Kind: v1alpha1.SubjectGroup, Name: "dba", MayInitiate: true}},
			Rules: []v1alpha1.Rule{
				{Trigger: "spec.size", Conditions: []string{"true"}, Policies: []v1alpha1.PolicyEntry{
					{Target: v1alpha1.Target{APIGroup: "rds.aws.m.upbound.io", Resource: "instances"}, Verbs: []string{v1alpha1.VerbUpdate},
						Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceType", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}}},
					{Target: v1alpha1.Target{External: map[string]string{"kind": "Instance"}}, Verbs: []string{v1alpha1.VerbUpdate}},
				}},
				{Trigger: "spec.tags", Policies: []v1alpha1.PolicyEntry{
					{Target: v1alpha1.Target{APIGroup: "s3.aws.m.upbound.io", Resource: "buckets"}, Verbs: []string{v1alpha1.VerbAll}},
				}},
				{Trigger: "spec.everything"},
			},
			Initializing: &v1alpha1.InitializingPhase{Policies: []v1alpha1.PolicyEntry{
				{Target: v1alpha1.Target{APIGroup: "rds.aws.m.upbound.io", Resource: "instances"}, Verbs: []string{v1alpha1.VerbCreate}},
			}},
		},
	}
	set, errs := NewCache().For("example.org/v1alpha1", "XDatabase", []v1alpha1.AllowancePolicy{p})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	instance := Child{APIGroup: "rds.aws.m.upbound.io", APIVersion: "v1beta1", Kind: "Instance", Resource: "instances"}
	mutate := func(path string) *mutation.Mutation {
		return &mutation.Mutation{Path: path, Verb: v1alpha1.MutationMutate}
	}
	cases := map[string]struct {
		reason string
		child  Child
		change Change
		want   []string
	}{
		"CoveredField": {
			reason: "The rule's mutations cover the field; the rule without policies covers everything.",
			child:  instance, change: Change{Relation: v1alpha1.RelationControllerChild, Verb: v1alpha1.VerbUpdate, Mutation: mutate("spec.forProvider.instanceType")},
			want: []string{"spec.rules[0].policies[0]", "spec.rules[2]"},
		},
		"UncoveredField": {
			reason: "A field the mutations do not name is covered only by the rule without policies.",
			child:  instance, change: Change{Relation: v1alpha1.RelationControllerChild, Verb: v1alpha1.VerbUpdate, Mutation: mutate("spec.forProvider.engine")},
			want: []string{"spec.rules[2]"},
		},
		"Create": {
			reason: "Creating an instance: the initializing phase grants it.",
			child:  instance, change: Change{Relation: v1alpha1.RelationControllerChild, Verb: v1alpha1.VerbCreate},
			want: []string{"spec.rules[2]", "spec.initializing.policies[0]"},
		},
		"Gate": {
			reason: "Opening the gate: the External entry naming the kind.",
			child:  instance, change: Change{Relation: v1alpha1.RelationExternal, Verb: v1alpha1.VerbAll},
			want: []string{"spec.rules[0].policies[1]", "spec.rules[2]"},
		},
		"Wildcard": {
			reason: "Verb * grants any verb of its target.",
			child:  Child{APIGroup: "s3.aws.m.upbound.io", Kind: "Bucket", Resource: "buckets"}, change: Change{Relation: v1alpha1.RelationControllerChild, Verb: v1alpha1.VerbDelete},
			want: []string{"spec.rules[1].policies[0]", "spec.rules[2]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range set.Permitting(tc.child, tc.change) {
				got = append(got, p.At)
				if p.Policy != "db" || len(p.Subjects) != 2 {
					t.Errorf("%s\nPermitting: %+v names policy %q with %d subjects, want db with 2", tc.reason, p, p.Policy, len(p.Subjects))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nPermitting(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	c := set.Policies()[0]
	if !c.MayInitiate(Identity{Username: "alice"}) || c.MayInitiate(Identity{Username: "bob"}) || !c.HasInitiatingGroup() {
		t.Errorf("MayInitiate(alice), !MayInitiate(bob), HasInitiatingGroup: want all true")
	}
}
