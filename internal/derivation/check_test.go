package derivation

import (
	"strings"
	"testing"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
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
			want: []string{"Uncovered XBucket.example.org: spec.env: no rule lets a change of it mutate buckets spec.forProvider.tags.owner"},
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
				"Uncovered XBucket.example.org: spec.region: no rule lets a change of it mutate buckets spec.forProvider.region",
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
			// Messages end with the patch, for people; the tests pin
			// what each finding says up to it.
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
	if got := r.Policy.Spec.Rules[0].Policies[0].Mutations; len(got) != 1 || got[0].JSONPath != "spec.forProvider.tags.owner" {
		t.Errorf("spec.env mutations: %v", got)
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
