package admission

import (
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// identity is the authenticated requester as policies see it.
func identity(user authenticationv1.UserInfo) policy.Identity {
	return policy.Identity{Username: user.Username, Groups: slices.Clone(user.Groups)}
}

// requestChild is the kind of the request's object as the API server
// serves it: the request names its real resource, so admission never
// guesses a plural (docs/DESIGN.md §3a).
func requestChild(req admission.Request) policy.Child {
	return policy.ChildFor(schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}, req.Resource.Resource)
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

// patched is the response that turns the request's object, as sent, into
// obj: a JSON patch of the leaves that differ, worked out on decoded
// objects. Encoding obj and letting jsonpatch decode both documents again
// cost as much as the rest of a webhook call; sent is a copy taken before
// any handler edited obj (see write), not a third decoding.
func patched(sent map[string]any, obj *unstructured.Unstructured) admission.Response {
	ops := diffPatch(sent, obj.Object)
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("", ops...)
}

// diffPatch is the JSON patch that turns was into is, sorted by path so
// the patch is stable. Its operations touch disjoint paths (none is below
// another's), so their order does not change what the patch does; sorting
// once is cheaper than sorting the keys of every map on the way.
func diffPatch(was, is map[string]any) []jsonpatch.JsonPatchOperation {
	ops := diffOps(nil, "", was, is)
	if len(ops) > 1 {
		slices.SortFunc(ops, func(a, b jsonpatch.JsonPatchOperation) int { return strings.Compare(a.Path, b.Path) })
	}
	return ops
}

// diffOps appends to ops the JSON patch operations that turn the map was
// into the map is below the JSON pointer at: nested maps are compared key
// by key; anything else that differs is replaced whole.
func diffOps(ops []jsonpatch.JsonPatchOperation, at string, was, is map[string]any) []jsonpatch.JsonPatchOperation {
	for k := range was {
		if _, ok := is[k]; !ok {
			ops = append(ops, jsonpatch.NewOperation("remove", at+"/"+pointerEscape.Replace(k), nil))
		}
	}
	for k, iv := range is {
		w, ok := was[k]
		if !ok {
			ops = append(ops, jsonpatch.NewOperation("add", at+"/"+pointerEscape.Replace(k), iv))
			continue
		}
		wm, wmap := w.(map[string]any)
		im, imap := iv.(map[string]any)
		if !wmap || !imap {
			// A leaf: the pointer is only built for one that differs.
			if !mutation.Equal(w, iv) {
				ops = append(ops, jsonpatch.NewOperation("replace", at+"/"+pointerEscape.Replace(k), iv))
			}
			continue
		}
		ops = diffOps(ops, at+"/"+pointerEscape.Replace(k), wm, im)
	}
	return ops
}

// pointerEscape escapes a key for a JSON pointer (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")
