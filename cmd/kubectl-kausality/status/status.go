// Package status is `kubectl kausality status`: the Claims and XRs of the
// kinds AllowancePolicies name whose tree holds something back.
package status

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// Cmd is `kubectl kausality status`.
type Cmd struct {
	AllNamespaces bool `help:"Across all namespaces." short:"A"`
}

// Help prints examples of status.
func (c *Cmd) Help() string {
	return `
Examples:
  # In the current namespace.
  kubectl kausality status

  # Everywhere.
  kubectl kausality status -A
`
}

// Run prints the Claims and XRs that hold something.
func (c *Cmd) Run(f *kube.Flags) error {
	s, err := f.Connect()
	if err != nil {
		return err
	}
	ns := s.Namespace
	if c.AllNamespaces {
		ns = ""
	}
	return Status(context.Background(), s.Client, ns, os.Stdout)
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
			root, err := tree.Read(ctx, r, &l.Items[i])
			if err != nil {
				return err
			}
			var open, pending int
			var held []string
			root.Walk(func(n *tree.Node) {
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
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", printer.OrDash(root.Namespace), root.Kind+"/"+root.Name, open, pending, printer.OrDash(strings.Join(held, "; ")))
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
