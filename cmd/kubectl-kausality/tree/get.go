package tree

import (
	"context"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadNamed reads the tree of the object named by resource (TYPE/NAME, or
// TYPE with name) in namespace.
func ReadNamed(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, name string) (*Node, error) {
	obj, err := Get(ctx, r, m, namespace, resource, name)
	if err != nil {
		return nil, err
	}
	return Read(ctx, r, obj)
}

// Get reads the object named by resource (TYPE/NAME, or TYPE with name) in
// namespace (ignored for cluster-scoped kinds), resolving TYPE as kubectl
// does.
func Get(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, name string) (*unstructured.Unstructured, error) {
	typ, n, ok := strings.Cut(resource, "/")
	if ok && name != "" {
		return nil, errors.Errorf("give TYPE/NAME or TYPE NAME, not both (%q and %q)", resource, name)
	}
	if !ok {
		n = name
	}
	if n == "" {
		return nil, errors.Errorf("%q names no object: give TYPE/NAME or TYPE NAME", resource)
	}
	gvk, err := kindFor(m, typ)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot find the kind of %q", typ)
	}
	mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot find how %s is served", gvk.Kind)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	key := client.ObjectKey{Name: n}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		key.Namespace = namespace
	}
	if err := r.Get(ctx, key, obj); err != nil {
		return nil, errors.Wrapf(err, "cannot get %s %s", gvk.Kind, key)
	}
	return obj, nil
}

// kindFor resolves a TYPE as kubectl does: resource.version.group first,
// then resource.group (xnetworks.aws.platform.example.org is the latter).
func kindFor(m meta.RESTMapper, typ string) (schema.GroupVersionKind, error) {
	gvr, gr := schema.ParseResourceArg(typ)
	if gvr != nil {
		if gvk, err := m.KindFor(*gvr); err == nil {
			return gvk, nil
		}
	}
	return m.KindFor(gr.WithVersion(""))
}
