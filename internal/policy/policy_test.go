package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

const dbPolicy = `
apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: xdatabase-policy, uid: u-1, generation: 1}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XDatabase}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  - {kind: ServiceAccount, name: crossplane, namespace: crossplane-system}
  initializing:
    policies:
    - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
      verbs: [Create]
    - target: {external: {kind: RDSInstance}}
      verbs: [Create]
  rules:
  - trigger: spec.size
    conditions: ["'jira' in object.metadata.annotations"]
    capture: ["metadata.annotations[jira]"]
    policies:
    - target: {apiGroup: rds.aws.crossplane.io, apiVersion: v1alpha1, resource: rdsinstances}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: spec.forProvider.instanceClass, verbs: [Mutate]}
    - target: {external: {provider: provider-aws, kind: RDSInstance}}
      relation: External
      verbs: [Update]
  - trigger: spec.tags
  - trigger: spec.engine
    conditions: ["object.metadata.annotations['allow-recreate'] == 'true'"]
    policies:
    - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
      verbs: [Update]
`

func decode[T any](t testing.TB, y string) *T {
	t.Helper()
	out := new(T)
	if err := yaml.Unmarshal([]byte(y), out); err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return out
}

// object decodes YAML as the API server decodes JSON: whole numbers are
// int64.
func object(t testing.TB, y string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(j, &out); err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return out
}

func dbSet(t testing.TB, extra ...string) Set {
	t.Helper()
	ps := []v1alpha1.AllowancePolicy{*decode[v1alpha1.AllowancePolicy](t, dbPolicy)}
	for _, y := range extra {
		ps = append(ps, *decode[v1alpha1.AllowancePolicy](t, y))
	}
	s, errs := NewCache().For("example.com/v1alpha1", "XDatabase", ps)
	if len(errs) > 0 {
		t.Fatalf("For(): %v", errs)
	}
	return s
}

var rdsChild = Kinds{}.ChildOf("rds.aws.crossplane.io/v1alpha1", "RDSInstance")

func TestChildOf(t *testing.T) {
	want := Child{APIGroup: "rds.aws.crossplane.io", APIVersion: "v1alpha1", Kind: "RDSInstance", Resource: "rdsinstances", Guessed: true}
	if diff := cmp.Diff(want, rdsChild); diff != "" {
		t.Errorf("ChildOf: -want +got:\n%s", diff)
	}
	if got := (Kinds{}).ChildOf("eks.aws.m.upbound.io/v1beta1", "NodeGroup").Resource; got != "nodegroups" {
		t.Errorf("Kinds{}.ChildOf(NodeGroup).Resource = %q, want nodegroups", got)
	}
}

func TestMatches(t *testing.T) {
	cases := map[string]struct {
		target          v1alpha1.Target
		child, external bool
	}{
		"ExactGVR":         {target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", APIVersion: "v1alpha1", Resource: "rdsinstances"}, child: true},
		"AnyVersion":       {target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", Resource: "rdsinstances"}, child: true},
		"OtherVersion":     {target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", APIVersion: "v1beta1", Resource: "rdsinstances"}},
		"OtherGroup":       {target: v1alpha1.Target{APIGroup: "rds.aws.upbound.io", Resource: "rdsinstances"}},
		"WildcardResource": {target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", Resource: "*"}, child: true},
		"NoResource":       {target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io"}},
		"ExternalKind":     {target: v1alpha1.Target{External: map[string]string{"provider": "provider-aws", "kind": "RDSInstance"}}, external: true},
		"ExternalGroup":    {target: v1alpha1.Target{External: map[string]string{"apiGroup": "rds.aws.crossplane.io"}}, external: true},
		"ExternalOther":    {target: v1alpha1.Target{External: map[string]string{"kind": "DBCluster"}}},
		"ExternalNoKeys":   {target: v1alpha1.Target{External: map[string]string{"provider": "provider-aws"}}},
		"ExternalWildcard": {target: v1alpha1.Target{External: map[string]string{"kind": "*"}}, external: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := MatchesChild(tc.target, rdsChild); got != tc.child {
				t.Errorf("MatchesChild(%+v) = %v, want %v", tc.target, got, tc.child)
			}
			if got := MatchesExternal(tc.target, rdsChild); got != tc.external {
				t.Errorf("MatchesExternal(%+v) = %v, want %v", tc.target, got, tc.external)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	cases := map[string]struct {
		spec string
		want []string // substrings of the error
	}{
		"CELSyntax": {
			spec: "rules: [{trigger: spec.size, conditions: [\"object.spec.size ==\"]}]",
			want: []string{`spec.rules[0].conditions[0] "object.spec.size =="`, "Syntax error"},
		},
		"NotBool": {
			spec: "rules: [{trigger: spec.size, conditions: [\"'a' + 'b'\"]}]",
			want: []string{`spec.rules[0].conditions[0]`, "want bool"},
		},
		"BadWhen": {
			spec: "initializing: {when: \"object.(\"}",
			want: []string{`spec.initializing.when "object.("`},
		},
		"BadTrigger": {
			spec: "rules: [{trigger: \"spec[\"}]",
			want: []string{"spec.rules[0].trigger"},
		},
		"BadCapture": {
			spec: "rules: [{trigger: spec.size, capture: [\"metadata[\"]}]",
			want: []string{"spec.rules[0].capture[0]"},
		},
		"ChildWithoutResource": {
			spec: "rules: [{trigger: spec.size, policies: [{target: {apiGroup: x.io}, verbs: [Update]}]}]",
			want: []string{"spec.rules[0].policies[0].target.resource: is required"},
		},
		"ExternalWithoutKeys": {
			spec: "rules: [{trigger: spec.size, policies: [{target: {external: {provider: aws}}, verbs: [Update]}]}]",
			want: []string{"spec.rules[0].policies[0].target.external: must name at least one of apiGroup, kind, resource"},
		},
		"BadVerb": {
			spec: "deleting: {policies: [{target: {apiGroup: x.io, resource: ys}, verbs: [Patch]}]}",
			want: []string{`spec.deleting.policies[0].verbs[0]: "Patch"`},
		},
		"BadMutationPath": {
			spec: "rules: [{trigger: spec.size, policies: [{target: {apiGroup: x.io, resource: ys}, verbs: [Update], mutations: [{jsonPath: \"a[\", verbs: [Mutate]}]}]}]",
			want: []string{"spec.rules[0].policies[0]: mutations[0]: invalid jsonPath"},
		},
		"ServiceAccountWithoutNamespace": {
			spec: "subjects: [{kind: ServiceAccount, name: crossplane}]",
			want: []string{"spec.subjects[0]: a ServiceAccount subject needs a namespace"},
		},
		"AllProblemsReported": {
			spec: "mode: Maybe\ndrift: Sometimes\nrules: [{trigger: spec.size, conditions: [\"1 +\"]}]",
			want: []string{"spec.mode", "spec.drift", "spec.rules[0].conditions[0]"},
		},
		"HugeExpression": {
			spec: "rules: [{trigger: spec.size, conditions: [\"" + strings.Repeat("true && ", MaxExpressionBytes/8+1) + "true\"]}]",
			want: []string{"more than the limit"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			y := "metadata: {name: bad}\nspec:\n  for: {apiGroup: example.com, kind: XDatabase}\n" + indent(tc.spec)
			_, err := Compile(decode[v1alpha1.AllowancePolicy](t, y))
			if err == nil {
				t.Fatalf("Compile() = nil error, want one containing %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), "AllowancePolicy bad is invalid: ") {
				t.Errorf("Compile() error %q does not name the policy", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Compile() error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n")
}

func TestCacheReusesCompiledPolicy(t *testing.T) {
	c := NewCache()
	p := decode[v1alpha1.AllowancePolicy](t, dbPolicy)
	a, err := c.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Compile(p)
	if a != b {
		t.Error("Compile() of the same UID and generation compiled again")
	}
	p.Generation = 2
	if d, _ := c.Compile(p); d == a {
		t.Error("Compile() of a new generation returned the old compilation")
	}
	p.UID = ""
	e, _ := c.Compile(p)
	p.Spec.Priority = 7
	if f, _ := c.Compile(p); f == e {
		t.Error("Compile() of a changed policy without UID returned the old compilation")
	}
}

func TestForSelectsAndOrders(t *testing.T) {
	other := `metadata: {name: a-high, uid: u-2}
spec: {for: {apiGroup: example.com, kind: XDatabase}, priority: 10}`
	wrongKind := `metadata: {name: cluster}
spec: {for: {apiGroup: example.com, kind: XCluster}}`
	wrongVersion := `metadata: {name: v2}
spec: {for: {apiGroup: example.com, apiVersion: v2, kind: XDatabase}}`
	broken := `metadata: {name: broken}
spec: {for: {apiGroup: example.com, kind: XDatabase}, rules: [{trigger: spec.size, conditions: ["nope("]}]}`
	ps := []v1alpha1.AllowancePolicy{*decode[v1alpha1.AllowancePolicy](t, dbPolicy)}
	for _, y := range []string{other, wrongKind, wrongVersion, broken} {
		ps = append(ps, *decode[v1alpha1.AllowancePolicy](t, y))
	}
	s, errs := NewCache().For("example.com/v1alpha1", "XDatabase", ps)
	if diff := cmp.Diff([]string{"a-high", "xdatabase-policy"}, s.Names()); diff != "" {
		t.Errorf("Names(): -want +got:\n%s", diff)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "AllowancePolicy broken") {
		t.Errorf("For() errors = %v, want one naming policy broken", errs)
	}
}

func TestRestricts(t *testing.T) {
	s := dbSet(t)
	if !s.Restricts(rdsChild) || !s.RestrictsExternal(rdsChild) {
		t.Error("the database policy must restrict RDSInstance and its external resource")
	}
	bucket := Kinds{}.ChildOf("s3.aws.crossplane.io/v1beta1", "Bucket")
	if s.Restricts(bucket) || s.RestrictsExternal(bucket) {
		t.Error("a kind no entry names must be unrestricted")
	}
	if (Set{}).Restricts(rdsChild) {
		t.Error("the empty Set must restrict nothing")
	}
}

func TestRestricting(t *testing.T) {
	db := *decode[v1alpha1.AllowancePolicy](t, dbPolicy)
	broken := *decode[v1alpha1.AllowancePolicy](t, `metadata: {name: broken}
spec:
  for: {apiGroup: example.com, kind: XCache}
  rules: [{trigger: spec.size, conditions: ["object.("]}]`)
	brokenBuckets := *decode[v1alpha1.AllowancePolicy](t, `metadata: {name: broken-buckets}
spec:
  for: {apiGroup: example.com, kind: XCache}
  rules:
  - trigger: spec.size
    conditions: ["object.("]
    policies:
    - {target: {external: {apiGroup: s3.aws.crossplane.io, kind: Bucket}}, relation: External, verbs: [Update]}`)
	bucket := Kinds{}.ChildOf("s3.aws.crossplane.io/v1beta1", "Bucket")
	cases := map[string]struct {
		reason  string
		ps      []v1alpha1.AllowancePolicy
		child   Child
		want    bool
		wantErr bool
	}{
		"NamedByAnotherKindsPolicy": {reason: "The XDatabase policy restricts RDSInstance, whoever creates one.", ps: []v1alpha1.AllowancePolicy{db}, child: rdsChild, want: true},
		"NamedByNone":               {reason: "A kind no policy names is unrestricted.", ps: []v1alpha1.AllowancePolicy{db}, child: bucket},
		"NoPolicies":                {reason: "Without policies nothing is restricted.", child: rdsChild},
		"BrokenPolicyNamesOnlyItsOwn": {reason: "A policy that does not compile restricts only the kinds its own targets name, read without its CEL: never every managed kind in the cluster.",
			ps: []v1alpha1.AllowancePolicy{db, broken}, child: bucket, wantErr: true},
		"BrokenPolicyRestrictsItsTargets": {reason: "The kinds a policy that does not compile names stay restricted (fail closed).",
			ps: []v1alpha1.AllowancePolicy{brokenBuckets}, child: bucket, want: true, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := NewCache().Restricting(tc.ps, tc.child)
			if got != tc.want || (len(errs) > 0) != tc.wantErr {
				t.Errorf("%s\nRestricting() = %v, %v; want %v, errors %v", tc.reason, got, errs, tc.want, tc.wantErr)
			}
		})
	}
}

func TestDeletionBound(t *testing.T) {
	deletes := `metadata: {name: deletes}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XDatabase}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  deleting:
    policies:
    - target: {external: {kind: RDSInstance}}
      relation: External
      verbs: [Delete]`
	empty := `metadata: {name: empty-deleting}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XDatabase}
  deleting: {}`
	alice := Identity{Username: "alice", Groups: []string{"platform-team"}}
	bob := Identity{Username: "bob"}
	cases := map[string]struct {
		reason string
		set    Set
		id     Identity
		want   []string
	}{
		"Granted":          {reason: "A subject with mayInitiate gets what the deleting entries name.", set: dbSet(t, deletes), id: alice, want: []string{"Delete"}},
		"NotASubject":      {reason: "Bob may not initiate: deleting opens nothing for him.", set: dbSet(t, deletes), id: bob},
		"NoDeletingPhase":  {reason: "Without a deleting section nothing is granted, though the phase is unrestricted for the function.", set: dbSet(t), id: alice},
		"EmptyDeletingSet": {reason: "An empty deleting section grants nothing either.", set: dbSet(t, empty), id: alice},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.set.DeletionBound(tc.id).ExternalVerbs(rdsChild), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nDeletionBound().ExternalVerbs(): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
	if !dbSet(t).PhaseBound(PhaseDeleting).Unrestricted() {
		t.Error("PhaseBound(Deleting) without a deleting section must stay unrestricted for the function")
	}
}

func TestPhase(t *testing.T) {
	custom := `metadata: {name: custom}
spec:
  for: {apiGroup: example.com, kind: XDatabase}
  initializing: {when: "object.spec.size == 'tiny'"}`
	cases := map[string]struct {
		set  Set
		obj  string
		want Phase
	}{
		"NoStatus":                {set: dbSet(t), obj: "metadata: {name: db}", want: PhaseInitializing},
		"TopLevelObserved":        {set: dbSet(t), obj: "metadata: {name: db}\nstatus: {observedGeneration: 1}", want: PhaseSteady},
		"SyncedConditionObserved": {set: dbSet(t), obj: "metadata: {name: db}\nstatus: {conditions: [{type: Synced, observedGeneration: 3}]}", want: PhaseSteady},
		"ReadyConditionOnly":      {set: dbSet(t), obj: "metadata: {name: db}\nstatus: {conditions: [{type: Ready, observedGeneration: 3}]}", want: PhaseInitializing},
		"Deleting":                {set: dbSet(t), obj: "metadata: {name: db, deletionTimestamp: '2026-11-22T12:00:00Z'}", want: PhaseDeleting},
		"CustomWhen":              {set: dbSet(t, custom), obj: "metadata: {name: db}\nspec: {size: tiny}\nstatus: {observedGeneration: 1}", want: PhaseInitializing},
		"NoPolicies":              {set: Set{}, obj: "metadata: {name: db}", want: PhaseSteady},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.set.Phase(object(t, tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Phase() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPhaseError(t *testing.T) {
	bad := `metadata: {name: bad-when}
spec:
  for: {apiGroup: example.com, kind: XDatabase}
  initializing: {when: "object.spec.size == 'tiny'"}`
	s, errs := NewCache().For("example.com/v1alpha1", "XDatabase", []v1alpha1.AllowancePolicy{*decode[v1alpha1.AllowancePolicy](t, bad)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got, err := s.Phase(object(t, "metadata: {name: db}"))
	if err == nil || !strings.Contains(err.Error(), "AllowancePolicy bad-when spec.initializing.when") {
		t.Errorf("Phase() error = %v, want one naming the policy and field", err)
	}
	if got != PhaseSteady {
		t.Errorf("Phase() on error = %s, want the strictest, Steady", got)
	}
}

func TestBounds(t *testing.T) {
	s := dbSet(t)
	init := s.PhaseBound(PhaseInitializing)
	bucket := Kinds{}.ChildOf("s3.aws.crossplane.io/v1beta1", "Bucket")
	instanceClass := mutation.Mutation{Path: "spec.forProvider.instanceClass", Verb: v1alpha1.MutationMutate}
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"init allows Create of RDSInstance", init.AllowsChild(rdsChild, v1alpha1.VerbCreate), true},
		{"init denies Delete of RDSInstance", init.AllowsChild(rdsChild, v1alpha1.VerbDelete), false},
		{"init denies Update of RDSInstance", init.AllowsMutation(rdsChild, instanceClass), false},
		{"init leaves unnamed kinds unrestricted", init.AllowsChild(bucket, v1alpha1.VerbDelete), true},
		{"deleting without a section is unrestricted", s.PhaseBound(PhaseDeleting).AllowsChild(rdsChild, v1alpha1.VerbDelete), true},
		{"steady has no phase bound", s.PhaseBound(PhaseSteady).Unrestricted(), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if diff := cmp.Diff([]string{"Create"}, init.ExternalVerbs(rdsChild)); diff != "" {
		t.Errorf("ExternalVerbs(): -want +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"*"}, s.PhaseBound(PhaseDeleting).ExternalVerbs(rdsChild)); diff != "" {
		t.Errorf("unrestricted ExternalVerbs(): -want +got:\n%s", diff)
	}
}

func TestModeAndDrift(t *testing.T) {
	logAllow := `metadata: {name: log-allow}
spec: {for: {apiGroup: example.com, kind: XDatabase}, mode: Log, drift: Allow}`
	s := dbSet(t)
	onlyLog, _ := NewCache().For("example.com/v1alpha1", "XDatabase", []v1alpha1.AllowancePolicy{*decode[v1alpha1.AllowancePolicy](t, logAllow)})
	mixed := dbSet(t, logAllow)
	audit := `metadata: {name: audit}
spec: {for: {apiGroup: example.com, kind: XDatabase}, mode: Audit}`
	onlyAudit, _ := NewCache().For("example.com/v1alpha1", "XDatabase", []v1alpha1.AllowancePolicy{*decode[v1alpha1.AllowancePolicy](t, audit)})
	auditLog, _ := NewCache().For("example.com/v1alpha1", "XDatabase", []v1alpha1.AllowancePolicy{
		*decode[v1alpha1.AllowancePolicy](t, audit), *decode[v1alpha1.AllowancePolicy](t, `metadata: {name: log}
spec: {for: {apiGroup: example.com, kind: XDatabase}, mode: Log}`)})
	cases := map[string]struct {
		set       Set
		ann       string
		wantMode  v1alpha1.Mode
		wantDrift v1alpha1.DriftPolicy
		wantErr   bool
	}{
		"Defaults":           {set: s, wantMode: v1alpha1.ModeEnforce, wantDrift: v1alpha1.DriftDeny},
		"AllLog":             {set: onlyLog, wantMode: v1alpha1.ModeLog, wantDrift: v1alpha1.DriftAllow},
		"DisagreementIsSafe": {set: mixed, wantMode: v1alpha1.ModeEnforce, wantDrift: v1alpha1.DriftDeny},
		"NamespaceOverride":  {set: s, ann: "Log", wantMode: v1alpha1.ModeLog, wantDrift: v1alpha1.DriftDeny},
		"NamespaceEnforces":  {set: onlyLog, ann: "Enforce", wantMode: v1alpha1.ModeEnforce, wantDrift: v1alpha1.DriftAllow},
		"BadAnnotation":      {set: onlyLog, ann: "Loud", wantMode: v1alpha1.ModeEnforce, wantDrift: v1alpha1.DriftAllow, wantErr: true},
		"NamespaceAudits":    {set: s, ann: "Audit", wantMode: v1alpha1.ModeAudit, wantDrift: v1alpha1.DriftDeny},
		"AuditAndLogIsLog":   {set: auditLog, wantMode: v1alpha1.ModeLog, wantDrift: v1alpha1.DriftDeny},
		"AllAudit":           {set: onlyAudit, wantMode: v1alpha1.ModeAudit, wantDrift: v1alpha1.DriftDeny},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "prod"}}
			if tc.ann != "" {
				ns["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.AnnotationMode: tc.ann}
			}
			m, err := tc.set.Mode(ns)
			if (err != nil) != tc.wantErr {
				t.Errorf("Mode() error = %v, want error %v", err, tc.wantErr)
			}
			if m != tc.wantMode {
				t.Errorf("Mode() = %s, want %s", m, tc.wantMode)
			}
			if d := tc.set.Drift(); d != tc.wantDrift {
				t.Errorf("Drift() = %s, want %s", d, tc.wantDrift)
			}
		})
	}
}

// TestManagedMode: a managed resource is audited only when its Namespace
// says so, or every policy restricting its kind, whatever kind each is
// for, says Audit; the function and admission both ask this.
func TestManagedMode(t *testing.T) {
	group := map[string]string{"rdsinstances": "rds.aws.crossplane.io", "buckets": "s3.aws.crossplane.io"}
	policyFor := func(name, mode, resource string) v1alpha1.AllowancePolicy {
		return *decode[v1alpha1.AllowancePolicy](t, `metadata: {name: `+name+`}
spec:
  for: {apiGroup: example.com, kind: X`+name+`}
  mode: `+mode+`
  rules:
  - trigger: spec.size
    policies:
    - target: {apiGroup: `+group[resource]+`, resource: `+resource+`}
      relation: ControllerChild
      verbs: [Update]`)
	}
	broken := policyFor("broken", "Audit", "rdsinstances")
	broken.Spec.Rules[0].Conditions = []string{"object.spec.size >"}
	ns := func(mode string) map[string]any {
		md := map[string]any{"name": "prod"}
		if mode != "" {
			md["annotations"] = map[string]any{v1alpha1.AnnotationMode: mode}
		}
		return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md}
	}
	cases := map[string]struct {
		ps      []v1alpha1.AllowancePolicy
		ns      map[string]any
		want    v1alpha1.Mode
		wantErr bool
	}{
		"EveryRestrictingPolicyAudits": {ps: []v1alpha1.AllowancePolicy{policyFor("a", "Audit", "rdsinstances"), policyFor("b", "Enforce", "buckets")}, want: v1alpha1.ModeAudit},
		"OneEnforces":                  {ps: []v1alpha1.AllowancePolicy{policyFor("a", "Audit", "rdsinstances"), policyFor("b", "Enforce", "rdsinstances")}, want: v1alpha1.ModeEnforce},
		"LogAndAudit":                  {ps: []v1alpha1.AllowancePolicy{policyFor("a", "Audit", "rdsinstances"), policyFor("b", "Log", "rdsinstances")}, want: v1alpha1.ModeLog},
		"NoneRestricts":                {ps: []v1alpha1.AllowancePolicy{policyFor("b", "Audit", "buckets")}, want: v1alpha1.ModeEnforce},
		"BrokenIsEnforce":              {ps: []v1alpha1.AllowancePolicy{policyFor("a", "Audit", "rdsinstances"), broken}, want: v1alpha1.ModeEnforce},
		"NamespaceAudits":              {ps: []v1alpha1.AllowancePolicy{policyFor("a", "Enforce", "rdsinstances")}, ns: ns("Audit"), want: v1alpha1.ModeAudit},
		"NamespaceEnforces":            {ps: []v1alpha1.AllowancePolicy{policyFor("a", "Audit", "rdsinstances")}, ns: ns("Enforce"), want: v1alpha1.ModeEnforce},
		"NamespaceWithout":             {ps: []v1alpha1.AllowancePolicy{policyFor("a", "Audit", "rdsinstances")}, ns: ns(""), want: v1alpha1.ModeAudit},
		"NamespaceUnreadable":          {ns: ns("Quiet"), want: v1alpha1.ModeEnforce, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := NewCache().ManagedMode(tc.ps, rdsChild, tc.ns)
			if (err != nil) != tc.wantErr {
				t.Errorf("ManagedMode() error = %v, want error %v", err, tc.wantErr)
			}
			if m != tc.want {
				t.Errorf("ManagedMode() = %s, want %s", m, tc.want)
			}
		})
	}
}

func TestModeNamespace(t *testing.T) {
	cases := map[string]struct {
		obj  string
		want string
	}{
		"Namespaced":        {obj: "metadata: {name: db, namespace: prod}", want: "prod"},
		"LegacyXRClaimed":   {obj: "metadata: {name: db-x7k}\nspec: {claimRef: {namespace: prod, name: db}}", want: "prod"},
		"LegacyXRUnclaimed": {obj: "metadata: {name: db-x7k}\nspec: {}", want: ""},
		"LegacyManaged":     {obj: "metadata: {name: db-x7k-data, labels: {crossplane.io/claim-namespace: prod}}\nspec: {}", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ModeNamespace(object(t, tc.obj)); got != tc.want {
				t.Errorf("ModeNamespace() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIgnoredMode(t *testing.T) {
	cases := map[string]struct {
		obj  string
		want string
	}{
		"None":      {obj: "kind: DatabaseClaim\nmetadata: {name: db, namespace: prod}"},
		"Namespace": {obj: "kind: Namespace\nmetadata: {name: prod, annotations: {kausality.io/mode: Log}}"},
		"OnClaim": {obj: "kind: DatabaseClaim\nmetadata: {name: db, namespace: prod, annotations: {kausality.io/mode: Log}}",
			want: `annotation kausality.io/mode="Log" on DatabaseClaim prod/db is ignored: only a Namespace may set the mode (kubectl annotate namespace <name> kausality.io/mode=Log, as an administrator)`},
		"OnLegacyXR": {obj: "kind: XDatabase\nmetadata: {name: db-x7k, annotations: {kausality.io/mode: Log}}",
			want: `annotation kausality.io/mode="Log" on XDatabase db-x7k is ignored: only a Namespace may set the mode (kubectl annotate namespace <name> kausality.io/mode=Log, as an administrator)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IgnoredMode(object(t, tc.obj)); got != tc.want {
				t.Errorf("IgnoredMode():\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestUpgradeBoundFunctions(t *testing.T) {
	pt := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: pt-0-10}
spec:
  functions: [{name: function-patch-and-transform, version: v0.10.*}]
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
    verbs: [Update, Create]`)
	both := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: both}
spec:
  compositionRevisions: [xdatabases-aws-2]
  functions: [{name: function-patch-and-transform, version: v0.10.8}]
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
    verbs: [Update]`)
	const repo = "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform"
	fn := func(version string) logic.Change {
		return logic.Change{Function: "function-patch-and-transform", From: repo + ":v0.10.7", To: repo + ":" + version}
	}
	rev := logic.Change{From: "xdatabases-aws-1", To: "xdatabases-aws-2"}
	const crossplaneSA = "system:serviceaccount:crossplane-system:crossplane"
	xp := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: crossplane}
spec:
  serviceAccount: `+crossplaneSA+`
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
    verbs: [Update]`)
	build := func(sa string) logic.Change {
		return logic.Change{Controller: sa, From: "0123456789ab", To: "ba9876543210"}
	}
	env := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: env}
spec:
  inputs: [{kind: EnvironmentConfig, name: team-a, generation: 4}]
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
    verbs: [Update]`)
	anyEnv := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: any-env}
spec:
  inputs: [{kind: EnvironmentConfig, name: team-a}]
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
    verbs: [Update]`)
	input := func(to string) logic.Change {
		return logic.Change{Input: "EnvironmentConfig/team-a", From: "3", To: to}
	}
	// An invalid one (a path that does not parse) names the change: stored
	// while the webhook that validates UpgradeAllowances was down, it must
	// name nothing, or an allowance citing it would chain.
	invalid := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: invalid}
spec:
  functions: [{name: function-patch-and-transform, version: v0.10.*}]
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
    verbs: [Update]
    mutations: [{jsonPath: "spec.forProvider[", verbs: [Mutate]}]`)
	ic := mutation.Mutation{Path: "spec.forProvider.instanceClass", Verb: v1alpha1.MutationMutate}
	cases := map[string]struct {
		us   []v1alpha1.UpgradeAllowance
		up   Upgrade
		want []string
	}{
		"PatchRelease":           {us: []v1alpha1.UpgradeAllowance{*pt, *both}, up: Upgrade{Changes: []logic.Change{fn("v0.10.8")}}, want: []string{"pt-0-10", "both"}},
		"WildcardStopsAtMinor":   {us: []v1alpha1.UpgradeAllowance{*pt}, up: Upgrade{Changes: []logic.Change{fn("v0.11.0")}}},
		"OtherFunction":          {us: []v1alpha1.UpgradeAllowance{*pt}, up: Upgrade{Changes: []logic.Change{{Function: "function-go-templating", From: "a:v1", To: "a:v0.10.8"}}}},
		"EveryPartMustBeNamed":   {us: []v1alpha1.UpgradeAllowance{*pt}, up: Upgrade{Revision: Revision{Name: "xdatabases-aws-2"}, Changes: []logic.Change{rev, fn("v0.10.8")}}},
		"OneNamesEveryPart":      {us: []v1alpha1.UpgradeAllowance{*pt, *both}, up: Upgrade{Revision: Revision{Name: "xdatabases-aws-2"}, Changes: []logic.Change{rev, fn("v0.10.8")}}, want: []string{"both"}},
		"DigestIsNoTag":          {us: []v1alpha1.UpgradeAllowance{*pt}, up: Upgrade{Changes: []logic.Change{{Function: "function-patch-and-transform", From: repo + ":v0.10.7", To: repo + "@sha256:abc"}}}},
		"NoChangeNoUpgrade":      {us: []v1alpha1.UpgradeAllowance{*pt, *both}, up: Upgrade{Revision: Revision{Name: "xdatabases-aws-2"}}},
		"ControllerBuild":        {us: []v1alpha1.UpgradeAllowance{*pt, *both, *xp}, up: Upgrade{Changes: []logic.Change{build(crossplaneSA)}}, want: []string{"crossplane"}},
		"OtherController":        {us: []v1alpha1.UpgradeAllowance{*xp}, up: Upgrade{Changes: []logic.Change{build("system:serviceaccount:crossplane-system:provider-nop")}}},
		"ControllerIsNoFunction": {us: []v1alpha1.UpgradeAllowance{*xp}, up: Upgrade{Changes: []logic.Change{fn("v0.10.8")}}},
		"InputGeneration":        {us: []v1alpha1.UpgradeAllowance{*pt, *env, *anyEnv}, up: Upgrade{Changes: []logic.Change{input("4")}}, want: []string{"env", "any-env"}},
		"InputOtherGeneration":   {us: []v1alpha1.UpgradeAllowance{*env, *anyEnv}, up: Upgrade{Changes: []logic.Change{input("5")}}, want: []string{"any-env"}},
		"OtherInput":             {us: []v1alpha1.UpgradeAllowance{*env, *anyEnv}, up: Upgrade{Changes: []logic.Change{{Input: "EnvironmentConfig/team-b", From: "3", To: "4"}}}},
		"InputIsNoFunction":      {us: []v1alpha1.UpgradeAllowance{*env}, up: Upgrade{Changes: []logic.Change{fn("v0.10.8")}}},
		"InvalidNamesNothing":    {us: []v1alpha1.UpgradeAllowance{*invalid}, up: Upgrade{Changes: []logic.Change{fn("v0.10.8")}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, u := range UpgradesFor(tc.us, tc.up) {
				got = append(got, u.GetName())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("UpgradesFor(): -want, +got:\n%s", diff)
			}
			if allows := UpgradeBound(tc.us, tc.up).AllowsMutation(rdsChild, ic); allows != (len(tc.want) > 0) {
				t.Errorf("UpgradeBound().AllowsMutation() = %v, want %v", allows, len(tc.want) > 0)
			}
		})
	}
}

func TestUpgradeBound(t *testing.T) {
	u := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: aws-2}
spec:
  compositionRevisions: [xdatabases-aws-2, xclusters-*]
  compositions: [{name: xdatabases-gcp, revision: 4}]
  policies:
  - target: {apiGroup: rds.aws.crossplane.io, resource: rdsinstances}
    verbs: [Update]
    mutations: [{jsonPath: spec.forProvider.instanceClass, verbs: [Mutate]}]`)
	gcp := func(n int64) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "xdatabases-gcp-a1b2c3d", "labels": map[string]any{"crossplane.io/composition-name": "xdatabases-gcp"}},
			"spec": map[string]any{"revision": n}}
	}
	us := []v1alpha1.UpgradeAllowance{*u}
	// to is an upgrade from another revision to rev.
	to := func(rev Revision) Upgrade {
		return Upgrade{Revision: rev, Changes: []logic.Change{{From: "xdatabases-aws-1", To: rev.Name}}}
	}
	ic := mutation.Mutation{Path: "spec.forProvider.instanceClass", Verb: v1alpha1.MutationMutate}
	region := mutation.Mutation{Path: "spec.forProvider.region", Verb: v1alpha1.MutationMutate}
	bucket := Kinds{}.ChildOf("s3.aws.crossplane.io/v1beta1", "Bucket")
	checks := []struct {
		name      string
		got, want bool
	}{
		{"named revision, covered field", UpgradeBound(us, to(Revision{Name: "xdatabases-aws-2"})).AllowsMutation(rdsChild, ic), true},
		{"named revision, other field", UpgradeBound(us, to(Revision{Name: "xdatabases-aws-2"})).AllowsMutation(rdsChild, region), false},
		{"prefix revision", UpgradeBound(us, to(Revision{Name: "xclusters-abc"})).AllowsMutation(rdsChild, ic), true},
		{"other revision", UpgradeBound(us, to(Revision{Name: "xdatabases-aws-3"})).AllowsMutation(rdsChild, ic), false},
		{"kind not named gets nothing", UpgradeBound(us, to(Revision{Name: "xdatabases-aws-2"})).AllowsMutation(bucket, region), false},
		{"no revision", UpgradeBound(us, to(Revision{Name: ""})).AllowsMutation(rdsChild, ic), false},
		{"composition and number", UpgradeBound(us, to(RevisionOf("xdatabases-gcp-a1b2c3d", gcp(4)))).AllowsMutation(rdsChild, ic), true},
		{"composition, other number", UpgradeBound(us, to(RevisionOf("xdatabases-gcp-a1b2c3d", gcp(3)))).AllowsMutation(rdsChild, ic), false},
		{"hash name without its CompositionRevision", UpgradeBound(us, to(RevisionOf("xdatabases-gcp-a1b2c3d", nil))).AllowsMutation(rdsChild, ic), false},
		{"another revision's object", UpgradeBound(us, to(RevisionOf("xdatabases-gcp-ffffff", gcp(4)))).AllowsMutation(rdsChild, ic), false},
		{"the revision unchanged", UpgradeBound(us, Upgrade{Revision: Revision{Name: "xdatabases-aws-2"}}).AllowsMutation(rdsChild, ic), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	bad := *u
	bad.Spec.CompositionRevisions = []string{"a*b"}
	if err := CompileUpgrade(&bad); err == nil || !strings.Contains(err.Error(), "spec.compositionRevisions[0]") {
		t.Errorf("CompileUpgrade() = %v, want an error naming spec.compositionRevisions[0]", err)
	}
	noName := v1alpha1.UpgradeAllowance{Spec: v1alpha1.UpgradeAllowanceSpec{Inputs: []v1alpha1.InputVersion{{Kind: "EnvironmentConfig"}},
		Policies: []v1alpha1.PolicyEntry{{Target: v1alpha1.Target{APIGroup: "g", Resource: "r"}, Verbs: []string{"Update"}}}}}
	if err := CompileUpgrade(&noName); err == nil || !strings.Contains(err.Error(), "spec.inputs[0]") {
		t.Errorf("CompileUpgrade() = %v, want an error naming spec.inputs[0]", err)
	}
}

var evalNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const steadyXR = `apiVersion: example.com/v1alpha1
kind: XDatabase
metadata:
  name: db
  generation: 4
  annotations: %ANN%
spec: {size: %SIZE%, engine: postgres, tags: {team: a}}
status: {conditions: [{type: Synced, observedGeneration: 4}]}`

func xr(t testing.TB, size, ann string) map[string]any {
	return object(t, strings.NewReplacer("%SIZE%", size, "%ANN%", ann).Replace(steadyXR))
}

// xrWith is the small XR without annotations, with one text replacement.
func xrWith(t testing.TB, from, to string) map[string]any {
	return object(t, strings.Replace(strings.NewReplacer("%SIZE%", "small", "%ANN%", "{}").Replace(steadyXR), from, to, 1))
}

func TestEvaluate(t *testing.T) {
	s := dbSet(t)
	alice := Identity{Username: "alice@example.com", Groups: []string{"platform-team", "system:authenticated"}}
	bob := Identity{Username: "bob@example.com", Groups: []string{"system:authenticated"}}
	crossplane := Identity{Username: "system:serviceaccount:crossplane-system:crossplane"}
	jira := "{jira: INFRA-1, kausality.io/trace-ticket: T-9}"

	hop := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, Field: "spec.size",
		User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z", Attestations: map[string]string{"metadata.annotations[jira]": "INFRA-1"},
		Labels: map[string]string{"ticket": "T-9"}}
	claimHop := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "db", Generation: 2, Field: "spec.size", User: "alice@example.com", Timestamp: "2026-11-22T11:59:00Z"}
	claimAllowance := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "example.com", Resource: "xdatabases"},
		Verbs: []string{"Update"}, Generation: 2, Initiator: "alice@example.com", Trace: allowance.Trace{claimHop}}
	cpHop := hop
	cpHop.User = crossplane.Username
	cases := map[string]struct {
		reason         string
		old, new       map[string]any
		user           Identity
		parent         *allowance.Allowance
		wantAllowances []allowance.Allowance
		wantHop        allowance.Hop
		wantViolations []Violation
		ns             string // the Namespace's kausality.io/mode, if any
		watch          bool   // WatchSelection
		wantMode       v1alpha1.Mode
		wantWarnings   []string
	}{
		"PermittedChange": {
			reason: "A platform-team member with a jira annotation earns the rule's allowances, traced to her with the ticket captured.",
			old:    xr(t, "small", jira), new: xr(t, "large", jira), user: alice,
			wantAllowances: []allowance.Allowance{
				{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", APIVersion: "v1alpha1", Resource: "rdsinstances"},
					Verbs: []string{"Update"}, Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceClass", Verbs: []v1alpha1.MutationVerb{"Mutate"}}},
					Generation: 5, Initiator: "alice@example.com", Trace: allowance.Trace{hop}},
				{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"provider": "provider-aws", "kind": "RDSInstance"}},
					Verbs: []string{"Update"}, Generation: 5, Initiator: "alice@example.com", Trace: allowance.Trace{hop}},
			},
			wantHop: hop,
		},
		"NotASubject": {
			reason: "Bob may not initiate: the change is a violation naming field and policy, and earns nothing.",
			old:    xr(t, "small", jira), new: xr(t, "large", jira), user: bob,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z", Labels: map[string]string{"ticket": "T-9"}},
			wantViolations: []Violation{{Field: "spec.size", Policy: "xdatabase-policy", Reason: `user "bob@example.com" is not a subject with mayInitiate`}},
		},
		"SubjectWithoutMayInitiate": {
			reason: "Crossplane's service account is a subject but may only propagate.",
			old:    xr(t, "small", jira), new: xr(t, "large", jira), user: crossplane,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: crossplane.Username, Timestamp: "2026-11-22T12:00:00Z", Labels: map[string]string{"ticket": "T-9"}},
			wantViolations: []Violation{{Field: "spec.size", Policy: "xdatabase-policy", Reason: `user "system:serviceaccount:crossplane-system:crossplane" is not a subject with mayInitiate`}},
		},
		"PropagatedBySubject": {
			reason: "Crossplane's service account propagates a Claim's allowance: no mayInitiate needed, the trace continues the Claim's and keeps its initiator.",
			old:    xr(t, "small", jira), new: xr(t, "large", jira), user: crossplane, parent: &claimAllowance,
			wantAllowances: []allowance.Allowance{
				{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", APIVersion: "v1alpha1", Resource: "rdsinstances"},
					Verbs: []string{"Update"}, Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceClass", Verbs: []v1alpha1.MutationVerb{"Mutate"}}},
					Generation: 5, Initiator: "alice@example.com", Trace: allowance.Trace{claimHop, cpHop}},
				{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"provider": "provider-aws", "kind": "RDSInstance"}},
					Verbs: []string{"Update"}, Generation: 5, Initiator: "alice@example.com", Trace: allowance.Trace{claimHop, cpHop}},
			},
			wantHop: cpHop,
		},
		"PropagatedByNonSubject": {
			reason: "Only a subject may propagate: Bob writing the XR with a Claim allowance in hand is still a violation.",
			old:    xr(t, "small", jira), new: xr(t, "large", jira), user: bob, parent: &claimAllowance,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z", Labels: map[string]string{"ticket": "T-9"}},
			wantViolations: []Violation{{Field: "spec.size", Policy: "xdatabase-policy", Reason: `user "bob@example.com" is not a subject and may not propagate changes`}},
		},
		"ConditionFalse": {
			reason: "Without the jira annotation the condition fails and the violation quotes it.",
			old:    xr(t, "small", "{}"), new: xr(t, "large", "{}"), user: alice,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z"},
			wantViolations: []Violation{{Field: "spec.size", Policy: "xdatabase-policy", Reason: `condition "'jira' in object.metadata.annotations" is false`}},
		},
		"ConditionError": {
			reason: "A condition that cannot be evaluated (missing key) is a violation, not a pass.",
			old:    xr(t, "small", "{}"), new: xrWith(t, "engine: postgres", "engine: mysql"), user: alice,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z"},
			wantViolations: []Violation{{Field: "spec.engine", Policy: "xdatabase-policy", Reason: `condition "object.metadata.annotations['allow-recreate'] == 'true'" cannot be evaluated: cannot evaluate "object.metadata.annotations['allow-recreate'] == 'true'": no such key: allow-recreate`}},
		},
		"UnrestrictedRule": {
			reason: "A rule without policies allows every downstream operation.",
			old:    xr(t, "small", "{}"), new: xrWith(t, "team: a", "team: b"), user: alice,
			wantAllowances: []allowance.Allowance{
				{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "*", Resource: "*"}, Verbs: []string{"*"}, Generation: 5, Initiator: "alice@example.com",
					Trace: allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, Field: "spec.tags.team", User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z"}}},
				{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "*"}}, Verbs: []string{"*"}, Generation: 5, Initiator: "alice@example.com",
					Trace: allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, Field: "spec.tags.team", User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z"}}},
			},
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, Field: "spec.tags.team", User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z"},
		},
		"UnwatchedField": {
			reason: "A field no trigger watches earns nothing and is no violation; the function withholds its effects.",
			old:    xr(t, "small", "{}"), new: xrWith(t, "tags:", "region: eu, tags:"), user: bob,
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z"},
		},
		"NoChange": {
			reason: "A metadata-only write keeps the generation and earns nothing.",
			old:    xr(t, "small", "{}"), new: xr(t, "small", "{a: b}"), user: bob,
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 4, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z"},
		},
		"CompositionSwitchWatched": {
			reason: "A user pointing the XR at another Composition would un-gate it: a violation even for Alice, as no rule's trigger names the field.",
			old:    xr(t, "small", "{}"), new: xrWith(t, "engine: postgres", "engine: postgres, compositionRef: {name: ungated}"), user: alice, watch: true,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z"},
			wantViolations: []Violation{{Field: "spec.compositionRef", Policy: "xdatabase-policy", Reason: "it chooses what composes the object, and no rule's trigger permits changing it"}},
		},
		"CompositionSwitchByCrossplane": {
			reason: "Crossplane moving an XR to a new revision is not watched: unwatched fields earn nothing and are no violation.",
			old:    xrWith(t, "engine: postgres", "engine: postgres, compositionRevisionRef: {name: a-1}"), new: xrWith(t, "engine: postgres", "engine: postgres, compositionRevisionRef: {name: a-2}"), user: crossplane,
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: crossplane.Username, Timestamp: "2026-11-22T12:00:00Z"},
		},
		"ForgedStatus": {
			reason: "A client that sends no status does not make the XR look initializing: the phase reads the stored status, so Bob's resize is a violation.",
			old:    xr(t, "small", jira), new: withoutStatus(xr(t, "large", jira)), user: bob,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z", Labels: map[string]string{"ticket": "T-9"}},
			wantViolations: []Violation{{Field: "spec.size", Policy: "xdatabase-policy", Reason: `user "bob@example.com" is not a subject with mayInitiate`}},
		},
		"ModeOnObjectIgnored": {
			reason: "kausality.io/mode on the XR itself does not switch enforcement off; it earns a warning.",
			old:    xr(t, "small", jira), new: xr(t, "large", "{jira: INFRA-1, kausality.io/trace-ticket: T-9, kausality.io/mode: Log}"), user: bob,
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z", Labels: map[string]string{"ticket": "T-9"}},
			wantViolations: []Violation{{Field: "spec.size", Policy: "xdatabase-policy", Reason: `user "bob@example.com" is not a subject with mayInitiate`}},
			wantMode:       v1alpha1.ModeEnforce,
			wantWarnings:   []string{`annotation kausality.io/mode="Log" on XDatabase db is ignored: only a Namespace may set the mode (kubectl annotate namespace <name> kausality.io/mode=Log, as an administrator)`},
		},
		"ModeFromNamespace": {
			reason: "The Namespace's kausality.io/mode decides: Log reports Bob's violation without denying it.",
			old:    xr(t, "small", jira), new: xr(t, "large", jira), user: bob, ns: "Log",
			wantHop:        allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z", Labels: map[string]string{"ticket": "T-9"}},
			wantViolations: []Violation{{Field: "spec.size", Policy: "xdatabase-policy", Reason: `user "bob@example.com" is not a subject with mayInitiate`}},
			wantMode:       v1alpha1.ModeLog,
		},
		"TraceLabelTooLarge": {
			reason: "A trace label past the bound is refused, on creation too: every allowance of the chain would copy it.",
			new:    xr(t, "small", "{kausality.io/trace-ticket: "+strings.Repeat("x", allowance.MaxHopValue+1)+"}"), user: alice,
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 1, User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z",
				Labels: map[string]string{"ticket": strings.Repeat("x", allowance.MaxHopValue+1)}},
			wantViolations: []Violation{{Field: "metadata.annotations[kausality.io/trace-ticket]", Reason: "1025 bytes, more than the 1024 a trace label or attestation may hold: every allowance of the chain copies it"}},
		},
		"AttestationTooLarge": {
			reason: "A captured value past the bound refuses the change it would be attached to, and earns nothing.",
			old:    xr(t, "small", "{jira: INFRA-1}"), new: xr(t, "large", "{jira: "+strings.Repeat("J", allowance.MaxHopValue+1)+"}"), user: alice,
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z"},
			wantViolations: []Violation{
				{Field: "metadata.annotations[jira]", Reason: "1025 bytes, more than the 1024 a trace label or attestation may hold: every allowance of the chain copies it"},
				{Field: "spec.size", Policy: "xdatabase-policy", Reason: "the rule captures metadata.annotations[jira], which is too large to copy into the change's allowances"},
			},
		},
		"CapturedWithLabelsTooLarge": {
			reason: "Within its own bound, a captured value still counts with the object's trace labels: together past the bound, the change it would be attached to is refused.",
			old:    xr(t, "small", "{jira: INFRA-1}"),
			new: xr(t, "large", "{jira: "+strings.Repeat("J", 1024)+", kausality.io/trace-a: "+strings.Repeat("a", 1024)+", kausality.io/trace-b: "+strings.Repeat("b", 1024)+
				", kausality.io/trace-c: "+strings.Repeat("c", 1024)+"}"), user: alice,
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 5, User: "alice@example.com", Timestamp: "2026-11-22T12:00:00Z",
				Labels: map[string]string{"a": strings.Repeat("a", 1024), "b": strings.Repeat("b", 1024), "c": strings.Repeat("c", 1024)}},
			wantViolations: []Violation{
				{Field: "metadata.annotations[kausality.io/trace-*]", Reason: "the trace labels and attestations hold 4125 bytes together, more than 4096: every allowance of the chain copies them"},
				{Field: "spec.size", Policy: "xdatabase-policy", Reason: "the rule captures metadata.annotations[kausality.io/trace-*], which is too large to copy into the change's allowances"},
			},
		},
		"Create": {
			reason: "Creation is bounded by the initializing phase, not by allowances.",
			new:    xr(t, "small", "{}"), user: bob,
			wantHop: allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 1, User: "bob@example.com", Timestamp: "2026-11-22T12:00:00Z"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := Request{Object: tc.new, OldObject: tc.old, User: tc.user, Now: evalNow, Parent: tc.parent, WatchSelection: tc.watch}
			if tc.ns != "" {
				req.Namespace = map[string]any{"kind": "Namespace", "metadata": map[string]any{"name": "prod", "annotations": map[string]any{v1alpha1.AnnotationMode: tc.ns}}}
			}
			d, err := s.Evaluate(req)
			if err != nil {
				t.Fatalf("%s\nEvaluate(): %v", tc.reason, err)
			}
			if tc.wantMode == "" {
				tc.wantMode = v1alpha1.ModeEnforce
			}
			if d.Mode != tc.wantMode {
				t.Errorf("%s\nEvaluate() mode = %s, want %s", tc.reason, d.Mode, tc.wantMode)
			}
			if diff := cmp.Diff(tc.wantWarnings, d.Warnings); diff != "" {
				t.Errorf("%s\nEvaluate() warnings: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantAllowances, d.Allowances); diff != "" {
				t.Errorf("%s\nEvaluate() allowances: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantHop, d.Hop); diff != "" {
				t.Errorf("%s\nEvaluate() hop: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantViolations, d.Violations); diff != "" {
				t.Errorf("%s\nEvaluate() violations: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCrossplaneMetadata: a user's change of an annotation or label in
// Crossplane's domain that no rule permits is a violation (docs/FIELDS.md,
// "Rule"), except the keys anyone may set; Crossplane's own writes are
// not watched; a rule whose trigger names the key opens it.
func TestCrossplaneMetadata(t *testing.T) {
	bob := Identity{Username: "bob@example.com", Groups: []string{"system:authenticated"}}
	crossplane := Identity{Username: "system:serviceaccount:crossplane-system:crossplane"}
	opener := `metadata: {name: widgets}
spec:
  for: {apiGroup: example.com, kind: XDatabase}
  subjects: [{kind: User, name: bob@example.com, mayInitiate: true}]
  rules:
  - trigger: metadata.annotations[crossplane.io/widget]`
	widget := func(v string) map[string]any {
		return xr(t, "small", "{crossplane.io/widget: "+v+"}")
	}
	cases := map[string]struct {
		reason   string
		set      Set
		old, new map[string]any
		user     Identity
		watch    bool
		want     []Violation
	}{
		"UnknownKey": {
			reason: "Bob adds a key Crossplane's domain holds and nothing shows harmless.",
			set:    dbSet(t), old: xr(t, "small", "{}"), new: widget("on"), user: bob, watch: true,
			want: []Violation{{Field: "metadata.annotations[crossplane.io/widget]", Policy: "xdatabase-policy", Reason: ReasonCrossplaneMetadata}},
		},
		"RemovedKey": {
			reason: "Removing one is a change too.",
			set:    dbSet(t), old: widget("on"), new: xr(t, "small", "{}"), user: bob, watch: true,
			want: []Violation{{Field: "metadata.annotations[crossplane.io/widget]", Policy: "xdatabase-policy", Reason: ReasonCrossplaneMetadata}},
		},
		"SubdomainLabel": {
			reason: "A subdomain of crossplane.io is Crossplane's too, on a label as on an annotation.",
			set:    dbSet(t), old: xr(t, "small", "{}"), new: xrWith(t, "  name: db\n", "  name: db\n  labels: {pkg.crossplane.io/revision: r1}\n"), user: bob, watch: true,
			want: []Violation{{Field: "metadata.labels[pkg.crossplane.io/revision]", Policy: "xdatabase-policy", Reason: ReasonCrossplaneMetadata}},
		},
		"Paused": {
			reason: "crossplane.io/paused only stops Crossplane: anyone may set it.",
			set:    dbSet(t), old: xr(t, "small", "{}"), new: xr(t, "small", "{crossplane.io/paused: \"true\"}"), user: bob, watch: true,
		},
		"OtherDomains": {
			reason: "Keys outside Crossplane's domain are the user's.",
			set:    dbSet(t), old: xr(t, "small", "{}"), new: xr(t, "small", "{notcrossplane.io/x: a, example.com/y: b}"), user: bob, watch: true,
		},
		"CrossplaneWrites": {
			reason: "Crossplane's own writes are not watched.",
			set:    dbSet(t), old: xr(t, "small", "{}"), new: widget("on"), user: crossplane,
		},
		"OpenedByARule": {
			reason: "A platform team opens a key on purpose with a rule whose trigger names it.",
			set:    dbSet(t, opener), old: xr(t, "small", "{}"), new: widget("on"), user: bob, watch: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := tc.set.Evaluate(Request{Object: tc.new, OldObject: tc.old, User: tc.user, Now: evalNow, WatchSelection: tc.watch})
			if err != nil {
				t.Fatalf("%s\nEvaluate(): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, d.Violations); diff != "" {
				t.Errorf("%s\nEvaluate() violations: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// withoutStatus is obj as a client sends it when it leaves status out.
func withoutStatus(obj map[string]any) map[string]any {
	delete(obj, "status")
	return obj
}

func TestViolationError(t *testing.T) {
	v := Violation{Field: "spec.size", Policy: "xdatabase-policy", Reason: "condition \"x\" is false"}
	want := `change to spec.size is not permitted by AllowancePolicy xdatabase-policy: condition "x" is false`
	if v.Error() != want {
		t.Errorf("Error() = %q, want %q", v.Error(), want)
	}
}

func TestCELCostLimited(t *testing.T) {
	expensive := `metadata: {name: expensive}
spec:
  for: {apiGroup: example.com, kind: XDatabase}
  initializing: {when: "object.spec.items.all(a, object.spec.items.all(b, object.spec.items.all(c, a + b + c != 'x')))"}`
	s, errs := NewCache().For("example.com/v1alpha1", "XDatabase", []v1alpha1.AllowancePolicy{*decode[v1alpha1.AllowancePolicy](t, expensive)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	items := make([]any, 300)
	for i := range items {
		items[i] = "item"
	}
	_, err := s.Phase(map[string]any{"metadata": map[string]any{"name": "db"}, "spec": map[string]any{"items": items}})
	if err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Errorf("Phase() error = %v, want the CEL cost limit to stop it", err)
	}
}

func TestSubjectsAndProtection(t *testing.T) {
	s := dbSet(t)
	p := s.Policies()[0]
	cases := map[string]struct {
		id                   Identity
		subject, mayInitiate bool
	}{
		"GroupWithMayInitiate": {id: Identity{Username: "alice", Groups: []string{"platform-team"}}, subject: true, mayInitiate: true},
		"ServiceAccount":       {id: Identity{Username: "system:serviceaccount:crossplane-system:crossplane"}, subject: true},
		"OtherNamespaceSA":     {id: Identity{Username: "system:serviceaccount:default:crossplane"}},
		"Stranger":             {id: Identity{Username: "bob", Groups: []string{"system:authenticated"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := p.IsSubject(tc.id); got != tc.subject {
				t.Errorf("IsSubject(%+v) = %v, want %v", tc.id, got, tc.subject)
			}
			if got := p.mayInitiate(tc.id); got != tc.mayInitiate {
				t.Errorf("mayInitiate(%+v) = %v, want %v", tc.id, got, tc.mayInitiate)
			}
		})
	}
	if s.DeletionProtection() {
		t.Error("DeletionProtection() = true for a policy that does not set it")
	}
	protected := `metadata: {name: protected}
spec: {for: {apiGroup: example.com, kind: XDatabase}, deletionProtection: true}`
	if !dbSet(t, protected).DeletionProtection() {
		t.Error("DeletionProtection() = false although one policy sets it")
	}
}
