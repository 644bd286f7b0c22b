package derivecontroller

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/derivation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Definitions tells a derivation what it cannot read from the Composition:
// the plurals of the composed kinds and the XR's schema.
type Definitions interface {
	derivation.Resolver
	// Schema is the XR's schema from its XRD; nil when there is no XRD,
	// and the derivation then counts every XR field as optional.
	Schema(ctx context.Context, xr schema.GroupVersionKind) (*derivation.Schema, error)
}

// xrdGVK is the kind of CompositeResourceDefinitions, read unstructured:
// derive.NewDefinitions reads v1 and v2 XRDs alike.
var xrdGVK = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}

// Cluster resolves through the API server: the plural its RESTMapper
// serves, whether the kind's CRD is in a composite or claim category, and
// the XRD named <plural>.<group>, as Crossplane requires XRDs to be named.
// It reads uncached: the manager caches CRDs' metadata only, and XRDs not
// at all.
type Cluster struct {
	Reader client.Reader
	Mapper meta.RESTMapper
}

// Resolve implements derive.Resolver. A kind the API server does not serve
// is unknown (ok false), and the derivation notes its guessed plural.
func (c Cluster) Resolve(gvk schema.GroupVersionKind) (derivation.Kind, bool, error) {
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return derivation.Kind{}, false, nil
	}
	if err != nil {
		return derivation.Kind{}, false, errors.Wrapf(err, errFmtMap, gvk)
	}
	k := derivation.Kind{Resource: m.Resource.Resource}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	// derive.Resolver carries no context; a CRD read is one short request.
	err = c.Reader.Get(context.Background(), client.ObjectKey{Name: k.Resource + "." + gvk.Group}, crd)
	switch {
	case err == nil:
		k.Class = policy.ClassOf(gvk.Group, crd.Spec.Names.Categories, true)
	case kerrors.IsNotFound(err):
		// A kind the API server serves without a CRD (a built-in or
		// aggregated one) is no managed resource.
		k.Class = policy.ClassOf(gvk.Group, nil, true)
	default:
		return derivation.Kind{}, false, errors.Wrapf(err, errFmtGetCustomResourceDefinition, k.Resource, gvk.Group)
	}
	return k, true, nil
}

// Schema implements Definitions.
func (c Cluster) Schema(ctx context.Context, xr schema.GroupVersionKind) (*derivation.Schema, error) {
	k, ok, err := c.Resolve(xr)
	if err != nil || !ok {
		return nil, err
	}
	xrd := &unstructured.Unstructured{}
	xrd.SetGroupVersionKind(xrdGVK)
	name := k.Resource + "." + xr.Group
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: name}, xrd); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, errors.Wrapf(err, errFmtGetCompositeResourceDefinition, name)
	}
	d, err := derivation.NewDefinitions([]*unstructured.Unstructured{xrd})
	if err != nil {
		return nil, err
	}
	return d.Schema(xr), nil
}
