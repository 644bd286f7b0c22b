package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// meshPolicy names App Mesh's Mesh by its CRD's plural, meshes, which the
// guess from the kind (meshs) does not produce.
const meshPolicy = `
metadata: {name: mesh, uid: u-mesh, generation: 1}
spec:
  for: {apiGroup: example.org, kind: XNetwork}
  subjects: [{kind: User, name: alice, mayInitiate: true}]
  rules:
  - trigger: spec.size
    policies:
    - target: {apiGroup: appmesh.aws.upbound.io, resource: meshes}
      verbs: [Update]
    - target: {external: {apiGroup: appmesh.aws.upbound.io, resource: meshes}}
      relation: External
      verbs: [Update]
`

const meshResolved = `
status:
  targets:
  - {apiGroup: appmesh.aws.upbound.io, resource: meshes, kind: Mesh, versions: [v1beta1, v1beta2], categories: [crossplane, managed, aws]}
`

func TestKindsChildOf(t *testing.T) {
	resolved := KindsOf([]v1alpha1.AllowancePolicy{*decode[v1alpha1.AllowancePolicy](t, meshPolicy+meshResolved)})
	cases := map[string]struct {
		reason     string
		kinds      Kinds
		apiVersion string
		kind       string
		want       Child
	}{
		"Recorded": {reason: "A kind a policy's status records takes the CRD's plural, whatever the version.",
			kinds: resolved, apiVersion: "appmesh.aws.upbound.io/v1beta2", kind: "Mesh",
			want: Child{APIGroup: "appmesh.aws.upbound.io", APIVersion: "v1beta2", Kind: "Mesh", Resource: "meshes"}},
		"Guessed": {reason: "Without a record the plural is guessed, and says so.",
			apiVersion: "appmesh.aws.upbound.io/v1beta2", kind: "Mesh",
			want: Child{APIGroup: "appmesh.aws.upbound.io", APIVersion: "v1beta2", Kind: "Mesh", Resource: "meshs", Guessed: true}},
		"GuessCollides": {reason: "A guess that names another kind's resource names no resource.",
			kinds:      KindsOf([]v1alpha1.AllowancePolicy{{Status: v1alpha1.PolicyStatus{Targets: []v1alpha1.ResolvedTarget{{APIGroup: "g.io", Resource: "meshs", Kind: "Meshs"}}}}}),
			apiVersion: "g.io/v1", kind: "Mesh",
			want: Child{APIGroup: "g.io", APIVersion: "v1", Kind: "Mesh", Guessed: true}},
		"OtherGroup": {reason: "A record is for its group only.",
			kinds: resolved, apiVersion: "other.io/v1", kind: "Mesh",
			want: Child{APIGroup: "other.io", APIVersion: "v1", Kind: "Mesh", Resource: "meshs", Guessed: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.kinds.ChildOf(tc.apiVersion, tc.kind)); diff != "" {
				t.Errorf("%s\nChildOf(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// A policy for a managed kind (hand edits of Buckets), beside the XR
// policies that compose it.
const bucketPolicy = `
metadata: {name: buckets-by-hand}
spec:
  for: {apiGroup: recorder.kausality.io, kind: Bucket}
  rules:
  - trigger: spec.forProvider.size
    policies:
    - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Update]
`

// TestKindsClass: which composed kinds count as composites, never
// gated. A policy for a managed kind once made that kind a composite, so
// every XR composed it ungated while the policy existed and admission
// gated it closed with nothing to open it: it never reached the cloud.
func TestKindsClass(t *testing.T) {
	xr := func(targets string) string {
		return `
metadata: {name: xdatabases}
spec:
  for: {apiGroup: example.com, kind: XDatabase}
  initializing:
    policies:
` + targets
	}
	child := `    - target: {apiGroup: recorder.kausality.io, resource: buckets}
      verbs: [Create]
`
	external := `    - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Create]
`
	resolved := func(categories string) string {
		return `
status:
  targets:
  - {apiGroup: recorder.kausality.io, resource: buckets, kind: Bucket, versions: [v1alpha1], categories: ` + categories + `}
`
	}
	nested := `
metadata: {name: xstores}
spec:
  for: {apiGroup: example.com, kind: XStore}
`
	cases := map[string]struct {
		reason   string
		policies []string
		group    string
		kind     string
		want     Class
	}{
		"ManagedByCategory": {reason: "A policy for Bucket does not make it a composite when a target resolves it as managed.",
			policies: []string{xr(child) + resolved("[crossplane, managed]"), bucketPolicy}, kind: "Bucket", want: ClassManaged},
		"ManagedByExternalTarget": {reason: "An External target names a managed kind, resolved or not.",
			policies: []string{xr(external), bucketPolicy}, kind: "Bucket", want: ClassManaged},
		"ManagedOwnExternalTarget": {reason: "The managed kind's own policy names it as External.",
			policies: []string{bucketPolicy}, kind: "Bucket", want: ClassManaged},
		"ForKind": {reason: "A kind a policy is for, with nothing saying it is managed, is a composite (a nested XR).",
			policies: []string{xr(child), nested}, group: "example.com/v1", kind: "XStore", want: ClassComposite},
		"CompositeCategory": {reason: "A resolved target in Crossplane's composite category is a composite.",
			policies: []string{xr(child) + resolved("[crossplane, composite]")}, kind: "Bucket", want: ClassComposite},
		"ResolvedNotManaged": {reason: "A resolved CRD outside the managed category (a ProviderConfig) has no gate, even when an External target names it.",
			policies: []string{xr(child+external) + resolved("[crossplane, provider]")}, kind: "Bucket", want: ClassUnmanaged},
		"Unnamed": {reason: "A kind nothing names is managed: gated, failing closed.",
			policies: []string{xr(child)}, kind: "Bucket", want: ClassManaged},
		"KubernetesKind": {reason: "A kind of Kubernetes' own groups is never managed, whatever a policy's External target says of it.",
			policies: []string{xr(`    - target: {external: {apiGroup: apps, kind: Deployment}}
      relation: External
      verbs: [Create]
`)}, group: "apps/v1", kind: "Deployment", want: ClassUnmanaged},
		"CoreKind": {reason: "The core group is Kubernetes' own.",
			policies: []string{xr(child)}, group: "v1", kind: "Service", want: ClassUnmanaged},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var ps []v1alpha1.AllowancePolicy
			for _, y := range tc.policies {
				ps = append(ps, *decode[v1alpha1.AllowancePolicy](t, y))
			}
			group := tc.group
			if group == "" {
				group = "recorder.kausality.io/v1alpha1"
			}
			if got := KindsOf(ps).ChildOf(group, tc.kind).Class; got != tc.want {
				t.Errorf("%s\nChildOf(%s).Class = %s, want %s", tc.reason, tc.kind, got, tc.want)
			}
		})
	}
}

// TestUnresolvedTargetFailsClosed is the hole kind identity closes: a
// policy naming a kind by its real plural restricted nothing when the
// guess differed, so the kind's changes went through without allowance.
func TestUnresolvedTargetFailsClosed(t *testing.T) {
	cache := NewCache()
	unresolved := *decode[v1alpha1.AllowancePolicy](t, meshPolicy)
	resolved := *decode[v1alpha1.AllowancePolicy](t, meshPolicy+meshResolved)
	cases := map[string]struct {
		reason         string
		policy         v1alpha1.AllowancePolicy
		kind           string
		wantRestricted bool
		wantNamed      bool // an entry names the kind: a rule can grant it
		wantUnresolved []string
	}{
		"Resolved": {reason: "Resolved, the target names Mesh: restricted, and its rule can grant it.",
			policy: resolved, kind: "Mesh", wantRestricted: true, wantNamed: true},
		"ResolvedOtherKind": {reason: "Resolved, another kind of the group is neither named nor restricted.",
			policy: resolved, kind: "VirtualNode"},
		"Unresolved": {reason: "Unresolved (no status yet, or crossplane render without one), Mesh counts as restricted though no entry can grant it.",
			policy: unresolved, kind: "Mesh", wantRestricted: true, wantNamed: false, wantUnresolved: []string{"meshes.appmesh.aws.upbound.io"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := []v1alpha1.AllowancePolicy{tc.policy}
			s, errs := cache.For("example.org/v1", "XNetwork", ps)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			c := KindsOf(ps).ChildOf("appmesh.aws.upbound.io/v1beta1", tc.kind)
			if got := s.Restricts(c); got != tc.wantRestricted {
				t.Errorf("%s\nRestricts(%s) = %t, want %t", tc.reason, tc.kind, got, tc.wantRestricted)
			}
			if got := s.RestrictsExternal(c); got != tc.wantRestricted {
				t.Errorf("%s\nRestrictsExternal(%s) = %t, want %t", tc.reason, tc.kind, got, tc.wantRestricted)
			}
			named := false
			for _, e := range s.policies[0].rules[0].entries {
				if e.relation == v1alpha1.RelationControllerChild && MatchesChild(e.Target, c) {
					named = true
				}
			}
			if named != tc.wantNamed {
				t.Errorf("%s\nan entry names %s: %t, want %t", tc.reason, tc.kind, named, tc.wantNamed)
			}
			if diff := cmp.Diff(tc.wantUnresolved, s.Unresolved(), cmpEmpty); diff != "" {
				t.Errorf("%s\nUnresolved(): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestTargetsOf(t *testing.T) {
	p := decode[v1alpha1.AllowancePolicy](t, meshPolicy+`
  initializing:
    policies:
    - target: {apiGroup: appmesh.aws.upbound.io, resource: meshes}
      verbs: [Create]
    - target: {apiGroup: ec2.aws.m.upbound.io, resource: vpcs}
      verbs: [Create]
    - target: {external: {resource: anywhere}}
      relation: External
      verbs: [Create]
`)
	want := []Named{{Group: "appmesh.aws.upbound.io", Resource: "meshes"}, {Group: "ec2.aws.m.upbound.io", Resource: "vpcs"}}
	if diff := cmp.Diff(want, TargetsOf(p)); diff != "" {
		t.Errorf("TargetsOf: each named resource once, wildcards and group-less external targets left out: -want +got:\n%s", diff)
	}
	p.Status.Targets = []v1alpha1.ResolvedTarget{{APIGroup: "appmesh.aws.upbound.io", Resource: "meshes", Kind: "Mesh"}}
	if diff := cmp.Diff(want[1:], Unresolved(p)); diff != "" {
		t.Errorf("Unresolved: -want +got:\n%s", diff)
	}
}

func TestGuessResource(t *testing.T) {
	cases := map[string]struct {
		kind, want string
	}{
		"Regular":     {kind: "Bucket", want: "buckets"},
		"VowelY":      {kind: "InternetGateway", want: "internetgateways"},
		"ConsonantY":  {kind: "Policy", want: "policies"},
		"S":           {kind: "Address", want: "addresses"},
		"StillAGuess": {kind: "Mesh", want: "meshs"}, // App Mesh serves meshes: only the CRD knows
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := GuessResource(schema.GroupVersionKind{Group: "g.io", Version: "v1", Kind: tc.kind}); got != tc.want {
				t.Errorf("GuessResource(%s) = %s, want %s", tc.kind, got, tc.want)
			}
		})
	}
}
