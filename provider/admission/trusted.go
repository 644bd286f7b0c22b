package admission

import (
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
)

// write decodes a create or update and applies annotation protection.
// done is the response when there is nothing more to decide: other
// operations pass, undecodable objects and protected changes fail. With
// restore (managed resources), a provider's stale write-back of protected
// annotations is undone in obj instead of denied (see restoreStale); the
// caller must then answer with a patch. sent is obj as the request sent
// it, for patched: a copy, since handlers edit obj in place.
func write(t admit.Writers, req admission.Request, restore bool) (old, obj *unstructured.Unstructured, sent map[string]any, done *admission.Response) {
	respond := func(r admission.Response) (*unstructured.Unstructured, *unstructured.Unstructured, map[string]any, *admission.Response) {
		return nil, nil, nil, &r
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
		// webhooks before it compares resource versions. Denying it as a
		// protected change (its annotations differ from the newer stored
		// ones) would turn the writer's retry into a failure; letting it
		// through unchecked would trust the API server's comparison to
		// come. It gets the Conflict it would get anyway, and nothing
		// passes unchecked.
		return respond(admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Result: &metav1.Status{
			Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
			Message: fmt.Sprintf("%s has been modified since resource version %s; read it again and retry", admit.Describe(obj), obj.GetResourceVersion()),
		}}})
	}
	sent = runtime.DeepCopyJSON(obj.Object)
	if v := t.Protect(req.UserInfo.Username, old, obj); !v.Allowed() && !(restore && admit.RestoreStale(old, obj)) {
		return respond(admission.Denied(v.Message))
	}
	return old, obj, sent, nil
}
