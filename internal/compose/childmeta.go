package compose

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// What the function reads of a composed resource before deciding it: its
// name, kind, generation, annotations and labels, and its kind as the
// policies resolved it.

// childMeta reads what the function needs of a composed resource.
type childMeta struct {
	resName    string // the composition resource name
	obj        *unstructured.Unstructured
	child      policy.Child
	name       string // metadata.name, or the pipeline name for new resources
	generation int64
	ann        map[string]string
	// from is, for an observed resource, the XR generation it was last
	// composed from: XR allowances of that generation or earlier are used
	// up for it. 0 for a resource not yet composed. It is the later of
	// own and what the records of the resources left as stored say of it
	// (loadComposed).
	from int64
	// own is the resource's own record of it
	// (kausality.io/composed-generation), 0 when it has none.
	own int64
}

func (r *run) metaOf(resName string, obj map[string]any) childMeta {
	return r.metaWithRoom(resName, obj, 0)
}

// observedMetaOf is metaOf for an observed resource, with the XR
// generation it was composed from: its own record and what the records of
// the resources left as stored say of it.
func (r *run) observedMetaOf(resName string, observed map[string]any) childMeta {
	m := r.metaOf(resName, observed)
	m.own = allowance.ComposedGeneration(observed)
	m.from = max(m.own, r.composed.For(resName), r.stored[resName])
	return m
}

// desiredMetaOf is metaOf for a desired resource, whose annotations finish
// stamps: they are copied with room for what it adds.
func (r *run) desiredMetaOf(resName string, obj map[string]any) childMeta {
	return r.metaWithRoom(resName, obj, stampedAnnotations)
}

// stampedAnnotations is about how many annotations finish adds to a
// gated resource's: its stamp's map is made at that size once rather than
// grown while it is written.
const stampedAnnotations = 10

// metaWithRoom is metaOf with room for extra more annotations in ann.
//
// It reads the fields as unstructured's getters do (a field of another
// type reads as its zero value) but from the maps directly: the getters
// build a slice of field names for every call, and an XR composes
// hundreds of resources.
func (r *run) metaWithRoom(resName string, obj map[string]any, extra int) childMeta {
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if name == "" {
		name = resName
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	generation, _ := md["generation"].(int64) // composedIntegers made it one
	return childMeta{resName: resName, obj: &unstructured.Unstructured{Object: obj}, child: r.childOf(apiVersion, kind), name: name,
		generation: generation, ann: annotationsWithRoom(obj, extra)}
}

// annotationsWithRoom is unstructured's GetAnnotations of obj, in a map
// with room for extra more: nil when obj has none or they do not read as
// strings, a null value read as "".
func annotationsWithRoom(obj map[string]any, extra int) map[string]string {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		// Absent, null or not an object: GetAnnotations finds none.
		return nil
	}
	m, ok := md["annotations"].(map[string]any)
	if !ok || m == nil {
		return nil
	}
	out := make(map[string]string, len(m)+extra)
	for k, v := range m {
		switch s := v.(type) {
		case string:
			out[k] = s
		case nil:
			out[k] = ""
		default:
			return nil
		}
	}
	return out
}

// childOf is the kind's Child as the policies' status resolved it
// (policy.Kinds), worked out once a run for each kind: an XR composes many
// resources of few kinds.
func (r *run) childOf(apiVersion, kind string) policy.Child {
	key := [2]string{apiVersion, kind}
	if c, ok := r.children[key]; ok {
		return c
	}
	if r.children == nil {
		r.children = map[[2]string]policy.Child{}
	}
	c := r.kinds.ChildOf(apiVersion, kind)
	r.children[key] = c
	return c
}
