package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// typed is o as an admission request carries it.
func typed(t testing.TB, o runtime.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: normal(t, m)}
	u.SetGroupVersionKind(gvk)
	return u
}

func TestPolicies(t *testing.T) {
	ap := func(y string, mods ...func(*v1alpha1.AllowancePolicy)) *unstructured.Unstructured {
		return typed(t, allowancePolicy(t, y, mods...), v1alpha1.AllowancePolicyGroupVersionKind)
	}
	ua := func(mods ...func(*v1alpha1.UpgradeAllowance)) *unstructured.Unstructured {
		u := decode[v1alpha1.UpgradeAllowance](t, upgradeAllowance)
		for _, m := range mods {
			m(u)
		}
		return typed(t, u, v1alpha1.UpgradeAllowanceGroupVersionKind)
	}
	badCEL := func(p *v1alpha1.AllowancePolicy) { p.Spec.Rules[0].Conditions = []string{"object.spec.size =="} }
	garbled := create(asAlice, ap(claimsPolicy))
	garbled.Object.Raw = []byte(`{"spec":{"rules":"spec.size"}}`)

	cases := map[string]struct {
		reason string
		req    admission.Request
		// prefix: the denial message starts with want.Message.
		prefix bool
		want   result
	}{
		"ValidPolicy": {
			reason: "A policy whose CEL and paths compile is admitted.",
			req:    create(asAlice, ap(claimsPolicy)),
			want:   result{Allowed: true},
		},
		"ValidPolicyUpdate": {
			reason: "Updates are validated like creates.",
			req:    update(asAlice, ap(claimsPolicy), ap(xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) { p.Name = "claims" })),
			want:   result{Allowed: true},
		},
		"InvalidCEL": {
			reason: "A condition that does not compile is denied naming the policy, the field and the expression.",
			req:    create(asAlice, ap(claimsPolicy, badCEL)),
			// The rest is cel-go's syntax error report.
			prefix: true,
			want:   result{Code: http.StatusForbidden, Message: `AllowancePolicy claims: AllowancePolicy claims is invalid: spec.rules[0].conditions[0] "object.spec.size ==": ERROR: <input>:1:20: Syntax error: `},
		},
		"InvalidCELOnUpdate": {
			reason: "An update cannot break a policy that compiled before.",
			req:    update(asAlice, ap(claimsPolicy), ap(claimsPolicy, badCEL)),
			// The rest is cel-go's syntax error report.
			prefix: true,
			want:   result{Code: http.StatusForbidden, Message: `AllowancePolicy claims: AllowancePolicy claims is invalid: spec.rules[0].conditions[0] "object.spec.size ==": ERROR: <input>:1:20: Syntax error: `},
		},
		"NonBooleanInitializingWhen": {
			reason: "initializing.when must be a boolean expression.",
			req: create(asAlice, ap(xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) {
				p.Spec.Initializing.When = "size(object.spec)"
			})),
			want: result{Code: http.StatusForbidden, Message: `AllowancePolicy xdatabases: AllowancePolicy xdatabases is invalid: spec.initializing.when "size(object.spec)": expression yields int, want bool`},
		},
		"InvalidTrigger": {
			reason: "A trigger path that does not parse is denied naming the path.",
			req:    create(asAlice, ap(claimsPolicy, func(p *v1alpha1.AllowancePolicy) { p.Spec.Rules[0].Trigger = "spec.size[[" })),
			want:   result{Code: http.StatusForbidden, Message: `AllowancePolicy claims: AllowancePolicy claims is invalid: spec.rules[0].trigger: cannot parse path pattern "spec.size[[": unterminated '[' at position 9`},
		},
		"Undecodable": {
			reason: "A policy that does not decode is denied, not admitted unchecked.",
			req:    garbled,
			want:   result{Code: http.StatusForbidden, Message: "AllowancePolicy claims: json: cannot unmarshal string into Go struct field AllowancePolicySpec.spec.rules of type []v1alpha1.Rule"},
		},
		"ValidUpgradeAllowance": {
			reason: "UpgradeAllowances are validated too; a valid one is admitted.",
			req:    create(asAlice, ua()),
			want:   result{Allowed: true},
		},
		"InvalidUpgradeRevision": {
			reason: "A composition revision pattern with a * inside is denied naming the field.",
			req: create(asAlice, ua(func(u *v1alpha1.UpgradeAllowance) {
				u.Spec.CompositionRevisions = []string{"xdatabases-*-2"}
			})),
			want: result{Code: http.StatusForbidden, Message: "UpgradeAllowance xdatabases-buckets-2: UpgradeAllowance xdatabases-buckets-2 is invalid: spec.compositionRevisions[0]: \"xdatabases-*-2\" must be a revision name, optionally ending in *"},
		},
		"InvalidUpgradeServiceAccount": {
			reason: "serviceAccount is a service account's user name, or it would never match a writer.",
			req: create(asAlice, ua(func(u *v1alpha1.UpgradeAllowance) {
				u.Spec.ServiceAccount = "crossplane"
			})),
			want: result{Code: http.StatusForbidden, Message: `UpgradeAllowance xdatabases-buckets-2: UpgradeAllowance xdatabases-buckets-2 is invalid: spec.serviceAccount: "crossplane" must be a service account's user name, system:serviceaccount:<namespace>:<name>`},
		},
		"InvalidUpgradeMutationPath": {
			reason: "An UpgradeAllowance's mutation paths must parse.",
			req: create(asAlice, ua(func(u *v1alpha1.UpgradeAllowance) {
				u.Spec.Policies[0].Mutations[0].JSONPath = "spec.forProvider.tags[["
			})),
			want: result{Code: http.StatusForbidden, Message: `UpgradeAllowance xdatabases-buckets-2: UpgradeAllowance xdatabases-buckets-2 is invalid: spec.policies[0]: mutations[0]: invalid jsonPath "spec.forProvider.tags[[": cannot parse path pattern "spec.forProvider.tags[[": unterminated '[' at position 21`},
		},
		"DeleteNotValidated": {
			reason: "Deleting a policy, even a broken one, is not this webhook's business.",
			req:    remove(asAlice, ap(claimsPolicy, badCEL)),
			want:   result{Allowed: true},
		},
		"OtherKind": {
			reason: "Kinds other than AllowancePolicy and UpgradeAllowance pass.",
			req:    create(asBob, claim(t)),
			want:   result{Allowed: true},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			h := &Policies{}
			got := outcome(t, tc.req, h.Handle(context.Background(), tc.req))
			if tc.prefix && strings.HasPrefix(got.Message, tc.want.Message) {
				got.Message = tc.want.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
