package controlplane

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// Node is one resource of a Crossplane v2 XR's tree: the XR itself (Path
// ""), a composed XR or a managed resource, named by the composition
// resource names from the root down ("database/instance").
type Node struct {
	Path      string
	Object    *unstructured.Unstructured
	Composite bool
}

// Tree reads a namespaced XR of any kind and everything it composes,
// nested XRs included, as `kubectl kausality trace` does (tree.Read), root
// first and then by path. A reference whose object is gone is left out.
func (c *ControlPlane) Tree(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) ([]Node, error) {
	xr, err := c.Object(ctx, gvk, key)
	if err != nil || xr == nil {
		return nil, err
	}
	root, err := tree.Read(ctx, c.admin, xr)
	if err != nil {
		return nil, err
	}
	var out []Node
	root.Walk(func(n *tree.Node) {
		if !n.Missing {
			out = append(out, Node{Path: n.Path, Object: n.Unstructured(), Composite: n.Role != report.RoleManaged})
		}
	})
	sort.SliceStable(out[1:], func(i, j int) bool { return out[1+i].Path < out[1+j].Path })
	return out, nil
}

// TreeSettled says whether Crossplane, Kausality and the provider are done
// with an XR's tree: every XR reconciled at its generation and Ready,
// every managed resource observed at its generation and Ready, with its
// gate closed and no allowance left open, and want resources in all (XRs
// included). why says what is still going on.
func TreeSettled(nodes []Node, want int) (ok bool, why string, err error) {
	if len(nodes) != want {
		return false, fmt.Sprintf("%d of %d resources exist", len(nodes), want), nil
	}
	for _, n := range nodes {
		what := n.Object.GetKind() + " " + n.Path
		if s := Condition(n.Object, "Synced"); s.Status != "True" || s.ObservedGeneration != n.Object.GetGeneration() {
			return false, fmt.Sprintf("%s Synced %s at generation %d of %d: %s", what, s.Status, s.ObservedGeneration, n.Object.GetGeneration(), s.Message), nil
		}
		if r := Condition(n.Object, "Ready"); r.Status != "True" {
			return false, fmt.Sprintf("%s Ready %s: %s", what, r.Status, r.Message), nil
		}
		if n.Composite {
			continue
		}
		if !slices.Equal(Gate(n.Object), ClosedGate) {
			return false, fmt.Sprintf("%s gate %v", what, Gate(n.Object)), nil
		}
		as, err := allowance.Parse(n.Object.GetAnnotations()[v1alpha1.AnnotationAllowances])
		if err != nil {
			return false, "", err
		}
		if open := allowance.Unconsumed(as, n.Object.Object); len(open) > 0 {
			return false, fmt.Sprintf("%s has %d open allowances", what, len(open)), nil
		}
	}
	return true, "", nil
}

// DescribeTree is a summary of an XR's tree, one line per resource, for
// failure messages.
func DescribeTree(nodes []Node) string {
	var b strings.Builder
	for _, n := range nodes {
		fp, _, _ := unstructured.NestedMap(n.Object.Object, "spec", "forProvider")
		if n.Composite {
			fp, _, _ = unstructured.NestedMap(n.Object.Object, "spec", "parameters")
		}
		fmt.Fprintf(&b, "%s %q gen %d gate %v %v allowances %s %s\n", n.Object.GetKind(), n.Path, n.Object.GetGeneration(), Gate(n.Object), fp,
			n.Object.GetAnnotations()[v1alpha1.AnnotationAllowances], Conditions(n.Object))
	}
	return b.String()
}

// ApplyFileAs applies every object of a YAML file with cl (a user's
// client), creating each or updating it to what the file says.
func ApplyFileAs(ctx context.Context, cl client.Client, path string, edit func(*unstructured.Unstructured)) error {
	raw, err := os.ReadFile(path) //nolint:gosec // the suite's own examples
	if err != nil {
		return err
	}
	objs, err := decodeAll(raw)
	if err != nil {
		return errors.Wrapf(err, "cannot decode %s", path)
	}
	for _, o := range objs {
		if edit != nil {
			edit(o)
		}
		if err := cl.Create(ctx, o); err != nil {
			return errors.Wrapf(err, "cannot create %s %s from %s", o.GetKind(), o.GetName(), path)
		}
	}
	return nil
}

// AdminClient is a client acting as the cluster administrator.
func (c *ControlPlane) AdminClient() client.Client { return c.admin }
