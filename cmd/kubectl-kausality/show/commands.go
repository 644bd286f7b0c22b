package show

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// Trace reads the object named by resource (TYPE/NAME, or TYPE with name)
// in namespace (ignored for cluster-scoped kinds) and prints its tree to w
// in format.
func Trace(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, name, format string, w io.Writer) error {
	root, err := ReadNamed(ctx, r, m, namespace, resource, name)
	if err != nil {
		return err
	}
	return root.Print(w, format)
}

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

// Status lists, for every kind an AllowancePolicy is for, the objects in
// namespace ("" for all) whose tree holds something back: a withheld or
// held change, a freeze, an open or pending gate, a creation not over.
func Status(ctx context.Context, r client.Reader, namespace string, w io.Writer) error {
	ps := &v1alpha1.AllowancePolicyList{}
	if err := r.List(ctx, ps); err != nil {
		return errors.Wrap(err, "cannot list AllowancePolicies")
	}
	kinds := map[schema.GroupKind]bool{}
	for _, p := range ps.Items {
		kinds[schema.GroupKind{Group: p.Spec.For.APIGroup, Kind: p.Spec.For.Kind}] = true
	}
	seen := map[schema.GroupKind]bool{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tOPEN GATES\tPENDING\tKAUSALITY")
	for _, p := range ps.Items {
		f := p.Spec.For
		gk := schema.GroupKind{Group: f.APIGroup, Kind: f.Kind}
		if seen[gk] || f.APIVersion == "" {
			continue
		}
		seen[gk] = true
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: f.APIGroup, Version: f.APIVersion, Kind: f.Kind + "List"})
		if err := r.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return errors.Wrapf(err, "cannot list %s", f.Kind)
		}
		for i := range l.Items {
			if !listed(&l.Items[i], namespace, kinds) {
				continue
			}
			root, err := Read(ctx, r, &l.Items[i])
			if err != nil {
				return err
			}
			var open, pending int
			var held []string
			root.Walk(func(n *Node) {
				if n.Role == report.RoleManaged && len(n.Open) > 0 {
					open++
				}
				pending += len(n.Pending)
				if n.Frozen != "" || n.Withheld != "" || n.Held != "" || n.WouldWithhold != "" || n.Unrestricted != "" || n.Creating || len(n.Problems) > 0 {
					held = append(held, n.Kind+"/"+n.Name+": "+n.Summary())
				}
			})
			if open == 0 && pending == 0 && len(held) == 0 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", orDash(root.Namespace), root.Kind+"/"+root.Name, open, pending, orDash(strings.Join(held, "; ")))
		}
	}
	return tw.Flush()
}

// listed reports whether status lists o: a legacy (cluster-scoped) XR
// belongs to its Claim's namespace, and is listed under its Claim when a
// policy names the Claim's kind too, since the Claim's tree holds it.
func listed(o *unstructured.Unstructured, namespace string, kinds map[schema.GroupKind]bool) bool {
	if o.GetNamespace() != "" {
		return true
	}
	claim, ok, _ := unstructured.NestedMap(o.Object, "spec", "claimRef")
	if !ok {
		return namespace == ""
	}
	ns, _ := claim["namespace"].(string)
	if namespace != "" && ns != namespace {
		return false
	}
	apiVersion, _ := claim["apiVersion"].(string)
	kind, _ := claim["kind"].(string)
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return !kinds[schema.GroupKind{Group: gv.Group, Kind: kind}]
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
