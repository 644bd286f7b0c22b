package admit

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Describe names an object in messages: Kind namespace/name.
func Describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

// KeepStored sets obj's annotations keys to their values on old, and
// removes those old lacks (all of them when old is nil, a creation): what a
// write may not change stays as stored.
func KeepStored(obj, old *unstructured.Unstructured, keys ...string) {
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

// SetLabel sets one label on obj.
func SetLabel(obj *unstructured.Unstructured, k, v string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	obj.SetLabels(l)
}

// SetAnnotation sets one annotation on obj.
func SetAnnotation(obj *unstructured.Unstructured, k, v string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[k] = v
	obj.SetAnnotations(ann)
}

// HasAnnotation reports whether o carries the annotation key.
func HasAnnotation(o *unstructured.Unstructured, key string) bool {
	_, ok := o.GetAnnotations()[key]
	return ok
}
