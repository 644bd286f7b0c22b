package policy

import (
	"testing"
)

func TestEvaluateDecided(t *testing.T) {
	s := dbSet(t)
	alice := Identity{Username: "alice@example.com", Groups: []string{"platform-team", "system:authenticated"}}
	bob := Identity{Username: "bob@example.com", Groups: []string{"system:authenticated"}}
	jira := "{jira: INFRA-1}"
	cases := map[string]struct {
		reason string
		user   Identity
		want   Decided
	}{
		"Permitted": {reason: "A permitted change is attributed to the rule that permitted it.", user: alice,
			want: Decided{Policy: "xdatabase-policy", Rule: "spec.rules[0]"}},
		"Denied": {reason: "A violation is attributed to the rule whose trigger it hit and that refused the user.", user: bob,
			want: Decided{Policy: "xdatabase-policy", Rule: "spec.rules[0]"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := s.Evaluate(Request{Object: xr(t, "large", jira), OldObject: xr(t, "small", jira), User: tc.user, Now: evalNow})
			if err != nil {
				t.Fatal(err)
			}
			if d.Decided != tc.want {
				t.Errorf("%s\nDecided = %+v, want %+v", tc.reason, d.Decided, tc.want)
			}
		})
	}
}

func TestRestrictedBy(t *testing.T) {
	s := dbSet(t)
	rds := Child{APIGroup: "rds.aws.crossplane.io", APIVersion: "v1alpha1", Kind: "RDSInstance", Resource: "rdsinstances"}
	if got := s.RestrictedBy(rds); got != "xdatabase-policy" {
		t.Errorf("RestrictedBy(rdsinstances) = %q, want the policy whose rule names the kind", got)
	}
	if got := s.RestrictedBy(Child{APIGroup: "example.org", APIVersion: "v1", Kind: "Other", Resource: "others"}); got != "" {
		t.Errorf("RestrictedBy(others) = %q, want none: no policy names the kind", got)
	}
}
