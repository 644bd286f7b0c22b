// Package check is `kubectl kausality policy check`: Compositions, from
// files or the cluster, against the AllowancePolicies for their composite
// kinds. It reads each Composition as `policy derive` does (package
// derive), so a policy derive just wrote checks clean; the comparison is
// internal/derivation's.
package check

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/derive"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/internal/derivation"
)

// Cmd is `kubectl kausality policy check`.
type Cmd struct {
	File   []string `name:"filename" short:"f" sep:"none" help:"Files holding Compositions (repeatable); without it, every Composition and AllowancePolicy in the cluster."`
	Policy []string `sep:"none" help:"Files holding the AllowancePolicies (repeatable), with -f."`
	CRDs   []string `name:"crds" sep:"none" help:"A directory of CRDs (and XRDs) of the composed kinds (repeatable), with -f; without it, the cluster resolves them if it can."`
	// A Composition that is not all patch-and-transform is read by the
	// render experiment derive runs, so check finds the gaps of what
	// derive wrote.
	XRD                string `name:"xrd" help:"A file holding the XRs' CompositeResourceDefinitions, for Compositions check renders." type:"path"`
	derive.RenderFlags `embed:""`
}

// Help prints examples of policy check.
func (c *Cmd) Help() string {
	return `
Examples:
  # Every Composition and AllowancePolicy in the cluster.
  kubectl kausality policy check

  # Files, as in a repository's CI.
  kubectl kausality policy check -f composition.yaml --policy policy.yaml --xrd xrd.yaml --functions functions.yaml
`
}

func (c *Cmd) render() derive.RenderOptions { return c.Options("") }

// Run prints the gaps and fails when there is one.
func (c *Cmd) Run(f *kube.Flags) error {
	if len(c.File) == 0 {
		s, err := f.Connect()
		if err != nil {
			return err
		}
		return Cluster(context.Background(), *derive.NewCluster(s.Client, s.Mapper), c.render(), os.Stdout)
	}
	var cluster *derive.Cluster
	if len(c.CRDs) == 0 {
		if s, err := f.Connect(); err == nil {
			cluster = derive.NewCluster(s.Client, s.Mapper)
		}
	}
	return Files(Options{Compositions: c.File, Policies: c.Policy, CRDs: c.CRDs, XRD: c.XRD, Render: c.render()}, cluster, os.Stdout)
}

// Options are the flags of `policy check` in file mode.
type Options struct {
	// Compositions are files holding Compositions.
	Compositions []string
	// Policies are files holding AllowancePolicies.
	Policies []string
	// CRDs are directories of CRDs and XRDs that resolve composed kinds.
	CRDs []string
	// XRD is a file holding XRs' CompositeResourceDefinitions, which a
	// render experiment needs (CRDs' XRDs serve as well).
	XRD string
	// Render says how to render a Composition that is not all
	// patch-and-transform: check reads it by the experiment derive runs.
	Render derive.RenderOptions
}

// ErrGaps is returned when check finds a gap, so that CI fails.
var ErrGaps = errors.New("the policies and Compositions do not agree")

// Files checks the Compositions of files against the policies of
// files.
func Files(o Options, cluster *derive.Cluster, w io.Writer) error {
	var comps []*xpv1.Composition
	for _, f := range o.Compositions {
		objs, err := derive.ReadObjects(f)
		if err != nil {
			return err
		}
		cs, err := derive.Compositions(objs)
		if err != nil {
			return err
		}
		comps = append(comps, cs...)
	}
	var ps []v1alpha1.AllowancePolicy
	for _, f := range o.Policies {
		objs, err := derive.ReadObjects(f)
		if err != nil {
			return err
		}
		p, err := derive.Policies(objs)
		if err != nil {
			return err
		}
		ps = append(ps, p...)
	}
	schemaOf, res, err := derive.Resolvers(o.XRD, o.CRDs, cluster)
	if err != nil {
		return err
	}
	return check(comps, ps, res, func(c *xpv1.Composition) (*derivation.Model, error) {
		return checkModel(o.Render, c, schemaOf)
	}, w)
}

// checkModel reads c as derive does (derive.ModelOf): a policy derive wrote by
// experiment is checked against the same experiment.
func checkModel(o derive.RenderOptions, c *xpv1.Composition, schemaOf func(schema.GroupVersionKind) *derivation.Schema) (*derivation.Model, error) {
	return derive.ModelOf(context.Background(), o, false, c, schemaOf)
}

// Cluster checks every Composition in the cluster against every
// AllowancePolicy in it, rendering those that are not all
// patch-and-transform as o says.
func Cluster(ctx context.Context, cluster derive.Cluster, o derive.RenderOptions, w io.Writer) error {
	cl := &unstructured.UnstructuredList{}
	cl.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositionList"})
	if err := cluster.Reader.List(ctx, cl); err != nil {
		return errors.Wrap(err, "cannot list Compositions")
	}
	comps := make([]*xpv1.Composition, 0, len(cl.Items))
	for i := range cl.Items {
		c := &xpv1.Composition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cl.Items[i].Object, c); err != nil {
			return errors.Wrapf(err, "cannot read Composition %s", cl.Items[i].GetName())
		}
		comps = append(comps, c)
	}
	pl := &v1alpha1.AllowancePolicyList{}
	if err := cluster.Reader.List(ctx, pl, &client.ListOptions{}); err != nil {
		return errors.Wrap(err, "cannot list AllowancePolicies")
	}
	return check(comps, pl.Items, cluster, func(c *xpv1.Composition) (*derivation.Model, error) {
		return checkModel(o, c, cluster.Schema)
	}, w)
}

func check(comps []*xpv1.Composition, ps []v1alpha1.AllowancePolicy, res derivation.Resolver, read func(*xpv1.Composition) (*derivation.Model, error), w io.Writer) error {
	if len(comps) == 0 {
		return errors.New("no Composition to check")
	}
	models := make([]*derivation.Model, 0, len(comps))
	for _, c := range comps {
		m, err := read(c)
		if err != nil {
			return err
		}
		models = append(models, m)
	}
	rep, err := derivation.Check(models, ps, res)
	if err != nil {
		return err
	}
	for _, f := range rep.Findings {
		fmt.Fprintln(w, f)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if len(rep.Findings) > 0 {
		return errors.Wrapf(ErrGaps, "%d gaps", len(rep.Findings))
	}
	fmt.Fprintf(w, "%d Compositions and their policies agree\n", len(comps))
	return nil
}
