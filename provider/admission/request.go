package admission

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// identity is the authenticated requester as policies see it.
func identity(user authenticationv1.UserInfo) policy.Identity {
	return policy.Identity{Username: user.Username, Groups: slices.Clone(user.Groups)}
}

// describe names an object in messages: Kind namespace/name.
func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
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
		return admission.Errored(500, fmt.Errorf("cannot encode %s: %w", describe(obj), err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// keepStored sets obj's annotations keys to their values on old, and
// removes those old lacks (all of them when old is nil, a creation): what a
// write may not change stays as stored.
func keepStored(obj, old *unstructured.Unstructured, keys ...string) {
	var stored map[string]string
	if old != nil {
		stored = old.GetAnnotations()
	}
	ann := maps.Clone(obj.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	for _, k := range keys {
		if v, ok := stored[k]; ok {
			ann[k] = v
		} else {
			delete(ann, k)
		}
	}
	obj.SetAnnotations(ann)
}

// setLabel sets one label on obj.
func setLabel(obj *unstructured.Unstructured, k, v string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	obj.SetLabels(l)
}

// setAnnotation sets one annotation on obj.
func setAnnotation(obj *unstructured.Unstructured, k, v string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[k] = v
	obj.SetAnnotations(ann)
}
