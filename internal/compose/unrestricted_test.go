package compose

import (
	"context"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// TestUnrestrictedKind: an XR some policy is for that composes a managed
// resource of a kind no policy names says so, in a Warning and in its
// KausalityRestricted condition, since nothing holds that resource's
// changes back; kinds without an external resource, and XRs no policy is
// for, are not reported.
func TestUnrestrictedKind(t *testing.T) {
	bucket := map[string]any{
		"apiVersion": "s3.aws.m.upbound.io/v1beta1", "kind": "Bucket",
		"metadata": map[string]any{"name": "db-logs"},
		"spec":     map[string]any{"forProvider": map[string]any{"region": "eu-central-1"}},
	}
	cases := map[string]struct {
		reason   string
		extra    map[string]any
		policies []string
		want     fnv1.Status // STATUS_CONDITION_UNSPECIFIED: no condition
		warning  string
	}{
		"ManagedKindNoPolicyNames": {reason: "The Bucket's kind is in no policy for XDatabase: a Warning and a False condition name it.",
			extra: bucket, policies: []string{policyDB}, want: fnv1.Status_STATUS_CONDITION_FALSE,
			warning: "logs (Bucket s3.aws.m.upbound.io) is a managed resource of a kind no AllowancePolicy for XDatabase/db names (xdatabase-policy)"},
		"EveryKindNamed": {reason: "The policy names the only managed kind composed.",
			policies: []string{policyDB}, want: fnv1.Status_STATUS_CONDITION_TRUE},
		"UnmanagedKind": {reason: "A Deployment has no external resource to protect: not reported.",
			extra: deployment("nginx:1"), policies: []string{policyDB}, want: fnv1.Status_STATUS_CONDITION_TRUE},
		"NoPolicy": {reason: "No policy is for the XR: it is not under Kausality, so nothing is reported.",
			extra: bucket},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, xr(t, 2, 1, nil), nil, obj(t, rds("db.t3.small", "")), tc.policies...)
			if tc.extra != nil {
				req.Desired.Resources["logs"] = &fnv1.Resource{Resource: mustStruct(t, tc.extra)}
			}
			rsp, err := newTestFunction().RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var got fnv1.Status
			for _, c := range rsp.GetConditions() {
				if c.GetType() == v1alpha1.ConditionRestricted {
					got = c.GetStatus()
				}
			}
			if got != tc.want {
				t.Errorf("%s\n%s = %s, want %s", tc.reason, v1alpha1.ConditionRestricted, got, tc.want)
			}
			found := false
			for _, r := range rsp.GetResults() {
				if strings.Contains(r.GetMessage(), "no AllowancePolicy for") {
					found = true
					if tc.warning == "" || !strings.Contains(r.GetMessage(), tc.warning) || r.GetSeverity() != fnv1.Severity_SEVERITY_WARNING {
						t.Errorf("%s\nunexpected result %s: %q", tc.reason, r.GetSeverity(), r.GetMessage())
					}
				}
			}
			if tc.warning != "" && !found {
				t.Errorf("%s\nno Warning names the unrestricted resource: %v", tc.reason, rsp.GetResults())
			}
		})
	}
}
