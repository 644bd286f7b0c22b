package admission

import (
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
)

// write decodes a create or update and applies annotation protection.
// done is the response when there is nothing more to decide: other
// operations pass, undecodable objects and protected changes fail. With
// restore (managed resources), a provider's stale write-back of protected
// annotations is undone in obj instead of denied (see restoreStale); the
// caller must then answer with a patch.
func write(t admit.Writers, req admission.Request, restore bool) (old, obj *unstructured.Unstructured, done *admission.Response) {
	respond := func(r admission.Response) (*unstructured.Unstructured, *unstructured.Unstructured, *admission.Response) {
		return nil, nil, &r
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return respond(admission.Allowed(""))
	}
	old, obj, err := objects(req)
	if err != nil {
		return respond(admission.Errored(http.StatusBadRequest, err))
	}
	if old != nil && obj.GetResourceVersion() != "" && obj.GetResourceVersion() != old.GetResourceVersion() {
		// A write from a stale copy. The API server calls mutating
		// webhooks before it compares resource versions, and refuses this
		// one with a Conflict right after, whatever is decided here:
		// denying it (its protected annotations differ from the newer
		// stored ones) would turn the writer's retry into a failure.
		return respond(admission.Allowed(""))
	}
	if msg := t.Protect(req.UserInfo.Username, old, obj); msg != "" && !(restore && admit.RestoreStale(old, obj)) {
		return respond(admission.Denied(msg))
	}
	return old, obj, nil
}
