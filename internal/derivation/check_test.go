package derivation

import (
	"strings"
	"testing"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// bucketComposition composes one bucket whose region and tags follow the
// XR, and writes its id back.
const bucketComposition = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: buckets}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XBucket}
  mode: Pipeline
  pipeline:
  - step: pt
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      patchSets:
      - name: common
        patches:
        - {type: FromCompositeFieldPath, fromFieldPath: spec.region, toFieldPath: spec.forProvider.region}
      resources:
      - name: bucket
        base: {apiVersion: s3.example.org/v1, kind: Bucket, spec: {forProvider: {}}}
        patches:
        - {type: PatchSet, patchSetName: common}
        - type: CombineFromComposite
          combine:
            variables: [{fromFieldPath: spec.team}, {fromFieldPath: spec.env}]
            strategy: string
            string: {fmt: "%s-%s"}
          toFieldPath: spec.forProvider.tags.owner
        - {type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: status.id}
  - step: templates
    functionRef: {name: function-go-templating}
`

func policyWith(rules ...v1alpha1.Rule) v1alpha1.AllowancePolicy {
	p := v1alpha1.AllowancePolicy{Spec: v1alpha1.AllowancePolicySpec{
		For:   v1alpha1.ObjectKind{APIGroup: "example.org", Kind: "XBucket"},
		Rules: rules,
	}}
	p.SetName("xbuckets")
	return p
}

func bucketRule(trigger string, paths ...string) v1alpha1.Rule {
	r := v1alpha1.Rule{Trigger: trigger}
	e := v1alpha1.PolicyEntry{Target: v1alpha1.Target{APIGroup: "s3.example.org", Resource: "buckets"}, Relation: v1alpha1.RelationControllerChild, Verbs: []string{v1alpha1.VerbUpdate}}
	for _, p := range paths {
		e.Mutations = append(e.Mutations, v1alpha1.MutationBound{JSONPath: p, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}})
	}
	r.Policies = append(r.Policies, e, v1alpha1.PolicyEntry{Target: v1alpha1.Target{External: map[string]string{"apiGroup": "s3.example.org", "kind": "Bucket"}}, Relation: v1alpha1.RelationExternal, Verbs: []string{v1alpha1.VerbUpdate}})
	return r
}

func readModel(t *testing.T, s string) *Model {
	t.Helper()
	c := &xpv1.Composition{}
	if err := yaml.Unmarshal([]byte(s), c); err != nil {
		t.Fatal(err)
	}
	m, err := Read(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheck(t *testing.T) {
	clean := policyWith(
		bucketRule("spec.env", "spec.forProvider.tags.owner"),
		bucketRule("spec.region", "spec.forProvider.region"),
		bucketRule("spec.team", "spec.forProvider.tags.owner"),
	)
	cases := map[string]struct {
		policies []v1alpha1.AllowancePolicy
		want     []string
	}{
		"CleanPair": {policies: []v1alpha1.AllowancePolicy{clean}},
		"PatchWithoutRule": {
			policies: []v1alpha1.AllowancePolicy{policyWith(
				bucketRule("spec.region", "spec.forProvider.region"),
				bucketRule("spec.team", "spec.forProvider.tags.owner"),
			)},
			want: []string{"Uncovered XBucket.example.org: spec.env: Composition buckets, resource bucket (Bucket): the CombineFromComposite patch from spec.team + spec.env to spec.forProvider.tags.owner: no rule lets a change of spec.env mutate buckets spec.forProvider.tags.owner nor reach the external resource of Bucket"},
		},
		"RuleWithoutPatch": {
			policies: []v1alpha1.AllowancePolicy{policyWith(append(clean.Spec.Rules, bucketRule("spec.size", "spec.forProvider.size"))...)},
			want:     []string{"Unused AllowancePolicy xbuckets: spec.size: spec.rules[3]: no patch reads it"},
		},
		"RuleWiderThanPatch": {
			policies: []v1alpha1.AllowancePolicy{policyWith(
				bucketRule("spec.env", "spec.forProvider.tags.owner"),
				bucketRule("spec.region", "spec.forProvider.region", "spec.forProvider.acl"),
				bucketRule("spec.team", "spec.forProvider.tags.owner"),
			)},
			want: []string{"Unused AllowancePolicy xbuckets: spec.region: spec.rules[1].policies[0]: grants buckets spec.forProvider.acl, which no patch from the trigger writes"},
		},
		"MutationOutsideBound": {
			policies: []v1alpha1.AllowancePolicy{policyWith(
				bucketRule("spec.env", "spec.forProvider.tags.owner"),
				bucketRule("spec.region", "spec.forProvider.zone"),
				bucketRule("spec.team", "spec.forProvider.tags.owner"),
			)},
			want: []string{
				"Uncovered XBucket.example.org: spec.region: Composition buckets, resource bucket (Bucket): the FromCompositeFieldPath patch from spec.region to spec.forProvider.region (patch set common): no rule lets a change of spec.region mutate buckets spec.forProvider.region",
				"Unused AllowancePolicy xbuckets: spec.region: spec.rules[1].policies[0]: grants buckets spec.forProvider.zone, which no patch from the trigger writes",
			},
		},
		"NoPolicy": {want: []string{"NoPolicy XBucket.example.org: *: no AllowancePolicy is for example.org/v1"}},
		"PolicyForAnotherVersion": {
			policies: []v1alpha1.AllowancePolicy{func() v1alpha1.AllowancePolicy {
				p := clean.DeepCopy()
				p.Spec.For.APIVersion = "v2"
				return *p
			}()},
			want: []string{"NoPolicy XBucket.example.org: *: no AllowancePolicy is for example.org/v1"},
		},
		"PolicyForAnotherKind": {
			policies: []v1alpha1.AllowancePolicy{func() v1alpha1.AllowancePolicy {
				p := clean.DeepCopy()
				p.Spec.For.Kind = "BucketClaim"
				return *p
			}()},
			want: []string{"NoPolicy XBucket.example.org: *: no AllowancePolicy is for example.org/v1"},
		},
	}
	m := readModel(t, bucketComposition)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rep, err := Check([]*Model{m}, tc.policies, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rep.Findings {
				got = append(got, f.String())
			}
			// Findings end with what to add (TestCheckUncovered pins
			// it); these pin what each says up to it.
			for i, g := range got {
				if i < len(tc.want) && strings.HasPrefix(g, tc.want[i]) {
					got[i] = tc.want[i]
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check(...): -want, +got:\n%s", diff)
			}
			if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "derive by experiment (--functions) renders it") {
				t.Errorf("Check(...): notes %q, want one on the go-templating step", rep.Notes)
			}
		})
	}
}

// TestDeriveBucket derives the bucket's policy: a patch set expanded, a
// Combine's two variables each a trigger, the to-composite patch without a
// rule, and the go-templating step noted.
func TestDeriveBucket(t *testing.T) {
	m := readModel(t, bucketComposition)
	r, err := Derive(m, Options{Deleting: DeletingDelete})
	if err != nil {
		t.Fatal(err)
	}
	var triggers []string
	for _, rl := range r.Policy.Spec.Rules {
		triggers = append(triggers, rl.Trigger)
	}
	if diff := cmp.Diff([]string{"spec.env", "spec.region", "spec.team"}, triggers); diff != "" {
		t.Errorf("triggers: -want, +got:\n%s", diff)
	}
	// The base has no tags: setting the first one inserts the map.
	wantBounds := []v1alpha1.MutationBound{
		{JSONPath: "spec.forProvider.tags.owner", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert, v1alpha1.MutationMutate, v1alpha1.MutationDelete}},
		{JSONPath: "spec.forProvider.tags", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert, v1alpha1.MutationDelete}},
	}
	if diff := cmp.Diff(wantBounds, r.Policy.Spec.Rules[0].Policies[0].Mutations); diff != "" {
		t.Errorf("spec.env mutations: -want, +got:\n%s", diff)
	}
	if got := r.Policy.Spec.Deleting.Policies; len(got) != 2 || got[1].Verbs[0] != v1alpha1.VerbDelete {
		t.Errorf("deleting: %v, want the bucket and its external Delete", got)
	}
	if !strings.Contains(strings.Join(r.Comments[0], "\n"), `"combine":"string"`) {
		t.Errorf("comments %q do not keep the Combine", r.Comments[0])
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"step templates (function function-go-templating)", "plural of Bucket.s3.example.org is guessed as buckets", "no XRD"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q do not say %q", notes, want)
		}
	}
	rep, err := Check([]*Model{m}, []v1alpha1.AllowancePolicy{*r.Policy}, nil)
	if err != nil || len(rep.Findings) > 0 {
		t.Errorf("Check of the derived policy: %v, %v", rep.Findings, err)
	}
}

func TestReadErrors(t *testing.T) {
	cases := map[string]struct{ edit, want string }{
		"MissingPatchSet": {edit: "patchSetName: common}", want: `patch set "nope" does not exist`},
		"BadPath":         {edit: "toFieldPath: spec.forProvider.region}", want: "toFieldPath"},
	}
	repl := map[string]string{"MissingPatchSet": "patchSetName: nope}", "BadPath": "toFieldPath: 'spec.forProvider[region'}"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &xpv1.Composition{}
			if err := yaml.Unmarshal([]byte(strings.Replace(bucketComposition, tc.edit, repl[name], 1)), c); err != nil {
				t.Fatal(err)
			}
			_, err := Read(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Composition buckets") {
				t.Errorf("Read(...): %v, want an error naming the Composition and %q", err, tc.want)
			}
		})
	}
}

// TestCheckUnrestricted: a managed kind the Composition composes that no
// policy restricts is a gap (a Composition edit of it reaches the cloud
// without an UpgradeAllowance); a Kubernetes kind without an external
// resource is not.
func TestCheckUnrestricted(t *testing.T) {
	more := strings.Replace(bucketComposition, "  - step: templates\n", `      - name: bucket-policy
        base: {apiVersion: s3.example.org/v1, kind: BucketPolicy, spec: {forProvider: {policy: "{}"}}}
      - name: settings
        base: {apiVersion: v1, kind: ConfigMap, data: {a: b}}
  - step: templates
`, 1)
	if more == bucketComposition {
		t.Fatal("bucketComposition no longer has the step this test adds resources before")
	}
	clean := policyWith(
		bucketRule("spec.env", "spec.forProvider.tags.owner"),
		bucketRule("spec.region", "spec.forProvider.region"),
		bucketRule("spec.team", "spec.forProvider.tags.owner"),
	)
	rep, err := Check([]*Model{readModel(t, more)}, []v1alpha1.AllowancePolicy{clean}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.String())
	}
	want := []string{"Unrestricted XBucket.example.org: BucketPolicy.s3.example.org: Composition buckets composes BucketPolicy (resource bucket-policy), a managed kind no policy for XBucket.example.org restricts: its changes, a Composition edit's included, reach the cloud without a cause"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check(...): -want, +got:\n%s", diff)
	}
}

// TestCheckUncovered: check reports a patch into a composed resource's
// spec that no rule covers by where it is (Composition, resource name,
// fromFieldPath and toFieldPath) and what to add: the entries derive
// writes for it.
func TestCheckUncovered(t *testing.T) {
	const input = `resources:
- name: nodeGroupPublic
  base: {apiVersion: eks.aws.m.upbound.io/v1beta1, kind: NodeGroup, spec: {forProvider: {instanceTypes: [t3.medium]}}}
  patches:
  - {fromFieldPath: spec.parameters.region, toFieldPath: spec.forProvider.region}
  - {fromFieldPath: spec.parameters.nodes.instanceType, toFieldPath: 'spec.forProvider.instanceTypes[0]'}
  - type: CombineFromComposite
    combine: {variables: [{fromFieldPath: spec.parameters.team}, {fromFieldPath: spec.parameters.env}], strategy: string, string: {fmt: "%s-%s"}}
    toFieldPath: spec.forProvider.tags.owner`
	policyFor := func(rules ...v1alpha1.Rule) []v1alpha1.AllowancePolicy {
		p := v1alpha1.AllowancePolicy{Spec: v1alpha1.AllowancePolicySpec{For: v1alpha1.ObjectKind{APIGroup: "example.org", APIVersion: "v1", Kind: "XForm"}, Rules: rules}}
		p.SetName("xforms")
		return []v1alpha1.AllowancePolicy{p}
	}
	region := rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.region", mutateOnly)))
	owner := nodeGroups(bound("spec.forProvider.tags.owner", everyVerb), bound("spec.forProvider.tags", insertDelete))
	covered := []v1alpha1.Rule{
		rule("spec.parameters.env", owner),
		rule("spec.parameters.nodes.instanceType", nodeGroups(bound("spec.forProvider.instanceTypes[0]", mutateOnly))),
		region,
		rule("spec.parameters.team", owner),
	}
	uncoveredAt := func(field, to, message string, add ...v1alpha1.PolicyEntry) Finding {
		return Finding{Kind: FindingUncovered, XR: "XForm.example.org", Field: field, Composition: "xforms", Resource: "nodeGroupPublic", To: to, Message: message, Add: add}
	}
	type args struct {
		policies []v1alpha1.AllowancePolicy
	}
	type want struct {
		findings []Finding
		// line is the first finding as check prints it, when set.
		line string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Covered": {
			reason: "The policy derive writes covers every patch.",
			args:   args{policies: policyFor(covered...)},
		},
		"IndexedPatchWithoutRule": {
			reason: "The EKS node group's instance type patch with no rule: check names where the patch is and adds the rule derive writes.",
			args:   args{policies: policyFor(covered[0], covered[2], covered[3])},
			want: want{
				findings: []Finding{uncoveredAt("spec.parameters.nodes.instanceType", "spec.forProvider.instanceTypes[0]",
					"Composition xforms, resource nodeGroupPublic (NodeGroup): the FromCompositeFieldPath patch from spec.parameters.nodes.instanceType to spec.forProvider.instanceTypes[0]: "+
						"no rule lets a change of spec.parameters.nodes.instanceType mutate nodegroups spec.forProvider.instanceTypes[0] nor reach the external resource of NodeGroup",
					nodeGroups(bound("spec.forProvider.instanceTypes[0]", mutateOnly))...)},
				line: "Uncovered XForm.example.org: spec.parameters.nodes.instanceType: Composition xforms, resource nodeGroupPublic (NodeGroup): " +
					"the FromCompositeFieldPath patch from spec.parameters.nodes.instanceType to spec.forProvider.instanceTypes[0]: " +
					"no rule lets a change of spec.parameters.nodes.instanceType mutate nodegroups spec.forProvider.instanceTypes[0] nor reach the external resource of NodeGroup; " +
					"add to the policies of the rule with trigger spec.parameters.nodes.instanceType (a new rule if there is none): " +
					"{target: {apiGroup: eks.aws.m.upbound.io, apiVersion: v1beta1, resource: nodegroups}, relation: ControllerChild, verbs: [Update], mutations: [{jsonPath: 'spec.forProvider.instanceTypes[0]', verbs: [Mutate]}]}, " +
					"{target: {external: {apiGroup: eks.aws.m.upbound.io, kind: NodeGroup}}, relation: External, verbs: [Update]}",
			},
		},
		"RuleWithoutExternal": {
			reason: "A rule that mutates the node group but grants no External Update: the change is kept from the cloud, so check adds only that.",
			args: args{policies: policyFor(covered[0],
				rule("spec.parameters.nodes.instanceType", nodeGroups(bound("spec.forProvider.instanceTypes[0]", mutateOnly))[:1]), covered[2], covered[3])},
			want: want{findings: []Finding{uncoveredAt("spec.parameters.nodes.instanceType", "spec.forProvider.instanceTypes[0]",
				"Composition xforms, resource nodeGroupPublic (NodeGroup): the FromCompositeFieldPath patch from spec.parameters.nodes.instanceType to spec.forProvider.instanceTypes[0]: "+
					"no rule lets a change of spec.parameters.nodes.instanceType reach the external resource of NodeGroup",
				nodeGroups()[1])}},
		},
		"RuleForAnotherElement": {
			reason: "A rule bounding another element of the list covers neither the patch nor anything a patch writes.",
			args: args{policies: policyFor(covered[0],
				rule("spec.parameters.nodes.instanceType", nodeGroups(bound("spec.forProvider.instanceTypes[1]", mutateOnly))), covered[2], covered[3])},
			want: want{findings: []Finding{
				uncoveredAt("spec.parameters.nodes.instanceType", "spec.forProvider.instanceTypes[0]",
					"Composition xforms, resource nodeGroupPublic (NodeGroup): the FromCompositeFieldPath patch from spec.parameters.nodes.instanceType to spec.forProvider.instanceTypes[0]: "+
						"no rule lets a change of spec.parameters.nodes.instanceType mutate nodegroups spec.forProvider.instanceTypes[0]",
					nodeGroups(bound("spec.forProvider.instanceTypes[0]", mutateOnly))[0]),
				{Kind: FindingUnused, XR: "XForm.example.org", Policy: "xforms", Field: "spec.parameters.nodes.instanceType",
					Message: "spec.rules[1].policies[0]: grants nodegroups spec.forProvider.instanceTypes[1], which no patch from the trigger writes"},
			}},
		},
		"CombineVariableWithoutRule": {
			reason: "One variable of a Combine without a rule: check names it, the patch's other variable and the bounds derive writes, the tags map the first tag inserts included.",
			args:   args{policies: policyFor(covered[1], covered[2], covered[3])},
			want: want{findings: []Finding{uncoveredAt("spec.parameters.env", "spec.forProvider.tags.owner",
				"Composition xforms, resource nodeGroupPublic (NodeGroup): the CombineFromComposite patch from spec.parameters.team + spec.parameters.env to spec.forProvider.tags.owner: "+
					"no rule lets a change of spec.parameters.env mutate nodegroups spec.forProvider.tags.owner nor reach the external resource of NodeGroup",
				owner...)}},
		},
	}
	k := formKindsOf(t)
	m, err := Read(formComposition(t, input))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rep, err := Check([]*Model{m}, tc.args.policies, k)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.findings, rep.Findings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nCheck(...): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.line != "" && len(rep.Findings) > 0 {
				if diff := cmp.Diff(tc.want.line, rep.Findings[0].String()); diff != "" {
					t.Errorf("%s\nFinding.String(): -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}
