package derive

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/derivation"
	"github.com/kausality-io/kausality-crossplane/provider/derivecontroller"
)

// Cluster resolves kinds and XRDs through the API server as the
// provider's derivation controller does (one owner: derivation.Cluster).
type Cluster struct {
	derivecontroller.Cluster
}

// NewCluster resolves through r and m.
func NewCluster(r client.Reader, m meta.RESTMapper) *Cluster {
	return &Cluster{Cluster: derivecontroller.Cluster{Reader: r, Mapper: m}}
}

// Schema reads the XRD of an XR kind from the cluster, nil when there is
// none or it cannot be read: the derivation then counts every field as
// optional and its notes say so.
func (c Cluster) Schema(gvk schema.GroupVersionKind) *derivation.Schema {
	s, err := c.Cluster.Schema(context.Background(), gvk)
	if err != nil {
		return nil
	}
	return s
}

// chain asks each resolver in turn until one knows the kind.
type chain []derivation.Resolver

// Resolve implements derive.Resolver.
func (c chain) Resolve(gvk schema.GroupVersionKind) (derivation.Kind, bool, error) {
	for _, r := range c {
		k, ok, err := r.Resolve(gvk)
		if err != nil || ok {
			return k, ok, err
		}
	}
	return derivation.Kind{}, false, nil
}

// Schema implements derivation.SchemaResolver: the XR kind's schema from
// the first resolver that has one, so check suggests the verbs derive
// writes.
func (c chain) Schema(gvk schema.GroupVersionKind) *derivation.Schema {
	for _, r := range c {
		if sr, ok := r.(derivation.SchemaResolver); ok {
			if s := sr.Schema(gvk); s != nil {
				return s
			}
		}
	}
	return nil
}
