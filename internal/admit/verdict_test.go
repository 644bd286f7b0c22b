package admit

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// checkVerdict fails the test unless v refuses for wantReason with a
// message containing want, or, when want is "", allows. why is the case's
// reason and call names what was asked, for the failure message.
func checkVerdict(t *testing.T, why, call string, v Verdict, wantReason, want string) {
	t.Helper()
	if want == "" {
		if !v.Allowed() {
			t.Errorf("%s\n%s = %q, want allowed", why, call, v)
		}
		return
	}
	if v.Reason != wantReason || !strings.Contains(v.Message, want) {
		t.Errorf("%s\n%s = %q, want %s containing %q", why, call, v, wantReason, want)
	}
}

func TestVerdict(t *testing.T) {
	if v := Allow("w"); !v.Allowed() || v.String() != "" || len(v.Warnings) != 1 {
		t.Errorf("Allow(w) = %#v, want an allowed verdict that keeps its warning", v)
	}
	if v := (Verdict{}); !v.Allowed() {
		t.Error("the zero Verdict denies; it must allow")
	}
	v := Deny(metrics.ReasonChain, "allowance %d on %s", 1, "Bucket a")
	if v.Allowed() || v.Message != "allowance 1 on Bucket a" || v.String() != "chain: allowance 1 on Bucket a" {
		t.Errorf("Deny(...) = %#v, want a denial for chain with its formatted message", v)
	}
}

func TestEvaluate(t *testing.T) {
	policies := func(mode v1alpha1.Mode) policy.Set {
		p := v1alpha1.AllowancePolicy{}
		if err := yaml.Unmarshal([]byte(fixture.BucketsPolicy), &p); err != nil {
			t.Fatal(err)
		}
		p.Spec.Mode = mode
		ps := []v1alpha1.AllowancePolicy{p}
		set, errs := policy.NewCache().For("recorder.kausality.io/v1alpha1", "Bucket", ps)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return set
	}
	const violation = `Bucket orders-data: change to spec.forProvider.size is not permitted by AllowancePolicy buckets: user "bob@example.com" is not a subject with mayInitiate (no parent allowance)`
	cases := map[string]struct {
		reason      string
		mode        v1alpha1.Mode
		user        string
		groups      []string
		wantReason  string
		wantWarning string
		wantAudit   map[string]string
	}{
		"Permitted": {reason: "A member of the platform team, whom the policy lets initiate, changes the size; nothing to report.",
			mode: v1alpha1.ModeEnforce, user: alice, groups: []string{"platform-team"}, wantAudit: map[string]string{AuditMode: "Enforce"}},
		"Enforced": {reason: "Enforce mode denies a change no rule permits, naming object, field, policy and the note.",
			mode: v1alpha1.ModeEnforce, user: bob, wantReason: metrics.ReasonPolicyViolation,
			wantAudit: map[string]string{AuditMode: "Enforce", AuditViolations: violation}},
		"Logged": {reason: "Log mode lets it in with a warning that says it would be denied, and audits the same.",
			mode: v1alpha1.ModeLog, user: bob, wantWarning: "Log mode, would be denied: " + violation,
			wantAudit: map[string]string{AuditMode: "Log", AuditViolations: violation}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, obj := bucket(map[string]any{"size": "small"}), bucket(map[string]any{"size": "large"})
			// Observed by its provider: past the initializing phase, where the rules apply.
			for _, o := range []*unstructured.Unstructured{old, obj} {
				o.Object["status"] = map[string]any{"observedGeneration": int64(5)}
			}
			r := policy.Request{Object: obj.Object, OldObject: old.Object, User: policy.Identity{Username: tc.user, Groups: tc.groups}, Now: now, WatchAll: true}
			d, v := Evaluate(policies(tc.mode), r, obj, "no parent allowance")
			if v.Reason != tc.wantReason {
				t.Errorf("%s\nEvaluate(...) = %q, want reason %q", tc.reason, v, tc.wantReason)
			}
			if tc.wantReason != "" && v.Message != violation {
				t.Errorf("%s\nEvaluate(...) message %q, want %q", tc.reason, v.Message, violation)
			}
			if tc.wantWarning != "" && !slices.Contains(v.Warnings, tc.wantWarning) {
				t.Errorf("%s\nEvaluate(...) warnings %q, want %q among them", tc.reason, v.Warnings, tc.wantWarning)
			}
			if diff := cmp.Diff(tc.wantAudit, v.Audit); diff != "" {
				t.Errorf("%s\nEvaluate(...) audit: -want, +got:\n%s", tc.reason, diff)
			}
			if (len(d.Violations) > 0) != (tc.user == bob) {
				t.Errorf("%s\nEvaluate(...) violations %v", tc.reason, d.Violations)
			}
		})
	}
}

// TestEvaluateRuntimeError: a policy that compiles but fails on every
// object of its kind (a v2 XR has no top-level status.observedGeneration)
// locks none of them: the phase is taken as Steady, the strictest, with a
// warning, and the rules decide. An error that leaves the policies
// undecidable (the Namespace's mode is malformed) lets through only a
// write that leaves the spec alone, which earns nothing.
func TestEvaluateRuntimeError(t *testing.T) {
	p := v1alpha1.AllowancePolicy{}
	if err := yaml.Unmarshal([]byte(`
metadata: {name: xstores}
spec:
  for: {apiGroup: example.org, kind: XStore}
  subjects: [{kind: User, name: alice@example.com, mayInitiate: true}]
  initializing:
    when: "object.status.observedGeneration < 1"
  rules:
  - trigger: spec.size
    policies:
    - target: {apiGroup: example.org, resource: buckets}
      verbs: [Update]
`), &p); err != nil {
		t.Fatal(err)
	}
	set, errs := policy.NewCache().For("example.org/v1", "XStore", []v1alpha1.AllowancePolicy{p})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	xstore := func(size, comp string, ann map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.org/v1", "kind": "XStore",
			"metadata": map[string]any{"name": "shop", "namespace": "team-a", "generation": int64(3)},
			"spec":     map[string]any{"size": size, "crossplane": map[string]any{"compositionRef": map[string]any{"name": comp}}},
			"status":   map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True", "observedGeneration": int64(3)}}},
		}}
		u.SetAnnotations(ann)
		return u
	}
	badMode := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team-a", "annotations": map[string]any{v1alpha1.AnnotationMode: "Off"}}}
	old := xstore("small", "xstores", nil)
	cases := map[string]struct {
		reason     string
		obj        *unstructured.Unstructured
		user       string
		crossplane bool
		namespace  map[string]any
		wantReason string
		want       string // "" allowed
		earns      bool
	}{
		"MetadataOnly": {reason: "Setting kausality.io/allow-delete changes nothing the rules watch: it passes.",
			obj: xstore("small", "xstores", map[string]string{v1alpha1.AnnotationAllowDelete: "true"}), user: alice},
		"PermittedChange": {reason: "The rules decide in the Steady phase: Alice may change the size.",
			obj: xstore("large", "xstores", nil), user: alice, earns: true},
		"UnpermittedChange": {reason: "Bob, no subject, may not.",
			obj: xstore("large", "xstores", nil), user: bob, wantReason: metrics.ReasonPolicyViolation, want: "spec.size"},
		"CrossplaneReferences": {reason: "Crossplane writing the fields it manages passes.",
			obj: xstore("small", "xstores-2", nil), user: alice, crossplane: true},
		"UserSwitchesComposition": {reason: "A user switching the Composition is still refused.",
			obj: xstore("small", "xstores-2", nil), user: alice, wantReason: metrics.ReasonPolicyViolation, want: "spec.crossplane.compositionRef.name"},
		"UndecidableMetadataOnly": {reason: "With the Namespace's mode malformed, a write that leaves the spec alone passes and earns nothing.",
			obj: xstore("small", "xstores", map[string]string{v1alpha1.AnnotationAllowDelete: "true"}), user: alice, namespace: badMode},
		"UndecidableSpecChange": {reason: "With the Namespace's mode malformed, a spec change is refused, naming the object and the annotation.",
			obj: xstore("large", "xstores", nil), user: alice, namespace: badMode, wantReason: metrics.ReasonPolicyError, want: "XStore team-a/shop: cannot evaluate AllowancePolicies xstores: XStore shop: annotation kausality.io/mode on Namespace team-a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := policy.Request{Object: tc.obj.Object, OldObject: old.Object, Namespace: tc.namespace, User: policy.Identity{Username: tc.user}, Now: now, WatchSelection: !tc.crossplane}
			d, v := Evaluate(set, r, tc.obj, "")
			checkVerdict(t, tc.reason, "Evaluate(...)", v, tc.wantReason, tc.want)
			if tc.want == "" && (len(d.Allowances) > 0) != tc.earns {
				t.Errorf("%s\nEvaluate(...) earned %v, want allowances: %t", tc.reason, d.Allowances, tc.earns)
			}
			if tc.want == "" && len(v.Warnings) == 0 {
				t.Errorf("%s\nEvaluate(...) warns nothing; the error must be named", tc.reason)
			}
		})
	}
}
