package derivation

import (
	"strings"
	"testing"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// The tests in this file derive a policy from one form of
// function-patch-and-transform patch each and pin the exact rules derive
// writes (and the notes it writes instead of a rule), and that the derived
// policy checks clean against its Composition.

// formXRSchema is the XR every form composes from: spec.parameters with
// required and optional fields of each shape.
const formXRSchema = `
type: object
properties:
  spec:
    type: object
    required: [parameters]
    properties:
      parameters:
        type: object
        required: [region, size, nodes, labels, subnets, network]
        properties:
          region: {type: string}
          size: {type: integer}
          team: {type: string}
          env: {type: string}
          tier: {type: string}
          instanceType: {type: string}
          labels: {type: object, additionalProperties: {type: string}}
          network: {type: object, properties: {vpcId: {type: string}}}
          nodes:
            type: object
            required: [instanceType]
            properties:
              instanceType: {type: string}
              count: {type: integer}
          subnets:
            type: array
            minItems: 2
            items: {type: object, required: [cidrBlock], properties: {cidrBlock: {type: string}}}
          items:
            type: array
            items: {type: object, properties: {x: {type: string}}}
`

// formKinds resolves the kinds the forms compose, and the XR's schema.
type formKinds struct{ xr *Schema }

func (formKinds) Resolve(gvk schema.GroupVersionKind) (Kind, bool, error) {
	switch gvk.Kind {
	case "NodeGroup":
		return Kind{Resource: "nodegroups", Class: policy.ClassManaged}, true, nil
	case "ConfigMap":
		return Kind{Resource: "configmaps", Class: policy.ClassUnmanaged}, true, nil
	case "XForm":
		return Kind{Resource: "xforms", Class: policy.ClassComposite}, true, nil
	}
	return Kind{}, false, nil
}

func (k formKinds) Schema(schema.GroupVersionKind) *Schema { return k.xr }

// formComposition is a Composition whose one patch-and-transform step has
// the input, written at the input's top level (resources:, patchSets:,
// environment:).
func formComposition(t *testing.T, input string) *xpv1.Composition {
	t.Helper()
	var b strings.Builder
	b.WriteString(`apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xforms}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XForm}
  mode: Pipeline
  pipeline:
  - step: pt
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
`)
	for _, l := range strings.Split(strings.TrimSpace(input), "\n") {
		b.WriteString("      " + l + "\n")
	}
	c := &xpv1.Composition{}
	if err := yaml.Unmarshal([]byte(b.String()), c); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	return c
}

func formKindsOf(t *testing.T) formKinds {
	t.Helper()
	s := &Schema{}
	if err := yaml.Unmarshal([]byte(formXRSchema), s); err != nil {
		t.Fatal(err)
	}
	return formKinds{xr: s}
}

// formArgs is a patch-and-transform input.
type formArgs struct {
	input string
}

// formWant is what derive writes for it: the rules, the notes, or the
// error Read returns (a substring).
type formWant struct {
	rules []v1alpha1.Rule
	notes []string
	err   string
}

// testForm derives the policy of the case's input and compares rules and
// notes; the derived policy must check clean against the Composition.
func testForm(t *testing.T, reason string, args formArgs, want formWant) {
	t.Helper()
	k := formKindsOf(t)
	m, err := Read(formComposition(t, args.input))
	if want.err != "" || err != nil {
		if err == nil || !strings.Contains(err.Error(), want.err) || want.err == "" {
			t.Fatalf("%s\nRead(...): %v, want an error with %q", reason, err, want.err)
		}
		return
	}
	r, err := Derive(m, Options{Resolver: k, XRSchema: k.xr})
	if err != nil {
		t.Fatalf("%s\nDerive(...): %v", reason, err)
	}
	if diff := cmp.Diff(want.rules, r.Policy.Spec.Rules, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s\nDerive(...) rules: -want, +got:\n%s", reason, diff)
	}
	if diff := cmp.Diff(want.notes, r.Notes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s\nDerive(...) notes: -want, +got:\n%s", reason, diff)
	}
	rep, err := Check([]*Model{m}, []v1alpha1.AllowancePolicy{*r.Policy}, k)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("%s\ncheck of the derived policy: %s", reason, f)
	}
}

var (
	mutateOnly   = []v1alpha1.MutationVerb{v1alpha1.MutationMutate}
	everyVerb    = []v1alpha1.MutationVerb{v1alpha1.MutationInsert, v1alpha1.MutationMutate, v1alpha1.MutationDelete}
	insertDelete = []v1alpha1.MutationVerb{v1alpha1.MutationInsert, v1alpha1.MutationDelete}
)

func bound(path string, verbs []v1alpha1.MutationVerb) v1alpha1.MutationBound {
	return v1alpha1.MutationBound{JSONPath: path, Verbs: verbs}
}

// nodeGroups are the entries a rule gives a NodeGroup: the mutations of
// the composed resource, and the update of its cloud resource.
func nodeGroups(bs ...v1alpha1.MutationBound) []v1alpha1.PolicyEntry {
	return []v1alpha1.PolicyEntry{
		{Target: v1alpha1.Target{APIGroup: "eks.aws.m.upbound.io", APIVersion: "v1beta1", Resource: "nodegroups"}, Relation: v1alpha1.RelationControllerChild,
			Verbs: []string{v1alpha1.VerbUpdate}, Mutations: bs},
		{Target: v1alpha1.Target{External: map[string]string{"apiGroup": "eks.aws.m.upbound.io", "kind": "NodeGroup"}}, Relation: v1alpha1.RelationExternal,
			Verbs: []string{v1alpha1.VerbUpdate}},
	}
}

// configMaps is the entry a rule gives a ConfigMap, which has no cloud
// resource.
func configMaps(bs ...v1alpha1.MutationBound) []v1alpha1.PolicyEntry {
	return []v1alpha1.PolicyEntry{{Target: v1alpha1.Target{APIVersion: "v1", Resource: "configmaps"}, Relation: v1alpha1.RelationControllerChild,
		Verbs: []string{v1alpha1.VerbUpdate}, Mutations: bs}}
}

func rule(trigger string, entries ...[]v1alpha1.PolicyEntry) v1alpha1.Rule {
	r := v1alpha1.Rule{Trigger: trigger}
	for _, e := range entries {
		r.Policies = append(r.Policies, e...)
	}
	return r
}

// nodeGroup is a resource of the forms, a NodeGroup with the base's
// forProvider and the patches given, both in YAML flow style.
func nodeGroup(forProvider, patches string) string {
	return `- name: nodeGroupPublic
  base: {apiVersion: eks.aws.m.upbound.io/v1beta1, kind: NodeGroup, spec: {forProvider: ` + forProvider + `}}
  patches: ` + patches
}

// noRuleCreation is the end of the note on a value no rule can let
// through, as derive writes it.
const noRuleCreation = "While the XR is being created, inserting the value is part of the creation, and so is a change of it as long as nobody changed the XR's spec; once the XR is created, a change of it is withheld"

func TestDeriveIndexedAndWildcardPaths(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   formArgs
		want   formWant
	}{
		"IndexedToFieldPath": {
			reason: "The node group of upbound's configuration-aws-eks: a string into the first element of a list the base sets only mutates that element.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{instanceTypes: [t3.medium]}`,
				`[{type: FromCompositeFieldPath, fromFieldPath: spec.parameters.nodes.instanceType, toFieldPath: 'spec.forProvider.instanceTypes[0]'}]`)},
			want: formWant{rules: []v1alpha1.Rule{
				rule("spec.parameters.nodes.instanceType", nodeGroups(bound("spec.forProvider.instanceTypes[0]", mutateOnly))),
			}},
		},
		"IndexedToFieldPathWithoutList": {
			reason: "When the base has no list, setting the optional source inserts the whole list and unsetting it deletes the list: the rule grants both on the list.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: spec.parameters.instanceType, toFieldPath: 'spec.forProvider.instanceTypes[0]'}]`)},
			want: formWant{rules: []v1alpha1.Rule{
				rule("spec.parameters.instanceType", nodeGroups(bound("spec.forProvider.instanceTypes[0]", everyVerb), bound("spec.forProvider.instanceTypes", insertDelete))),
			}},
		},
		"IndexedFromFieldPath": {
			reason: "An element of a list the XRD says has at least two is always there: its trigger names the element, and the target only mutates.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: 'spec.parameters.subnets[1].cidrBlock', toFieldPath: spec.forProvider.cidrBlock}]`)},
			want: formWant{rules: []v1alpha1.Rule{
				rule("spec.parameters.subnets[1].cidrBlock", nodeGroups(bound("spec.forProvider.cidrBlock", mutateOnly))),
			}},
		},
		"WildcardToFieldPath": {
			reason: "function-patch-and-transform writes a wildcard toFieldPath into every element that has the field: the rule bounds the wildcard path, and the elements only mutate.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{taints: [{key: a, value: x}, {key: b, value: y}]}`,
				`[{fromFieldPath: spec.parameters.tier, toFieldPath: 'spec.forProvider.taints[*].value'}]`)},
			want: formWant{rules: []v1alpha1.Rule{
				rule("spec.parameters.tier", nodeGroups(bound("spec.forProvider.taints[*].value", mutateOnly))),
			}},
		},
		"WildcardFromFieldPath": {
			reason: "function-patch-and-transform does not expand a wildcard fromFieldPath (a list there fails the pipeline): the patch never carries a value, so no rule.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: 'spec.parameters.items[*].x', toFieldPath: spec.forProvider.x}]`)},
			want: formWant{notes: []string{
				"resource nodeGroupPublic: the FromCompositeFieldPath patch from spec.parameters.items[*].x to spec.forProvider.x: no rule, function-patch-and-transform reads fromFieldPath without expanding [*] (a list there fails the pipeline, a map has no key *), so the patch never carries a value",
			}},
		},
		"LabelKeyWithDotsOnUnmanagedKind": {
			reason: "A ConfigMap's own labels are compared key by key: the rule names the key in brackets, since it holds dots.",
			args: formArgs{input: `resources:
- name: settings
  base: {apiVersion: v1, kind: ConfigMap, data: {a: b}}
  patches:
  - {fromFieldPath: spec.parameters.team, toFieldPath: 'metadata.labels[foo.bar/baz]'}`},
			want: formWant{rules: []v1alpha1.Rule{
				rule("spec.parameters.team", configMaps(bound("metadata.labels[foo.bar/baz]", everyVerb))),
			}},
		},
		"LabelKeyOnManagedKind": {
			reason: "The function compares only a managed resource's spec: a rule for its labels would bound nothing.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: spec.parameters.team, toFieldPath: 'metadata.labels[foo.bar/baz]'}]`)},
			want: formWant{notes: []string{
				"spec.parameters.team → nodeGroupPublic (NodeGroup) metadata.labels[foo.bar/baz]: no rule, the function compares only the spec of a managed kind",
			}},
		},
		"LabelKeyFromXRMetadata": {
			reason: "Admission watches only the XR's spec, so no trigger names its labels.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: 'metadata.labels[foo.bar/baz]', toFieldPath: spec.forProvider.tags.team}]`)},
			want: formWant{notes: []string{
				"metadata.labels[foo.bar/baz] → nodeGroupPublic (NodeGroup) spec.forProvider.tags.team: no rule, only changes of the XR's spec are watched. " + noRuleCreation,
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testForm(t, tc.reason, tc.args, tc.want) })
	}
}

func TestDeriveFromCompositeFieldPath(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   formArgs
		want   formWant
	}{
		"RequiredSource": {
			reason: "A field the XRD requires is always there: a change of it only mutates the target.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{type: FromCompositeFieldPath, fromFieldPath: spec.parameters.region, toFieldPath: spec.forProvider.region}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.region", mutateOnly)))}},
		},
		"OptionalSourceBaseSetsTarget": {
			reason: "An optional field into a target the base sets: unsetting it leaves the base's value, so the target only mutates.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{diskSize: 20}`,
				`[{fromFieldPath: spec.parameters.nodes.count, toFieldPath: spec.forProvider.diskSize}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.nodes.count", nodeGroups(bound("spec.forProvider.diskSize", mutateOnly)))}},
		},
		"OptionalSource": {
			reason: "An optional field into a target the base lacks: the target appears and vanishes with it.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: spec.parameters.env, toFieldPath: spec.forProvider.environment}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.env", nodeGroups(bound("spec.forProvider.environment", everyVerb)))}},
		},
		"ToFieldPathDefaultsToFromFieldPath": {
			reason: "Without toFieldPath the patch writes the same path in the composed resource.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: spec.parameters.region}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.region", nodeGroups(bound("spec.parameters.region", mutateOnly)))}},
		},
		"ObjectSource": {
			reason: "An object copied whole: a change of it inserts and deletes keys below the target, even though the XRD requires it.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: spec.parameters.labels, toFieldPath: spec.forProvider.labels}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.labels", nodeGroups(bound("spec.forProvider.labels", everyVerb)))}},
		},
		"MergingToFieldPathPolicy": {
			reason: "A value merged into the target adds keys beside the base's.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{tags: {owner: platform}}`,
				`[{fromFieldPath: spec.parameters.labels, toFieldPath: spec.forProvider.tags, policy: {toFieldPath: MergeObjects}}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.labels", nodeGroups(bound("spec.forProvider.tags", everyVerb)))}},
		},
		"FromStatus": {
			reason: "The XR's status is Crossplane's: no subject changes it, so no rule; the note says what the creation lets through.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{fromFieldPath: status.clusterName, toFieldPath: spec.forProvider.clusterName, policy: {fromFieldPath: Required}}]`)},
			want: formWant{notes: []string{
				"status.clusterName → nodeGroupPublic (NodeGroup) spec.forProvider.clusterName, required: no rule, Crossplane writes the XR's status and no subject changes it. " + noRuleCreation,
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testForm(t, tc.reason, tc.args, tc.want) })
	}
}

func TestDeriveCombineFromComposite(t *testing.T) {
	combine := func(vars, to string) string {
		return `[{type: CombineFromComposite, combine: {variables: ` + vars + `, strategy: string, string: {fmt: "%s-%s"}}, toFieldPath: ` + to + `}]`
	}
	cases := map[string]struct {
		reason string
		args   formArgs
		want   formWant
	}{
		"EveryVariableATrigger": {
			reason: "Each variable is a trigger of its own, granting the one target; both required, the string only mutates.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				combine(`[{fromFieldPath: spec.parameters.region}, {fromFieldPath: spec.parameters.nodes.instanceType}]`, "spec.forProvider.nodeGroupName"))},
			want: formWant{rules: []v1alpha1.Rule{
				rule("spec.parameters.nodes.instanceType", nodeGroups(bound("spec.forProvider.nodeGroupName", mutateOnly))),
				rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.nodeGroupName", mutateOnly))),
			}},
		},
		"OptionalVariable": {
			reason: "function-patch-and-transform skips a Combine missing a variable: the target appears and vanishes with the optional one, and where the base has no parent the parent does.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				combine(`[{fromFieldPath: spec.parameters.team}, {fromFieldPath: spec.parameters.region}]`, "spec.forProvider.tags.owner"))},
			want: formWant{rules: []v1alpha1.Rule{
				rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.tags.owner", everyVerb), bound("spec.forProvider.tags", insertDelete))),
				rule("spec.parameters.team", nodeGroups(bound("spec.forProvider.tags.owner", everyVerb), bound("spec.forProvider.tags", insertDelete))),
			}},
		},
		"VariableFromStatus": {
			reason: "A variable from the XR's status is no trigger; the spec variable still is.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				combine(`[{fromFieldPath: status.clusterName}, {fromFieldPath: spec.parameters.region}]`, "spec.forProvider.nodeGroupName"))},
			want: formWant{
				rules: []v1alpha1.Rule{rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.nodeGroupName", everyVerb)))},
				notes: []string{`status.clusterName + spec.parameters.region → nodeGroupPublic (NodeGroup) spec.forProvider.nodeGroupName, transforms: {"combine":"string","string":{"fmt":"%s-%s"}}: no rule, Crossplane writes the XR's status and no subject changes it. ` + noRuleCreation},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testForm(t, tc.reason, tc.args, tc.want) })
	}
}

func TestDeriveFromEnvironment(t *testing.T) {
	envNote := func(typ, from, to string) string {
		return "resource nodeGroupPublic: the " + typ + " patch from the environment's " + from + " to " + to + ": no rule, since no change of the XR causes it. " +
			"The value the resource is created with is part of the XR's creation; once the XR is created, a change of it is withheld unless the Kausality step's Input " +
			"lists the EnvironmentConfig it comes from under inputs and an UpgradeAllowance naming that EnvironmentConfig covers it"
	}
	cases := map[string]struct {
		reason string
		args   formArgs
		want   formWant
	}{
		"FromEnvironmentConfig": {
			reason: "A value the EnvironmentConfigs put in the environment: no XR trigger, so no rule; the note says how its change gets through.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{type: FromEnvironmentFieldPath, fromFieldPath: defaults.diskSize, toFieldPath: spec.forProvider.diskSize}]`)},
			want: formWant{notes: []string{envNote("FromEnvironmentFieldPath", "defaults.diskSize", "spec.forProvider.diskSize")}},
		},
		"CombineFromEnvironment": {
			reason: "A Combine of environment values: no rule either.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{type: CombineFromEnvironment, combine: {variables: [{fromFieldPath: account}, {fromFieldPath: zone}], strategy: string, string: {fmt: "%s-%s"}}, toFieldPath: spec.forProvider.subnet}]`)},
			want: formWant{notes: []string{envNote("CombineFromEnvironment", "account + zone", "spec.forProvider.subnet")}},
		},
		"EnvironmentWrittenFromXR": {
			reason: "The step's environment patches copy the XR's field into the environment before the resources are patched: the resource's patch from there is a rule of the XR field.",
			args: formArgs{input: `environment:
  patches:
  - {type: FromCompositeFieldPath, fromFieldPath: spec.parameters.size, toFieldPath: size}
resources:
` + nodeGroup(`{}`, `[{type: FromEnvironmentFieldPath, fromFieldPath: size, toFieldPath: spec.forProvider.diskSize}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.size", nodeGroups(bound("spec.forProvider.diskSize", mutateOnly)))}},
		},
		"EnvironmentObjectWrittenFromXR": {
			reason: "A field below what the environment patch copied traces to the same field below the XR's.",
			args: formArgs{input: `environment:
  patches:
  - {type: ToEnvironmentFieldPath, fromFieldPath: spec.parameters.network, toFieldPath: net}
resources:
` + nodeGroup(`{}`, `[{type: FromEnvironmentFieldPath, fromFieldPath: net.vpcId, toFieldPath: spec.forProvider.vpcId}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.network.vpcId", nodeGroups(bound("spec.forProvider.vpcId", everyVerb)))}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testForm(t, tc.reason, tc.args, tc.want) })
	}
}

func TestDerivePatchSets(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   formArgs
		want   formWant
	}{
		"InheritedPatches": {
			reason: "A PatchSet patch stands for its set's patches: each resource that uses it gets their rules, merged with its own patches' of the same trigger.",
			args: formArgs{input: `patchSets:
- name: common
  patches:
  - {type: FromCompositeFieldPath, fromFieldPath: spec.parameters.region, toFieldPath: spec.forProvider.region}
resources:
` + nodeGroup(`{}`, `[{type: PatchSet, patchSetName: common}, {fromFieldPath: spec.parameters.region, toFieldPath: spec.forProvider.tags.region}]`) + `
- name: settings
  base: {apiVersion: v1, kind: ConfigMap, data: {}}
  patches:
  - {type: PatchSet, patchSetName: common}`},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.region",
				nodeGroups(bound("spec.forProvider.region", mutateOnly), bound("spec.forProvider.tags.region", mutateOnly)),
				configMaps(bound("spec.forProvider.region", mutateOnly)),
			)}},
		},
		"MissingPatchSet": {
			reason: "A PatchSet patch naming no set is an error naming the resource and patch.",
			args:   formArgs{input: "resources:\n" + nodeGroup(`{}`, `[{type: PatchSet, patchSetName: nope}]`)},
			want:   formWant{err: `input.resources[0] (nodeGroupPublic).patches[0]: patch set "nope" does not exist`},
		},
		"PatchSetInPatchSet": {
			reason: "function-patch-and-transform refuses a patch set that holds a PatchSet patch.",
			args: formArgs{input: `patchSets:
- name: outer
  patches:
  - {type: PatchSet, patchSetName: inner}
resources:
` + nodeGroup(`{}`, `[{type: PatchSet, patchSetName: outer}]`)},
			want: formWant{err: "input.patchSets[0] (outer).patches[0]: a patch set cannot hold a PatchSet patch"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testForm(t, tc.reason, tc.args, tc.want) })
	}
}

func TestDeriveToCompositeFieldPath(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   formArgs
		want   formWant
	}{
		"ToCompositeFieldPath": {
			reason: "A patch into the XR changes no composed resource's spec: no rule, nothing to note.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: status.nodeGroupId}]`)},
		},
		"CombineToComposite": {
			reason: "Nor does a Combine into the XR.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{type: CombineToComposite, combine: {variables: [{fromFieldPath: status.atProvider.id}], strategy: string, string: {fmt: "%s"}}, toFieldPath: status.nodeGroupId}]`)},
		},
		"ToEnvironmentFieldPath": {
			reason: "Nor a patch into the environment.",
			args: formArgs{input: "resources:\n" + nodeGroup(`{}`,
				`[{type: ToEnvironmentFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: nodeGroupId}]`)},
		},
		"UnknownType": {
			reason: "A type function-patch-and-transform does not have is an error, not a patch silently left out.",
			args:   formArgs{input: "resources:\n" + nodeGroup(`{}`, `[{type: FromCompositeFieldPathh, fromFieldPath: spec.parameters.region}]`)},
			want:   formWant{err: `input.resources[0] (nodeGroupPublic).patches[0]: type "FromCompositeFieldPathh" is not a patch type function-patch-and-transform has`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testForm(t, tc.reason, tc.args, tc.want) })
	}
}

func TestDeriveTransforms(t *testing.T) {
	patch := func(from, to, transforms string) string {
		return "resources:\n" + nodeGroup(`{}`, `[{fromFieldPath: `+from+`, toFieldPath: `+to+`, transforms: `+transforms+`}]`)
	}
	cases := map[string]struct {
		reason string
		args   formArgs
		want   formWant
	}{
		"MapToScalars": {
			reason: "A map to strings: the value changes type, the target only mutates.",
			args:   formArgs{input: patch("spec.parameters.region", "spec.forProvider.amiType", `[{type: map, map: {eu-west-1: AL2_x86_64, us-east-1: BOTTLEROCKET_x86_64}}]`)},
			want:   formWant{rules: []v1alpha1.Rule{rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.amiType", mutateOnly)))}},
		},
		"MapToObjects": {
			reason: "A map to objects whose keys differ: a change inserts and deletes below the target, which is still the toFieldPath.",
			args: formArgs{input: patch("spec.parameters.region", "spec.forProvider.scalingConfig",
				`[{type: map, map: {small: {maxSize: 3}, large: {maxSize: 10, minSize: 2}}}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.scalingConfig", everyVerb)))}},
		},
		"MatchToScalars": {
			reason: "A match to scalars with a scalar fallback only mutates.",
			args: formArgs{input: patch("spec.parameters.region", "spec.forProvider.capacityType",
				`[{type: match, match: {patterns: [{type: literal, literal: eu-west-1, result: SPOT}], fallbackValue: ON_DEMAND}}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.capacityType", mutateOnly)))}},
		},
		"MatchFallingBackToObjectInput": {
			reason: "A match that falls back to its input writes the object it read when nothing matches.",
			args: formArgs{input: patch("spec.parameters.labels", "spec.forProvider.labels",
				`[{type: match, match: {patterns: [{type: literal, literal: none, result: {}}], fallbackTo: Input}}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.labels", nodeGroups(bound("spec.forProvider.labels", everyVerb)))}},
		},
		"StringFormat": {
			reason: "A string format of a number: a string, that only mutates.",
			args:   formArgs{input: patch("spec.parameters.size", "spec.forProvider.diskSizeLabel", `[{type: string, string: {type: Format, fmt: "%dGi"}}]`)},
			want:   formWant{rules: []v1alpha1.Rule{rule("spec.parameters.size", nodeGroups(bound("spec.forProvider.diskSizeLabel", mutateOnly)))}},
		},
		"StringConvertOfObject": {
			reason: "An object converted to JSON is a string: the target only mutates, where the object copied whole would insert and delete.",
			args:   formArgs{input: patch("spec.parameters.labels", "spec.forProvider.labelsJSON", `[{type: string, string: {type: Convert, convert: ToJson}}]`)},
			want:   formWant{rules: []v1alpha1.Rule{rule("spec.parameters.labels", nodeGroups(bound("spec.forProvider.labelsJSON", mutateOnly)))}},
		},
		"ConvertToObject": {
			reason: "A string converted to an object: keys come and go below the target.",
			args: formArgs{input: patch("spec.parameters.region", "spec.forProvider.settings",
				`[{type: convert, convert: {toType: object, format: json}}]`)},
			want: formWant{rules: []v1alpha1.Rule{rule("spec.parameters.region", nodeGroups(bound("spec.forProvider.settings", everyVerb)))}},
		},
		"Math": {
			reason: "Math yields a number: the target only mutates.",
			args:   formArgs{input: patch("spec.parameters.size", "spec.forProvider.diskSize", `[{type: math, math: {type: Multiply, multiply: 1024}}]`)},
			want:   formWant{rules: []v1alpha1.Rule{rule("spec.parameters.size", nodeGroups(bound("spec.forProvider.diskSize", mutateOnly)))}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testForm(t, tc.reason, tc.args, tc.want) })
	}
}
