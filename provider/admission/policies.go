package admission

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Policies is the validating webhook for AllowancePolicies and
// UpgradeAllowances: every CEL expression compiles and every path parses,
// or the write is denied naming the field and expression.
type Policies struct{}

// Handle implements admission.Handler.
func (h *Policies) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var err error
	switch req.Kind.Kind {
	case v1alpha1.AllowancePolicyKind:
		p := &v1alpha1.AllowancePolicy{}
		if err = json.Unmarshal(req.Object.Raw, p); err == nil {
			_, err = policy.Compile(p)
		}
	case v1alpha1.UpgradeAllowanceKind:
		u := &v1alpha1.UpgradeAllowance{}
		if err = json.Unmarshal(req.Object.Raw, u); err == nil {
			err = policy.CompileUpgrade(u)
		}
	default:
		return admission.Allowed("")
	}
	if err != nil {
		return deny(ctx, metrics.ReasonInvalidPolicy, fmt.Sprintf("%s %s: %v", req.Kind.Kind, req.Name, err))
	}
	return admission.Allowed("")
}
