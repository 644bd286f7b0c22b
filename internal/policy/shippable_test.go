package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

func TestShippable(t *testing.T) {
	bucket := Kinds{}.ChildOf("recorder.kausality.io/v1alpha1", "Bucket")
	child := func(paths ...string) allowance.Allowance {
		a := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "recorder.kausality.io", Resource: "buckets"}, Verbs: []string{"Update"}}
		for _, p := range paths {
			a.Mutations = append(a.Mutations, v1alpha1.MutationBound{JSONPath: p, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationAll}})
		}
		return a
	}
	external := allowance.Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}}, Verbs: []string{"Update"}}
	size := mutation.Mutation{Path: "spec.forProvider.size", Verb: v1alpha1.MutationMutate}
	region := mutation.Mutation{Path: "spec.forProvider.region", Verb: v1alpha1.MutationMutate}
	tag := mutation.Mutation{Path: "spec.forProvider.tags.tier", Verb: v1alpha1.MutationInsert}
	cases := map[string]struct {
		reason string
		chain  []allowance.Allowance
		want   []mutation.Mutation
	}{
		"NoChildAllowance":  {reason: "Without a ControllerChild allowance for the kind it is not restricted as a composed resource: everything ships.", chain: []allowance.Allowance{external}, want: []mutation.Mutation{size, region, tag}},
		"Bounded":           {reason: "Only what the chain's ControllerChild allowance covers ships.", chain: []allowance.Allowance{child("spec.forProvider.size"), external}, want: []mutation.Mutation{size}},
		"Wildcard":          {reason: "Bounds use the policy path syntax.", chain: []allowance.Allowance{child("spec.forProvider.tags[*]")}, want: []mutation.Mutation{tag}},
		"UnboundedChild":    {reason: "A ControllerChild allowance naming no fields covers all.", chain: []allowance.Allowance{child()}, want: []mutation.Mutation{size, region, tag}},
		"OtherKindIgnored":  {reason: "Allowances for other kinds bound nothing here.", chain: []allowance.Allowance{{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "rds", Resource: "instances"}, Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.x"}}}}, want: []mutation.Mutation{size, region, tag}},
		"UnionOfTwoBounded": {reason: "Two allowances along one chain cover together.", chain: []allowance.Allowance{child("spec.forProvider.size"), child("spec.forProvider.region")}, want: []mutation.Mutation{size, region}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Shippable(tc.chain, bucket, []mutation.Mutation{size, region, tag})
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nShippable(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
