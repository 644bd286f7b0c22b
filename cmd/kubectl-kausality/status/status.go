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
	AllNamespaces bool           `help:"Across all namespaces." short:"A"`
	Output        printer.Format `default:"default" help:"Output format: default, json or yaml." short:"o"`
}

// formats are the -o values status takes: its table has no columns to
// add, and it lists trees' roots, not a tree to draw.
var formats = []printer.Format{printer.FormatDefault, printer.FormatJSON, printer.FormatYAML}

// Validate rejects an -o status does not print, so that a mistyped one
// fails before anything is read.
func (c *Cmd) Validate() error {
	_, err := printer.New(c.Output, formats...)
	return err
}

// Help prints examples of status.
func (c *Cmd) Help() string {
	return `
Examples:
  # In the current namespace.
  kubectl kausality status

  # Everywhere, for a script.
  kubectl kausality status -A -o json
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
	return Status(context.Background(), s.Client, ns, c.Output, os.Stdout)
}

// List is what status prints: the Claims and XRs whose tree holds
// something back.
type List struct {
	// Items is never null in JSON, so a script can iterate it when
	// nothing is held.
	Items []Item `json:"items"`
}

// Item is one Claim or XR whose tree holds something back.
type Item struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// OpenGates counts the managed resources whose gate is open.
	OpenGates int `json:"openGates"`
	// Pending counts the allowances propagation control holds back.
	Pending int `json:"pending"`
	// Holds are the objects of the tree that hold something, with what.
	Holds []Hold `json:"holds,omitempty"`
}

// Hold is one object of a tree and what Kausality holds for it.
type Hold struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// WriteText writes one line per Claim or XR; status has no wide form.
func (l List) WriteText(w io.Writer, _ bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tOPEN GATES\tPENDING\tKAUSALITY")
	for _, it := range l.Items {
		held := make([]string, len(it.Holds))
		for i, h := range it.Holds {
			held[i] = h.Kind + "/" + h.Name + ": " + h.Summary
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", printer.OrDash(it.Namespace), it.Kind+"/"+it.Name, it.OpenGates, it.Pending, printer.OrDash(strings.Join(held, "; ")))
	}
	return errors.Wrap(tw.Flush(), "cannot write the status")
}

// Status prints, in format, what Read finds in namespace ("" for all).
func Status(ctx context.Context, r client.Reader, namespace string, format printer.Format, w io.Writer) error {
	p, err := printer.New(format, formats...)
	if err != nil {
		return err
	}
	l, err := Read(ctx, r, namespace)
	if err != nil {
		return err
	}
	return p.Print(w, l)
}

// Read lists, for every kind an AllowancePolicy is for, the objects in
// namespace ("" for all) whose tree holds something back: a withheld or
// held change, a freeze, an open or pending gate, a creation not over.
func Read(ctx context.Context, r client.Reader, namespace string) (List, error) {
	l := List{Items: []Item{}}
	ps := &v1alpha1.AllowancePolicyList{}
	if err := r.List(ctx, ps); err != nil {
		return l, errors.Wrap(err, "cannot list AllowancePolicies")
	}
	kinds := map[schema.GroupKind]bool{}
	for _, p := range ps.Items {
		kinds[schema.GroupKind{Group: p.Spec.For.APIGroup, Kind: p.Spec.For.Kind}] = true
	}
	seen := map[schema.GroupKind]bool{}
	for _, p := range ps.Items {
		f := p.Spec.For
		gk := schema.GroupKind{Group: f.APIGroup, Kind: f.Kind}
		if seen[gk] || f.APIVersion == "" {
			continue
		}
		seen[gk] = true
		objs := &unstructured.UnstructuredList{}
		objs.SetGroupVersionKind(schema.GroupVersionKind{Group: f.APIGroup, Version: f.APIVersion, Kind: f.Kind + "List"})
		if err := r.List(ctx, objs, client.InNamespace(namespace)); err != nil {
			return l, errors.Wrapf(err, "cannot list %s", f.Kind)
		}
		for i := range objs.Items {
			if !listed(&objs.Items[i], namespace, kinds) {
				continue
			}
			root, err := tree.Read(ctx, r, &objs.Items[i])
			if err != nil {
				return l, err
			}
			if it, holds := itemOf(root); holds {
				l.Items = append(l.Items, it)
			}
		}
	}
	return l, nil
}

// itemOf is root's line of the status, and whether its tree holds
// anything at all: a quiet tree is left out, since status answers "what
// is held back".
func itemOf(root *tree.Node) (Item, bool) {
	it := Item{APIVersion: root.APIVersion, Kind: root.Kind, Namespace: root.Namespace, Name: root.Name}
	root.Walk(func(n *tree.Node) {
		if n.Role == report.RoleManaged && len(n.Open) > 0 {
			it.OpenGates++
		}
		it.Pending += len(n.Pending)
		if n.Frozen != "" || n.Withheld != "" || n.Held != "" || n.WouldWithhold != "" || n.Unrestricted != "" || n.Creating || len(n.Problems) > 0 {
			it.Holds = append(it.Holds, Hold{Kind: n.Kind, Name: n.Name, Summary: n.Summary()})
		}
	})
	return it, it.OpenGates > 0 || it.Pending > 0 || len(it.Holds) > 0
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
