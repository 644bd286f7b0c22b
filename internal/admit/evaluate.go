package admit

import (
	"fmt"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Evaluate decides a write of obj under the policies of its kind: denied
// when Enforce mode refuses it, naming fields and policies (and note, why
// no parent allowance covered it); allowed with a warning naming the same
// when Log mode lets it in. The decision says which policy and rule
// decided and what the write earns.
func Evaluate(set policy.Set, r policy.Request, obj *unstructured.Unstructured, note string) (policy.Decision, Verdict) {
	d, err := set.Evaluate(r)
	if err != nil {
		err = errors.Wrapf(err, "cannot evaluate AllowancePolicies %s", strings.Join(set.Names(), ", "))
		if specUnchanged(r) {
			// As for a policy that does not compile (RefuseBroken): what
			// the policy permits is unknown, so the write earns nothing,
			// but one that leaves the spec alone (setting
			// kausality.io/allow-delete, a finalizer, Crossplane's own
			// references) passes, so a policy that fails on every object
			// of its kind locks none of them.
			return policy.Decision{}, Allow(fmt.Sprintf("%s: %v; the write leaves the spec alone, so it passes and earns nothing", Describe(obj), err))
		}
		return d, Deny(metrics.ReasonPolicyError, "%s: %s; only writes that leave the spec alone pass until the policy is fixed", Describe(obj), err.Error())
	}
	audit := map[string]string{AuditMode: string(d.Mode)}
	if len(d.Violations) == 0 {
		return d, Verdict{Warnings: d.Warnings, Audit: audit}
	}
	msgs := make([]string, 0, len(d.Violations))
	for _, v := range d.Violations {
		msgs = append(msgs, v.Error())
	}
	msg := fmt.Sprintf("%s: %s", Describe(obj), strings.Join(msgs, "; "))
	if note != "" {
		msg += " (" + note + ")"
	}
	audit[AuditViolations] = msg
	if d.Mode == v1alpha1.ModeEnforce {
		return d, Verdict{Reason: metrics.ReasonPolicyViolation, Message: msg, Warnings: d.Warnings, Audit: audit}
	}
	return d, Verdict{Warnings: append(d.Warnings, "Log mode, would be denied: "+msg), Audit: audit}
}

// specUnchanged reports whether r's write leaves the spec as stored. The
// spec fields Crossplane manages count as unchanged when Crossplane writes
// them to a composite (the composites webhook watches neither selection
// nor every field only for Crossplane's own writes).
func specUnchanged(r policy.Request) bool {
	if r.OldObject == nil {
		return false
	}
	var skip func(string) bool
	if !r.WatchSelection && !r.WatchAll {
		skip = CrossplaneField
	}
	return len(mutation.Diff("spec", r.OldObject["spec"], r.Object["spec"], mutation.WithSkip(skip))) == 0
}
