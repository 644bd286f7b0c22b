package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Deletion is the validating webhook that protects Claims and composites
// from accidental deletion. The ValidatingAdmissionPolicy the provider
// creates does the same inside the API server; this is the fallback for
// API servers without it.
type Deletion struct {
	Policies client.Reader
	Cache    *policy.Cache
}

// Handle implements admission.Handler.
func (h *Deletion) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	old, _, err := objects(req)
	if err != nil || old == nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("DELETE of %s %s carries no object: %v", req.Kind.Kind, req.Name, err))
	}
	set, _, err := policiesFor(ctx, h.Policies, h.Cache, old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !set.DeletionProtection() || old.GetAnnotations()[v1alpha1.AnnotationAllowDelete] == "true" {
		return admission.Allowed("")
	}
	return admission.Denied(DeletionMessage(describe(old), set.Names()))
}

// DeletionMessage is what a denied deletion says, by the webhook and by the
// ValidatingAdmissionPolicy alike: what is protected, by which policy, and
// the annotation that lets it go.
func DeletionMessage(object string, policies []string) string {
	return fmt.Sprintf("%s is protected from deletion by AllowancePolicy %s; set the annotation %s: \"true\" on it to delete it",
		object, strings.Join(policies, ", "), v1alpha1.AnnotationAllowDelete)
}

// Policies is the validating webhook for AllowancePolicies and
// UpgradeAllowances: every CEL expression compiles and every path parses,
// or the write is denied naming the field and expression.
type Policies struct{}

// Handle implements admission.Handler.
func (h *Policies) Handle(_ context.Context, req admission.Request) admission.Response {
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
			err = policy.ValidateUpgrade(u)
		}
	default:
		return admission.Allowed("")
	}
	if err != nil {
		return admission.Denied(fmt.Sprintf("%s %s: %v", req.Kind.Kind, req.Name, err))
	}
	return admission.Allowed("")
}
