// Package parents finds the objects above a managed resource, the
// controlling composite, its Claim and their Namespace, and whether any of
// them is frozen.
// The gate controller and admission both ask, so they agree.
package parents

import (
	"context"
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
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
	if xr != nil {
		if by, _ := allowance.FrozenBy(xr.GetAnnotations()); by != "" {
			return fmt.Sprintf("%s on %s %s", by, xr.GetKind(), xr.GetName()), nil
		}
		claim, err := Claim(ctx, r, xr)
		if err != nil {
			return "", err
		}
		if claim != nil {
			if by, _ := allowance.FrozenBy(claim.GetAnnotations()); by != "" {
				return fmt.Sprintf("%s on %s %s/%s", by, claim.GetKind(), claim.GetNamespace(), claim.GetName()), nil
			}
		}
		if mr.GetNamespace() == "" {
			scope = xr
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

// Deleting reports whether the deletion above a managed resource is final:
// its controlling composite is gone or being deleted, or the composite's
// Claim is. A Delete gate opened for a deletion that another admission
// check refused finds none of them.
func Deleting(ctx context.Context, r client.Reader, mr *unstructured.Unstructured) (bool, error) {
	xr, err := Composite(ctx, r, mr)
	if err != nil {
		return false, err
	}
	if xr == nil || xr.GetDeletionTimestamp() != nil {
		return true, nil
	}
	if _, ok, _ := unstructured.NestedMap(xr.Object, "spec", "claimRef"); !ok {
		return false, nil
	}
	claim, err := Claim(ctx, r, xr)
	if err != nil {
		return false, err
	}
	return claim == nil || claim.GetDeletionTimestamp() != nil, nil
}
