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
