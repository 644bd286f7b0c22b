// Package tree is what `kubectl kausality` reads: a Claim or XR
// and everything below it, nested XRs included (the scenario suite walks
// trees with it too), through Crossplane's own references (a Claim's
// spec.resourceRef, a composite's resource references), which only
// Crossplane writes, with what Kausality holds for each.
package tree

import (
	"context"
	"sort"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// MaxDepth bounds how deep a tree of nested XRs is read.
const MaxDepth = 8

// Node is one object of the tree and what Kausality holds for it.
type Node struct {
	report.Object
	Children []*Node `json:"children,omitempty"`
	// Path names the node by composition resource names from the root
	// down ("database/instance"); "" for the root (and a Claim's XR).
	Path string `json:"path,omitempty"`
	// Missing is set for a reference whose object is gone.
	Missing bool `json:"missing,omitempty"`
	// Unreadable is set for a reference the user may not read: a legacy
	// Claim's owner sees the Claim, not its cluster-scoped XR.
	Unreadable bool `json:"unreadable,omitempty"`

	obj *unstructured.Unstructured
}

// Unstructured is the object as read.
func (n *Node) Unstructured() *unstructured.Unstructured { return n.obj }

// RoleOf says what obj is in a chain, from its shape (policy.IsClaim,
// policy.IsComposite): a Claim points at its composite, a composite has
// Crossplane's fields, everything else is managed.
func RoleOf(obj *unstructured.Unstructured) report.Role {
	switch {
	case policy.IsClaim(obj.Object):
		return report.RoleClaim
	case policy.IsComposite(obj.Object):
		return report.RoleComposite
	}
	return report.RoleManaged
}

// Read reads root's tree through r.
func Read(ctx context.Context, r client.Reader, root *unstructured.Unstructured) (*Node, error) {
	return read(ctx, r, root, "", 0)
}

func read(ctx context.Context, r client.Reader, obj *unstructured.Unstructured, path string, depth int) (*Node, error) {
	role := RoleOf(obj)
	n := &Node{Object: report.Of(obj, role), Path: path, obj: obj}
	var refs []*unstructured.Unstructured
	switch role {
	case report.RoleClaim:
		ref, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "resourceRef")
		if ref["name"] != "" {
			xr := &unstructured.Unstructured{}
			xr.SetAPIVersion(ref["apiVersion"])
			xr.SetKind(ref["kind"])
			xr.SetName(ref["name"])
			refs = append(refs, xr)
		}
	case report.RoleComposite:
		refs = admit.Composed(obj)
	case report.RoleManaged:
		return n, nil
	}
	if depth >= MaxDepth {
		return nil, errors.Errorf("%s nests deeper than %d", admit.Describe(obj), MaxDepth)
	}
	prefix := path
	if prefix != "" {
		prefix += "/"
	}
	for _, ref := range refs {
		if err := r.Get(ctx, client.ObjectKeyFromObject(ref), ref); err != nil {
			gone, forbidden := kerrors.IsNotFound(err), kerrors.IsForbidden(err)
			if !gone && !forbidden {
				return nil, errors.Wrapf(err, "cannot get %s", admit.Describe(ref))
			}
			n.Children = append(n.Children, &Node{Object: report.Object{APIVersion: ref.GetAPIVersion(), Kind: ref.GetKind(), Namespace: ref.GetNamespace(), Name: ref.GetName()}, Missing: gone, Unreadable: forbidden, obj: ref})
			continue
		}
		childPath := path
		if role == report.RoleComposite {
			childPath = prefix + ref.GetAnnotations()["crossplane.io/composition-resource-name"]
		}
		c, err := read(ctx, r, ref, childPath, depth+1)
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, c)
	}
	sort.SliceStable(n.Children, func(i, j int) bool {
		a, b := n.Children[i], n.Children[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Kind+"/"+a.Name < b.Kind+"/"+b.Name
	})
	return n, nil
}

// Walk calls fn on n and every node below it, parents first.
func (n *Node) Walk(fn func(*Node)) {
	fn(n)
	for _, c := range n.Children {
		c.Walk(fn)
	}
}

// Holds is what Kausality holds for the node as one line, the KAUSALITY
// column of `kubectl kausality trace`: a reference that is gone or that
// the user may not read says so instead.
func (n *Node) Holds() string {
	if n.Missing {
		return "gone"
	}
	if n.Unreadable {
		return "not readable with your permissions"
	}
	return n.Summary()
}
