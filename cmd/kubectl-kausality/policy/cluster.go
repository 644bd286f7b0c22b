package policy

import (
	"context"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/derive"
)

// Cluster resolves kinds through the API server: the plural its
// RESTMapper serves, and whether the kind's CRD is in a composite or claim
// category.
type Cluster struct {
	Reader client.Reader
	Mapper meta.RESTMapper
}

// crdGVK is the kind of CustomResourceDefinitions, read unstructured so no
// scheme is needed.
var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Resolve implements derive.Resolver.
func (c Cluster) Resolve(gvk schema.GroupVersionKind) (derive.Kind, bool, error) {
	ctx := context.Background()
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return derive.Kind{}, false, nil
	}
	if err != nil {
		return derive.Kind{}, false, errors.Wrapf(err, "cannot map %s", gvk)
	}
	k := derive.Kind{Resource: m.Resource.Resource}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: m.Resource.Resource + "." + gvk.Group}, crd); err == nil {
		cats, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories")
		k.Composite = slices.Contains(cats, "composite") || slices.Contains(cats, "claim")
	}
	// A built-in kind has no CRD: it is no composite.
	return k, true, nil
}

// Schema reads the XRD of an XR kind from the cluster, nil when there is
// none: the derivation then counts every field as optional.
func (c Cluster) Schema(gvk schema.GroupVersionKind) *derive.Schema {
	k, ok, err := c.Resolve(gvk)
	if err != nil || !ok {
		return nil
	}
	xrd := &unstructured.Unstructured{}
	xrd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"})
	if err := c.Reader.Get(context.Background(), client.ObjectKey{Name: k.Resource + "." + gvk.Group}, xrd); err != nil {
		return nil
	}
	d, err := derive.NewDefinitions([]*unstructured.Unstructured{xrd})
	if err != nil {
		return nil
	}
	return d.Schema(gvk)
}

// chain asks each resolver in turn until one knows the kind.
type chain []derive.Resolver

// Resolve implements derive.Resolver.
func (c chain) Resolve(gvk schema.GroupVersionKind) (derive.Kind, bool, error) {
	for _, r := range c {
		k, ok, err := r.Resolve(gvk)
		if err != nil || ok {
			return k, ok, err
		}
	}
	return derive.Kind{}, false, nil
}
