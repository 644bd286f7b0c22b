package policy

import (
	"context"
	"fmt"
	"io"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/derive"
)

// DeriveOptions are the flags of `policy derive`.
type DeriveOptions struct {
	// Composition is the file holding the Composition(s).
	Composition string
	// XRD is a file holding the XR's CompositeResourceDefinition.
	XRD string
	// CRDs are directories of CRDs and XRDs that resolve composed kinds.
	CRDs []string
	// Users, Groups and ServiceAccounts may initiate changes; Propagators
	// are service accounts that may only carry a chain on.
	Users, Groups, ServiceAccounts, Propagators []string
	// Deleting is orphan or delete.
	Deleting string
	// DeletionProtection sets spec.deletionProtection.
	DeletionProtection bool
	// Name of the policy, when the file holds one Composition.
	Name string
	// Experiment derives by rendering (experiment.go) even when every step
	// is patch-and-transform. Without it a Composition is rendered only
	// when a step is not patch-and-transform and Render names Functions.
	Experiment bool
	// Render says how to run crossplane render for an experiment.
	Render RenderOptions
}

// Derive writes an AllowancePolicy for each Composition of the file, with
// what it could not derive as comments. Kinds resolve through the files
// given, then the cluster (nil: none), else are guessed and noted.
func Derive(o DeriveOptions, cluster *Cluster, w io.Writer) error {
	subjects, err := derive.Subjects(o.Users, o.Groups, o.ServiceAccounts, o.Propagators)
	if err != nil {
		return err
	}
	deleting, err := derive.ParseDeleting(o.Deleting)
	if err != nil {
		return err
	}
	objs, err := readObjects(o.Composition)
	if err != nil {
		return err
	}
	comps, err := compositions(objs)
	if err != nil {
		return err
	}
	graphs := resourceGraphs(objs)
	if len(comps) == 0 && len(graphs) == 0 {
		return errors.Errorf("%s holds no Composition (nor a kro ResourceGraphDefinition)", o.Composition)
	}
	if o.Name != "" && len(comps)+len(graphs) > 1 {
		return errors.Errorf("--name names one policy, and %s holds %d Compositions and ResourceGraphDefinitions", o.Composition, len(comps)+len(graphs))
	}
	defs, res, err := resolvers(o.XRD, o.CRDs, cluster)
	if err != nil {
		return err
	}
	schemaOf := func(gvk schema.GroupVersionKind) *derive.Schema {
		s := defs.Schema(gvk)
		if s == nil && cluster != nil {
			s = cluster.Schema(gvk)
		}
		return s
	}
	docs := make([][]byte, 0, len(comps)+len(graphs))
	for _, c := range comps {
		m, err := modelOf(context.Background(), o, c, schemaOf)
		if err != nil {
			return err
		}
		s := schemaOf(m.XR)
		r, err := derive.Derive(m, derive.Options{
			Name: o.Name, Subjects: subjects, Deleting: deleting, DeletionProtection: o.DeletionProtection,
			Resolver: res, XRSchema: s,
		})
		if err != nil {
			return errors.Wrapf(err, "Composition %s", c.GetName())
		}
		b, err := derive.Render(r)
		if err != nil {
			return err
		}
		docs = append(docs, b)
	}
	kro, err := deriveGraphs(graphs, o, subjects, deleting, res, schemaOf)
	if err != nil {
		return err
	}
	docs = append(docs, kro...)
	_, err = w.Write(joinDocuments(docs))
	return err
}

// resolvers are the definitions the files hold and the resolver to use:
// the files first, then the cluster.
func resolvers(xrd string, crds []string, cluster *Cluster) (*derive.Definitions, derive.Resolver, error) {
	var objs []*unstructured.Unstructured
	if xrd != "" {
		o, err := readObjects(xrd)
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, o...)
	}
	for _, dir := range crds {
		o, err := readDir(dir)
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, o...)
	}
	defs, err := derive.NewDefinitions(objs)
	if err != nil {
		return nil, nil, err
	}
	res := chain{defs}
	if cluster != nil {
		res = append(res, *cluster)
	}
	return defs, res, nil
}

// CheckOptions are the flags of `policy check` in file mode.
type CheckOptions struct {
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
	Render RenderOptions
}

// ErrGaps is returned when check finds a gap, so that CI fails.
var ErrGaps = errors.New("the policies and Compositions do not agree")

// CheckFiles checks the Compositions of files against the policies of
// files.
func CheckFiles(o CheckOptions, cluster *Cluster, w io.Writer) error {
	var comps []*xpv1.Composition
	for _, f := range o.Compositions {
		objs, err := readObjects(f)
		if err != nil {
			return err
		}
		cs, err := compositions(objs)
		if err != nil {
			return err
		}
		comps = append(comps, cs...)
	}
	var ps []v1alpha1.AllowancePolicy
	for _, f := range o.Policies {
		objs, err := readObjects(f)
		if err != nil {
			return err
		}
		p, err := policies(objs)
		if err != nil {
			return err
		}
		ps = append(ps, p...)
	}
	defs, res, err := resolvers(o.XRD, o.CRDs, cluster)
	if err != nil {
		return err
	}
	schemaOf := func(gvk schema.GroupVersionKind) *derive.Schema {
		s := defs.Schema(gvk)
		if s == nil && cluster != nil {
			s = cluster.Schema(gvk)
		}
		return s
	}
	return check(comps, ps, res, func(c *xpv1.Composition) (*derive.Model, error) {
		return checkModel(o.Render, c, schemaOf)
	}, w)
}

// checkModel reads c as derive does (modelOf): a policy derive wrote by
// experiment is checked against the same experiment.
func checkModel(o RenderOptions, c *xpv1.Composition, schemaOf func(schema.GroupVersionKind) *derive.Schema) (*derive.Model, error) {
	return modelOf(context.Background(), DeriveOptions{Render: o}, c, schemaOf)
}

// CheckCluster checks every Composition in the cluster against every
// AllowancePolicy in it, rendering those that are not all
// patch-and-transform as o says.
func CheckCluster(ctx context.Context, cluster Cluster, o RenderOptions, w io.Writer) error {
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
	return check(comps, pl.Items, cluster, func(c *xpv1.Composition) (*derive.Model, error) {
		return checkModel(o, c, cluster.Schema)
	}, w)
}

func check(comps []*xpv1.Composition, ps []v1alpha1.AllowancePolicy, res derive.Resolver, read func(*xpv1.Composition) (*derive.Model, error), w io.Writer) error {
	if len(comps) == 0 {
		return errors.New("no Composition to check")
	}
	models := make([]*derive.Model, 0, len(comps))
	for _, c := range comps {
		m, err := read(c)
		if err != nil {
			return err
		}
		models = append(models, m)
	}
	rep, err := derive.Check(models, ps, res)
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
