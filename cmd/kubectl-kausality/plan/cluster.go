package plan

import (
	"context"
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// Kinds the render needs from the cluster.
var (
	functionGVK            = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Function"}
	functionRevisionGVK    = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "FunctionRevision"}
	compositionGVK         = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "Composition"}
	compositionRevisionGVK = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositionRevision"}
	namespaceGVK           = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// cluster are the cluster-wide objects function-kausality asks Crossplane
// for on every run (internal/compose/required.go): AllowancePolicies, UpgradeAllowances,
// Functions and FunctionRevisions.
type cluster struct {
	objects  []*unstructured.Unstructured
	policies []v1alpha1.AllowancePolicy
	notes    []string
}

// readCluster lists them. A kind the cluster does not serve is left out
// with a note. One the user may not list fails the plan: rendered without
// the policies, the function would restrict nothing, and without the
// Functions every package would look new, so the plan would be wrong.
func readCluster(ctx context.Context, o Options) (cluster, error) {
	var c cluster
	for _, gvk := range []schema.GroupVersionKind{v1alpha1.AllowancePolicyGroupVersionKind, v1alpha1.UpgradeAllowanceGroupVersionKind, functionGVK, functionRevisionGVK} {
		us, err := list(ctx, o.Client, gvk, "")
		switch {
		case meta.IsNoMatchError(err):
			c.notes = append(c.notes, fmt.Sprintf("rendered without %ss: the cluster serves none", gvk.Kind))
			continue
		case kerrors.IsForbidden(err):
			return cluster{}, errors.Wrapf(err, "a plan renders with every %s, which you may not list", gvk.Kind)
		case err != nil:
			return cluster{}, err
		}
		c.objects = append(c.objects, us...)
		if gvk == v1alpha1.AllowancePolicyGroupVersionKind {
			for _, u := range us {
				p := v1alpha1.AllowancePolicy{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
					return cluster{}, errors.Wrapf(err, "cannot decode AllowancePolicy %s", u.GetName())
				}
				c.policies = append(c.policies, p)
			}
		}
	}
	return c, nil
}

func list(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, namespace string) ([]*unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.List(ctx, l, client.InNamespace(namespace)); err != nil {
		return nil, errors.Wrapf(err, "cannot list %ss", gvk.Kind)
	}
	out := make([]*unstructured.Unstructured, 0, len(l.Items))
	for i := range l.Items {
		u := &l.Items[i]
		u.SetGroupVersionKind(gvk)
		u.SetManagedFields(nil)
		out = append(out, u)
	}
	return out, nil
}

// requiredFor are the required resources for rendering xr: the cluster's,
// its CompositionRevision and Namespace. A roll-out's fleet is not among
// them: the XR carries its turn (kausality.io/rollout-turns).
func (c cluster) requiredFor(ctx context.Context, o Options, xr *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := append([]*unstructured.Unstructured{}, c.objects...)
	if rev := rollout.Revision(xr.Object); rev != "" {
		u, err := get(ctx, o.Client, compositionRevisionGVK, "", rev)
		if err != nil {
			return nil, err
		}
		if u != nil {
			out = append(out, u)
		}
	}
	if ns := policy.ModeNamespace(xr.Object); ns != "" {
		u, err := get(ctx, o.Client, namespaceGVK, "", ns)
		if err != nil && !kerrors.IsForbidden(errors.Cause(err)) {
			return nil, err
		}
		if u != nil {
			out = append(out, u)
		}
	}
	return out, nil
}

func get(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, errors.Wrapf(err, "cannot get %s %s", gvk.Kind, name)
	}
	u.SetManagedFields(nil)
	return u, nil
}

func compositionName(xr *unstructured.Unstructured) string {
	if n, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name"); n != "" {
		return n
	}
	n, _, _ := unstructured.NestedString(xr.Object, "spec", "compositionRef", "name")
	return n
}

// compositionOf is the Composition Crossplane composes xr with: its
// CompositionRevision as a Composition (what `crossplane render` takes)
// when it names one, else its Composition.
func compositionOf(ctx context.Context, r client.Reader, xr *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := compositionName(xr)
	if rev := rollout.Revision(xr.Object); rev != "" {
		u, err := get(ctx, r, compositionRevisionGVK, "", rev)
		if err != nil {
			return nil, err
		}
		if u != nil {
			spec, _, _ := unstructured.NestedMap(u.Object, "spec")
			delete(spec, "revision")
			if name == "" {
				name = u.GetLabels()["crossplane.io/composition-name"]
			}
			c := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
			c.SetGroupVersionKind(compositionGVK)
			c.SetName(name)
			return c, nil
		}
	}
	if name == "" {
		return nil, errors.Errorf("%s names no Composition (spec.crossplane.compositionRef or spec.compositionRef)", admit.Describe(xr))
	}
	u, err := get(ctx, r, compositionGVK, "", name)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, errors.Errorf("the Composition %s of %s (spec.compositionRef) does not exist", name, admit.Describe(xr))
	}
	return u, nil
}

// observedOf are the XR's composed resources as they are live: what the
// render observes and the plan compares against.
func observedOf(ctx context.Context, r client.Reader, xr *unstructured.Unstructured) ([]*unstructured.Unstructured, []string, error) {
	var out []*unstructured.Unstructured
	var notes []string
	for _, ref := range admit.Composed(xr) {
		u, err := get(ctx, r, ref.GroupVersionKind(), ref.GetNamespace(), ref.GetName())
		if err != nil {
			return nil, nil, errors.Wrapf(err, "cannot read the composed resources of %s (spec.resourceRefs)", admit.Describe(xr))
		}
		if u == nil {
			notes = append(notes, fmt.Sprintf("%s %s in the resourceRefs of %s does not exist", ref.GetKind(), ref.GetName(), admit.Describe(xr)))
			continue
		}
		out = append(out, u)
	}
	return out, notes, nil
}
