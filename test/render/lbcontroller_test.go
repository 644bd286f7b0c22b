package render

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// The Release's values the load balancer controller's pipeline raises once
// the composed XPodIdentity reports its role (examples/corpus/lb-controller).
const (
	replicaCount = "spec.forProvider.values.replicaCount"
	roleArnValue = "spec.forProvider.values.serviceAccount.annotations[eks.amazonaws.com/role-arn]"
	roleArn      = "arn:aws:iam::123456789012:role/prod-f43e0b9c3b44"
)

// lbControllerChecks are TestBehaviour's checks of the lb-controller
// corpus entry: a value its pipeline raises is part of the XR's creation
// while that lasts, and withheld like any uncaused change after it.
var lbControllerChecks = map[string]func(t *testing.T, r rendering){
	"lb-controller/1-create": func(t *testing.T, r rendering) {
		expectComposed(t, r, []string{"helmRelease", "podIdentity"})
		rel := r.mr(t, "helmRelease")
		expectSlice(t, "Release gate", gate(t, rel), openCreate)
		expectSlice(t, "Release trace", traceKinds(t, rel), []string{"XAWSLBController", "Release"})
		// No role ARN yet: the controller is installed, not started.
		expect(t, "replicaCount", str(t, rel, replicaCount), "0")
		if _, err := fieldpath.Pave(rel.Object).GetValue(roleArnValue); err == nil {
			t.Errorf("the Release has a role ARN before the XPodIdentity reported one")
		}
		// A composed XR has no managementPolicies: never gated.
		ungated(t, r.mr(t, "podIdentity"))
		noWarnings(t, r)
		allowedTrue(t, r)
	},
	"lb-controller/2-role-ready": func(t *testing.T, r rendering) {
		// The raise and the wired role ARN reach the Release, its gate
		// open for them, although no rule names either: the XR is being
		// created and nobody changed it.
		rel := r.mr(t, "helmRelease")
		expect(t, "replicaCount", str(t, rel, replicaCount), "2")
		expect(t, "role ARN", str(t, rel, roleArnValue), roleArn)
		expect(t, "clusterName", str(t, rel, "spec.forProvider.values.clusterName"), "prod-cb47d697bcf8")
		expectSlice(t, "Release gate", gate(t, rel), openUpdate)
		as, err := allowance.Parse(rel.GetAnnotations()[v1alpha1.AnnotationAllowances])
		if err != nil || len(as) != 1 || as[0].Relation != v1alpha1.RelationExternal || !as[0].HasVerb(v1alpha1.VerbUpdate) || as[0].Initiator != "alice@example.com" {
			t.Errorf("Release allowances = %+v (%v), want one External Update allowance of Alice's creation", as, err)
		}
		noWarnings(t, r)
		allowedTrue(t, r)
		if c := fixture.Condition(r.xr, v1alpha1.ConditionCreated); c != nil {
			t.Errorf("the XR is %s %v while it is not Ready: its creation must go on", v1alpha1.ConditionCreated, c)
		}
	},
	"lb-controller/3-role-gone-after-creation": func(t *testing.T, r rendering) {
		// After the creation the same fields changing without a cause
		// (the role ARN gone, so replicaCount back to 0) are withheld:
		// the controller keeps running as its role's ARN says.
		rel := r.mr(t, "helmRelease")
		expect(t, "replicaCount", str(t, rel, replicaCount), "2")
		expect(t, "role ARN", str(t, rel, roleArnValue), roleArn)
		expectSlice(t, "Release gate", gate(t, rel), closed)
		why := "no unconsumed allowance on XAWSLBController/prod grants Update of releases"
		expectWarnings(t, r,
			[]string{"withheld Delete spec.forProvider.values.serviceAccount.annotations", why},
			[]string{"withheld Mutate " + replicaCount, why})
		c := condition(t, r.xr, "KausalityAllowed")
		expect(t, "KausalityAllowed status", c["status"], any("False"))
		if m, _ := c["message"].(string); !strings.Contains(m, replicaCount) {
			t.Errorf("KausalityAllowed message %q does not name %s", m, replicaCount)
		}
		// Ready turned False again; the creation does not come back.
		expect(t, "KausalityCreated status", condition(t, r.xr, v1alpha1.ConditionCreated)["status"], any("True"))
	},
}
