package why

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/report"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// withheldLines are what the function recorded on the XR: a mutation no
// allowance covers, a created bucket no rule names, drift, and a logic
// change no UpgradeAllowance covers.
var withheldLines = []report.Withheld{
	{Resource: "db", Kind: "Instance", Name: "shop-db", Verb: "Mutate", Path: "spec.forProvider.instanceType", Reason: "no unconsumed allowance on XDatabase/shop grants Update of instances; policies: db"},
	{Resource: "backups", Kind: "Bucket", Name: "shop-backups", Verb: "Create", Reason: "no unconsumed allowance on XDatabase/shop grants Create of buckets; policies: db"},
	{Resource: "db", Kind: "Instance", Name: "shop-db", Verb: "Mutate", Path: "spec.forProvider.engineVersion", Reason: "drift: the composition still wants the value it last applied and the resource was changed outside it; policy drift is Deny"},
	{Resource: "db", Kind: "Instance", Name: "shop-db", Verb: "Insert", Path: "spec.forProvider.tags[team]", Reason: "the logic changed (Composition xdatabases revision 2 → 3) and no UpgradeAllowance naming that covers it"},
}

func xr(initiator string) *unstructured.Unstructured {
	msg := make([]string, 0, len(withheldLines))
	for _, w := range withheldLines {
		msg = append(msg, w.String())
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"crossplane": map[string]any{}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": v1alpha1.ConditionAllowed, "status": "False", "message": strings.Join(msg, "; ")},
			map[string]any{"type": v1alpha1.ConditionPropagated, "status": "False", "message": "resource replica (Instance shop-replica): held: batch 2 of 3 waits for batch 1; the window opens at 2026-11-26T02:00:00Z"},
		}},
	}}
	u.SetAPIVersion("example.org/v1alpha1")
	u.SetKind("XDatabase")
	u.SetNamespace("team-a")
	u.SetName("shop")
	if initiator != "" {
		u.SetAnnotations(map[string]string{v1alpha1.AnnotationTrace: allowance.FormatTrace(allowance.Trace{{APIVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "shop", Generation: 4, User: initiator}})})
	}
	return u
}

func composed() []report.Object {
	return []report.Object{
		{APIVersion: "rds.aws.m.upbound.io/v1beta1", Kind: "Instance", Name: "shop-db", Role: report.RoleManaged},
		{APIVersion: "rds.aws.m.upbound.io/v1beta1", Kind: "Instance", Name: "shop-replica", Role: report.RoleManaged, Pending: []string{"Update at generation 4 by alice"}},
	}
}

func policies() []v1alpha1.AllowancePolicy {
	return []v1alpha1.AllowancePolicy{{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: v1alpha1.AllowancePolicySpec{
			For:      v1alpha1.ObjectKind{APIGroup: "example.org", Kind: "XDatabase"},
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: "alice", MayInitiate: true}, {Kind: v1alpha1.SubjectServiceAccount, Namespace: "ci", Name: "deployer"}},
			Rules: []v1alpha1.Rule{{
				Trigger: "spec.parameters.size", Conditions: []string{`has(object.metadata.annotations.ticket)`},
				Policies: []v1alpha1.PolicyEntry{{
					Target: v1alpha1.Target{APIGroup: "rds.aws.m.upbound.io", Resource: "instances"}, Verbs: []string{v1alpha1.VerbUpdate},
					Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceType", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
				}},
			}},
		},
		Status: v1alpha1.PolicyStatus{Targets: []v1alpha1.ResolvedTarget{
			{APIGroup: "rds.aws.m.upbound.io", Resource: "instances", Kind: "Instance"},
			{APIGroup: "s3.aws.m.upbound.io", Resource: "buckets", Kind: "Bucket"},
		}},
	}}
}

func TestOf(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     Input
		// want is, per change, "verb path: cause, permits@initiator".
		want    []string
		held    int
		pending int
	}{
		"All": {
			reason: "Every line explained: the covered mutation by its rule, the rest by their causes.",
			in:     Input{XR: xr("alice"), Composed: composed(), Policies: policies()},
			want: []string{
				"Mutate spec.forProvider.instanceType: Allowance, spec.rules[0].policies[0]@Yes",
				"Create : Allowance, ",
				"Mutate spec.forProvider.engineVersion: Drift, ",
				"Insert spec.forProvider.tags[team]: Upgrade, ",
			},
			held: 1, pending: 1,
		},
		"NotASubject": {
			reason: "An initiator no subject with mayInitiate names cannot start the rule.",
			in:     Input{XR: xr("mallory"), Composed: composed(), Policies: policies(), Field: "spec.forProvider.instanceType"},
			want:   []string{"Mutate spec.forProvider.instanceType: Allowance, spec.rules[0].policies[0]@No", "Create : Allowance, "},
			held:   1, pending: 1,
		},
		"FieldPrefix": {
			reason: "A field above the changed one keeps it, and object verbs too.",
			in:     Input{XR: xr(""), Composed: composed(), Policies: policies(), Field: "spec.forProvider.tags"},
			want:   []string{"Create : Allowance, ", "Insert spec.forProvider.tags[team]: Upgrade, "},
			held:   1, pending: 1,
		},
		"ManagedResource": {
			reason: "Asked about the replica, only its held change and pending allowance remain.",
			in:     Input{XR: xr("alice"), Composed: composed(), Policies: policies(), Kind: "Instance", Name: "shop-replica"},
			held:   1, pending: 1,
		},
		"NoPolicies": {
			reason: "Without policies the Bucket's kind is unknown to them; still nothing covers it.",
			in:     Input{XR: xr("alice"), Policies: nil, Kind: "Bucket", Name: "shop-backups"},
			want:   []string{"Create : Allowance, "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Of(tc.in)
			if err != nil {
				t.Fatalf("%s\nOf(...): %v", tc.reason, err)
			}
			var got []string
			for _, c := range e.Changes {
				var ps []string
				for _, p := range c.Permits {
					ps = append(ps, p.At+"@"+p.Initiator)
				}
				got = append(got, c.Verb+" "+c.Path+": "+string(c.Cause)+", "+strings.Join(ps, ","))
				if c.Remedy == "" {
					t.Errorf("%s\nchange %s has no remedy", tc.reason, c.Withheld)
				}
				if (c.Cause == CauseUpgrade || len(c.Permits) == 0 && c.Cause == CauseAllowance) && c.Suggest == "" {
					t.Errorf("%s\nchange %s is covered by nothing and suggests nothing", tc.reason, c.Withheld)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nOf(...).Changes: -want, +got:\n%s", tc.reason, diff)
			}
			if len(e.Held) != tc.held || len(e.Pending) != tc.pending {
				t.Errorf("%s\nOf(...): %d held, %d pending; want %d, %d", tc.reason, len(e.Held), len(e.Pending), tc.held, tc.pending)
			}
		})
	}
	if _, err := Of(Input{}); err == nil {
		t.Error("Of(no XR): want an error")
	}
}

func TestText(t *testing.T) {
	cases := map[string]Input{
		"all":     {XR: xr("alice"), Composed: composed(), Policies: policies()},
		"nothing": {XR: func() *unstructured.Unstructured { u := xr("alice"); u.Object["status"] = map[string]any{}; return u }(), Policies: policies()},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Of(in)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".txt"), e.Text())
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	fixture.Golden(t, path, []byte(got), *update)
}

// TestSuggestedRulePermits adds the suggested rule to the policy and
// explains again: the change it was suggested for is then covered.
func TestSuggestedRulePermits(t *testing.T) {
	in := Input{XR: xr("alice"), Composed: composed(), Policies: policies(), Kind: "Bucket", Name: "shop-backups"}
	e, err := Of(in)
	if err != nil || len(e.Changes) != 1 || e.Changes[0].Suggest == "" {
		t.Fatalf("Of(...) = %+v, %v: want one change with a suggestion", e, err)
	}
	var rules []v1alpha1.Rule
	if err := yaml.Unmarshal([]byte(e.Changes[0].Suggest), &rules); err != nil || len(rules) != 1 {
		t.Fatalf("suggestion %q is not one rule: %v", e.Changes[0].Suggest, err)
	}
	in.Policies[0].Spec.Rules = append(in.Policies[0].Spec.Rules, rules...)
	if e, err = Of(in); err != nil || len(e.Changes) != 1 || len(e.Changes[0].Permits) != 1 || e.Changes[0].Permits[0].At != "spec.rules[1].policies[0]" {
		t.Errorf("with the suggested rule, Of(...) = %+v, %v: want the change covered by spec.rules[1].policies[0]", e.Changes, err)
	}
}

// TestPhaseEntries: a deleting section that covers a change permits it
// only while the XR is deleted; explaining a live XR's withheld change
// must not offer it.
func TestPhaseEntries(t *testing.T) {
	ps := policies()
	ps[0].Spec.Deleting = &v1alpha1.DeletingPhase{Policies: []v1alpha1.PolicyEntry{{
		Target: v1alpha1.Target{APIGroup: "rds.aws.m.upbound.io", Resource: "instances"}, Verbs: []string{v1alpha1.VerbAll},
	}}}
	deleted := xr("alice")
	now := metav1.Now()
	deleted.SetDeletionTimestamp(&now)
	cases := map[string]struct {
		xr   *unstructured.Unstructured
		want []string
	}{
		"Live":     {xr: xr("alice"), want: []string{"spec.rules[0].policies[0]"}},
		"Deleting": {xr: deleted, want: []string{"spec.rules[0].policies[0]", "spec.deleting.policies[0]"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Of(Input{XR: tc.xr, Composed: composed(), Policies: ps, Kind: "Instance", Name: "shop-db", Field: "spec.forProvider.instanceType"})
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Changes) != 1 {
				t.Fatalf("want the instanceType change alone, got %+v", e.Changes)
			}
			var got []string
			for _, p := range e.Changes[0].Permits {
				got = append(got, p.At)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("permitting places: -want, +got:\n%s", diff)
			}
		})
	}
}
