package admission

import (
	"context"
	"net/http"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
)

// Status is the validating webhook for the status subresource of gated
// managed resources and of the Claims and composites AllowancePolicies
// name: only Crossplane, the providers and Kausality write what Kausality
// reads there (admit.Writers.Status).
type Status struct {
	Trusted admit.Writers
}

// Handle implements admission.Handler.
func (h *Status) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.SubResource != "status" {
		return admission.Allowed("")
	}
	_, obj, err := objects(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, errors.Wrapf(err, errFmtDecodeStatusWrite, req.Kind.Kind, req.Name))
	}
	if obj == nil {
		return admission.Errored(http.StatusBadRequest, errors.Errorf(errFmtStatusWriteCarriesNoObject, req.Kind.Kind, req.Name))
	}
	if v := h.Trusted.Status(identity(req.UserInfo), obj); !v.Allowed() {
		return refuse(ctx, v)
	}
	return admission.Allowed("")
}
