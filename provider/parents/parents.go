// Package parents finds the objects above a managed resource, the
// controlling composite, its Claim and their Namespace, and whether any of
// them is frozen.
// The gate controller and admission both ask, so they agree.
package parents

import (
	"context"
	"fmt"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Composite returns the managed resource's controlling composite, nil when
// it has none or the composite is gone.
func Composite(ctx context.Context, r client.Reader, mr *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	owner := metav1.GetControllerOf(mr)
	if owner == nil {
		return nil, nil
	}
	return get(ctx, r, owner.APIVersion, owner.Kind, mr.GetNamespace(), owner.Name)
}

// Claim returns the Claim of a legacy composite (spec.claimRef), nil when
// it has none or the Claim is gone.
func Claim(ctx context.Context, r client.Reader, xr *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ref, ok, _ := unstructured.NestedStringMap(xr.Object, "spec", "claimRef")
	if !ok || ref["name"] == "" || ref["kind"] == "" {
		return nil, nil
	}
	return get(ctx, r, ref["apiVersion"], ref["kind"], ref["namespace"], ref["name"])
}

// maxDepth bounds how far Frozen walks up a tree of nested composites; a
// platform is a few layers deep, and a cycle of forged references must not
// loop.
const maxDepth = 8

// Parent returns what a composite's changes chain to: its Claim (a legacy
// composite's spec.claimRef), or else the composite that composed it
// (nested XRs): its controlling composite, provided that one references it
// among its composed resources. Only Crossplane writes those references
// (admit.Writers.References), while anyone may set an owner reference on
// their own composite. Nil when there is neither.
func Parent(ctx context.Context, r client.Reader, xr *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if _, ok, _ := unstructured.NestedMap(xr.Object, "spec", "claimRef"); ok {
		return Claim(ctx, r, xr)
	}
	owner := metav1.GetControllerOf(xr)
	if owner == nil {
		return nil, nil
	}
	parent, err := get(ctx, r, owner.APIVersion, owner.Kind, xr.GetNamespace(), owner.Name)
	if err != nil || parent == nil {
		return nil, err
	}
	if parent.GetUID() != owner.UID || !slices.ContainsFunc(admit.Composed(parent), func(c *unstructured.Unstructured) bool {
		return c.GroupVersionKind().GroupKind() == xr.GroupVersionKind().GroupKind() && c.GetName() == xr.GetName() && c.GetNamespace() == xr.GetNamespace()
	}) {
		return nil, nil
	}
	return parent, nil
}

// Namespace returns the Namespace whose kausality.io/mode and
// kausality.io/freeze apply to obj (see policy.ModeNamespace), nil when
// there is none or it is gone.
func Namespace(ctx context.Context, r client.Reader, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := policy.ModeNamespace(obj.Object)
	if name == "" {
		return nil, nil
	}
	return get(ctx, r, "v1", "Namespace", "", name)
}

func get(ctx context.Context, r client.Reader, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		where := name
		if namespace != "" {
			where = namespace + "/" + name
		}
		return nil, errors.Wrapf(err, "cannot get %s %s", kind, where)
	}
	return u, nil
}

// Frozen names who froze the managed resource, its composite, the
// composite's Claim or the Namespace of any of them, and where; "" when
// nobody did. A parent that cannot be
// read is an error: the caller decides whether that fails closed.
func Frozen(ctx context.Context, r client.Reader, mr *unstructured.Unstructured) (string, error) {
	// An unreadable freeze still freezes (FrozenBy names it so); what is
	// wrong with it is the business of whoever set it.
	if by, _ := allowance.FrozenBy(mr.GetAnnotations()); by != "" {
		return by, nil
	}
	xr, err := Composite(ctx, r, mr)
	if err != nil {
		return "", err
	}
	scope := mr
	if xr != nil && mr.GetNamespace() == "" {
		scope = xr
	}
	// Up the tree: the composite, the composites that composed it (nested
	// XRs), and a legacy composite's Claim.
	for p, depth := xr, 0; p != nil && depth < maxDepth; depth++ {
		if by, _ := allowance.FrozenBy(p.GetAnnotations()); by != "" {
			if p.GetNamespace() != "" && p.GetNamespace() != mr.GetNamespace() || policy.IsClaim(p.Object) {
				return fmt.Sprintf("%s on %s %s/%s", by, p.GetKind(), p.GetNamespace(), p.GetName()), nil
			}
			return fmt.Sprintf("%s on %s %s", by, p.GetKind(), p.GetName()), nil
		}
		if policy.IsClaim(p.Object) {
			break
		}
		if p, err = Parent(ctx, r, p); err != nil {
			return "", err
		}
	}
	ns, err := Namespace(ctx, r, scope)
	if err != nil || ns == nil {
		return "", err
	}
	if by, _ := allowance.FrozenBy(ns.GetAnnotations()); by != "" {
		return fmt.Sprintf("%s on Namespace %s", by, ns.GetName()), nil
	}
	return "", nil
}

// FrozenFor is Frozen for a gate deciding over the allowances as: it reads
// nothing and names nobody when no freeze can change that decision
// (gate.FreezeMatters), as once every allowance is used up. The gate
// controller and the managed webhook both ask it, so neither reads the
// parents of a closed gate.
func FrozenFor(ctx context.Context, r client.Reader, mr *unstructured.Unstructured, as []allowance.Allowance) (string, error) {
	if !gate.FreezeMatters(as) {
		return "", nil
	}
	return Frozen(ctx, r, mr)
}

// Deleting reports whether the deletion above a managed resource is final:
// its controlling composite is gone or being deleted, or the composite's
// Claim is, or (nested XRs) a composite above it that controls the
// composite is, so that the garbage collector deletes what is below. A
// Delete gate opened for a deletion that another admission check refused
// finds none of them.
func Deleting(ctx context.Context, r client.Reader, mr *unstructured.Unstructured) (bool, error) {
	xr, err := Composite(ctx, r, mr)
	if err != nil {
		return false, err
	}
	for depth := 0; depth < maxDepth; depth++ {
		if xr == nil || xr.GetDeletionTimestamp() != nil {
			return true, nil
		}
		if _, ok, _ := unstructured.NestedMap(xr.Object, "spec", "claimRef"); ok {
			claim, err := Claim(ctx, r, xr)
			if err != nil {
				return false, err
			}
			return claim == nil || claim.GetDeletionTimestamp() != nil, nil
		}
		owner := metav1.GetControllerOf(xr)
		if owner == nil {
			return false, nil
		}
		// Only Crossplane sets a composite's controller reference
		// (admit.Writers.References).
		parent, err := get(ctx, r, owner.APIVersion, owner.Kind, xr.GetNamespace(), owner.Name)
		if err != nil {
			return false, err
		}
		if parent != nil && parent.GetUID() != owner.UID {
			parent = nil // the controller is gone; another took its name
		}
		xr = parent
	}
	return false, nil
}
