package policycontroller

import (
	"context"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// A Resolver tells how the API server serves a resource a policy target
// names. ok is false when it serves no such resource; an error is a failed
// lookup.
type Resolver interface {
	Resolve(ctx context.Context, n policy.Named) (t v1alpha1.ResolvedTarget, ok bool, err error)
}

// APIResolver resolves through the resource's CustomResourceDefinition,
// named <resource>.<group> as every CRD is, and for kinds without one
// (built-in kinds, aggregated APIs) through discovery.
type APIResolver struct {
	// Reader reads CRDs whole, uncached: the manager caches their metadata
	// only.
	Reader client.Reader
	Mapper meta.RESTMapper
}

// Resolve implements Resolver.
func (r APIResolver) Resolve(ctx context.Context, n policy.Named) (v1alpha1.ResolvedTarget, bool, error) {
	out := v1alpha1.ResolvedTarget{APIGroup: n.Group, Resource: n.Resource}
	if n.Group != "" {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := r.Reader.Get(ctx, client.ObjectKey{Name: n.String()}, crd)
		switch {
		case err == nil:
			if crd.Spec.Names.Plural != n.Resource || crd.Spec.Group != n.Group {
				return out, false, nil
			}
			out.Kind = crd.Spec.Names.Kind
			out.Namespaced = crd.Spec.Scope == apiextensionsv1.NamespaceScoped
			out.Categories = slices.Clone(crd.Spec.Names.Categories)
			for _, v := range crd.Spec.Versions {
				if v.Served {
					out.Versions = append(out.Versions, v.Name)
				}
			}
			slices.Sort(out.Versions)
			return out, out.Kind != "" && len(out.Versions) > 0, nil
		case !kerrors.IsNotFound(err):
			return out, false, errors.Wrapf(err, errFmtGetCustomResourceDefinition, n)
		}
	}
	if r.Mapper == nil {
		return out, false, nil
	}
	gvks, err := r.Mapper.KindsFor(schema.GroupVersionResource{Group: n.Group, Resource: n.Resource})
	if meta.IsNoMatchError(err) || len(gvks) == 0 {
		return out, false, nil
	}
	if err != nil {
		return out, false, errors.Wrapf(err, errFmtLookUpResource, n)
	}
	out.Kind = gvks[0].Kind
	for _, gvk := range gvks {
		if !slices.Contains(out.Versions, gvk.Version) {
			out.Versions = append(out.Versions, gvk.Version)
		}
	}
	slices.Sort(out.Versions)
	if m, err := r.Mapper.RESTMapping(gvks[0].GroupKind(), gvks[0].Version); err == nil {
		out.Namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	return out, true, nil
}
