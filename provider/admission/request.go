package admission

import (
	"encoding/json"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// identity is the authenticated requester as policies see it.
func identity(user authenticationv1.UserInfo) policy.Identity {
	return policy.Identity{Username: user.Username, Groups: slices.Clone(user.Groups)}
}

// objects decodes a request's object and old object; old is nil on create.
func objects(req admission.Request) (old, obj *unstructured.Unstructured, err error) {
	decode := func(raw []byte) (*unstructured.Unstructured, error) {
		if len(raw) == 0 {
			return nil, nil
		}
		// Kubernetes' JSON decoding keeps whole numbers int64, so a patch
		// never rewrites a large integer through float64.
		u := &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
			return nil, fmt.Errorf("cannot decode %s %s: %w", req.Kind.Kind, req.Name, err)
		}
		return u, nil
	}
	if obj, err = decode(req.Object.Raw); err != nil {
		return nil, nil, err
	}
	if old, err = decode(req.OldObject.Raw); err != nil {
		return nil, nil, err
	}
	return old, obj, nil
}

// patched is the response that turns the request's object into obj.
func patched(req admission.Request, obj *unstructured.Unstructured) admission.Response {
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return admission.Errored(500, fmt.Errorf("cannot encode %s: %w", admit.Describe(obj), err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}
