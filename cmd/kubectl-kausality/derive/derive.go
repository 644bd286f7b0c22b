// Package derive is `kubectl kausality policy derive`: an AllowancePolicy
// from a Composition's patch-and-transform steps, from a render
// experiment for any other pipeline, or from a kro ResourceGraphDefinition.
// The derivation is internal/derivation's; this package reads files and
// the cluster, and runs the experiment's renders. `policy check` reads
// Compositions through it, so that it checks what derive wrote.
package derive

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/internal/derivation"
)

// Cmd is `kubectl kausality policy derive -f composition.yaml` (or -f
// rgd.yaml: the kind decides how to read the file).
type Cmd struct {
	File               string   `name:"filename" short:"f" required:"" help:"The file holding the Composition, or a kro ResourceGraphDefinition ('-': stdin)."`
	XRD                string   `name:"xrd" help:"The file holding the XR's CompositeResourceDefinition: fields it requires only ever change, never appear or vanish."`
	CRDs               []string `name:"crds" sep:"none" help:"A directory of CRDs (and XRDs) of the composed kinds (repeatable); without it, the cluster resolves them if it can, else their plurals are guessed."`
	User               []string `sep:"none" help:"A user who may initiate changes (repeatable)."`
	Group              []string `sep:"none" help:"A group whose members may initiate changes (repeatable)."`
	ServiceAccount     []string `sep:"none" help:"A service account, namespace/name, that may initiate changes (repeatable)."`
	Propagator         []string `sep:"none" help:"A service account, namespace/name, that may only carry a change on, such as crossplane-system/crossplane for a composed XR (repeatable)."`
	Deleting           string   `default:"orphan" enum:"orphan,delete" help:"What deleting the XR does to its cloud resources: orphan (keep them) or delete."`
	DeletionProtection bool     `help:"Require the kausality.io/allow-delete annotation before an XR of the kind may be deleted."`
	Mode               string   `default:"Enforce" enum:"Enforce,Log,Audit" help:"The policy's mode: Enforce, Log, or Audit (gate and refuse nothing, report what Enforce would do: adopt Kausality on a running cluster with every policy in Audit)."`
	Name               string   `help:"The policy's name (default: the XR's plural)."`
	// The render experiment: a Composition with a step that is not
	// patch-and-transform is rendered when --functions is given (the
	// functions must be reachable, as for crossplane render), else its
	// steps are noted in the policy; --experiment renders any Composition.
	Experiment  bool   `help:"Derive by rendering even when every step is patch-and-transform (without it, only a Composition with another step is rendered, and only when --functions is given). Renders a baseline XR and one XR per leaf field of the XRD's spec with that field changed, and turns what changed in the composed resources into rules; needs --xrd."`
	XR          string `name:"xr" help:"A file holding the baseline XR of a render experiment (default: one made up from the XRD's schema); status fields it lacks are made up so resources composed once the XR reports them are rendered." type:"path"`
	RenderFlags `embed:""`
}

// RenderFlags say how a render experiment runs `crossplane render`; derive
// and check take the same.
type RenderFlags struct {
	Functions        string        `help:"The Functions crossplane render runs the pipeline with (a YAML file or directory, as crossplane render takes them): needed for a Composition with a step that is not patch-and-transform, which is read by a render experiment." type:"path"`
	Crossplane       string        `default:"crossplane" help:"The crossplane CLI a render experiment runs."`
	CrossplaneBinary string        `help:"A Crossplane core binary crossplane render uses instead of Docker (--crossplane-binary)."`
	Timeout          time.Duration `default:"1m" help:"How long each render of an experiment may take."`
}

// Options are the render options the flags give, with xr the baseline XR
// file ("" makes one up).
func (f RenderFlags) Options(xr string) RenderOptions {
	return RenderOptions{Functions: f.Functions, Crossplane: f.Crossplane, CrossplaneBinary: f.CrossplaneBinary, XR: xr, Timeout: f.Timeout}
}

// Help prints examples of policy derive.
func (c *Cmd) Help() string {
	return `
Examples:
  # A patch-and-transform Composition; the platform-team group starts changes.
  kubectl kausality policy derive -f composition.yaml --xrd xrd.yaml --group platform-team

  # A go-templating or sequenced pipeline, by a render experiment.
  kubectl kausality policy derive -f composition.yaml --xrd xrd.yaml --functions functions.yaml --group platform-team

  # A kro ResourceGraphDefinition.
  kubectl kausality policy derive -f rgd.yaml --group platform-team
`
}

// Run prints the derived policy.
func (c *Cmd) Run(f *kube.Flags) error {
	var cluster *Cluster
	if len(c.CRDs) == 0 {
		if s, err := f.Connect(); err == nil {
			cluster = NewCluster(s.Client, s.Mapper)
		} else {
			fmt.Fprintf(os.Stderr, "no cluster to resolve kinds (%v): their plurals are guessed; pass --crds\n", err)
		}
	}
	return Derive(Options{
		Composition: c.File, XRD: c.XRD, CRDs: c.CRDs,
		Users: c.User, Groups: c.Group, ServiceAccounts: c.ServiceAccount, Propagators: c.Propagator,
		Deleting: c.Deleting, DeletionProtection: c.DeletionProtection, Mode: c.Mode, Name: c.Name,
		Experiment: c.Experiment,
		Render:     c.Options(c.XR),
	}, cluster, os.Stdout)
}

// Options are what `policy derive` derives from, and how.
type Options struct {
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
	// Mode sets spec.mode (Enforce, Log or Audit; empty: Enforce).
	Mode string
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
func Derive(o Options, cluster *Cluster, w io.Writer) error {
	subjects, err := derivation.Subjects(o.Users, o.Groups, o.ServiceAccounts, o.Propagators)
	if err != nil {
		return err
	}
	deleting, err := derivation.ParseDeleting(o.Deleting)
	if err != nil {
		return err
	}
	objs, err := ReadObjects(o.Composition)
	if err != nil {
		return err
	}
	comps, err := Compositions(objs)
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
	schemaOf, res, err := Resolvers(o.XRD, o.CRDs, cluster)
	if err != nil {
		return err
	}
	docs := make([][]byte, 0, len(comps)+len(graphs))
	for _, c := range comps {
		m, err := ModelOf(context.Background(), o.Render, o.Experiment, c, schemaOf)
		if err != nil {
			return err
		}
		s := schemaOf(m.XR)
		r, err := derivation.Derive(m, derivation.Options{
			Name: o.Name, Subjects: subjects, Deleting: deleting, DeletionProtection: o.DeletionProtection,
			Mode: v1alpha1.Mode(o.Mode), Resolver: res, XRSchema: s,
		})
		if err != nil {
			return errors.Wrapf(err, "Composition %s", c.GetName())
		}
		b, err := derivation.Render(r)
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

// SchemaOf is an XR kind's schema, from its XRD.
type SchemaOf func(schema.GroupVersionKind) *derivation.Schema

// Resolvers are where kinds and XR schemas are looked up: the files first
// (xrd and the directories crds), then the cluster (nil: none).
func Resolvers(xrd string, crds []string, cluster *Cluster) (SchemaOf, derivation.Resolver, error) {
	var objs []*unstructured.Unstructured
	if xrd != "" {
		o, err := ReadObjects(xrd)
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
	defs, err := derivation.NewDefinitions(objs)
	if err != nil {
		return nil, nil, err
	}
	res := chain{defs}
	if cluster != nil {
		res = append(res, *cluster)
	}
	schemaOf := func(gvk schema.GroupVersionKind) *derivation.Schema {
		s := defs.Schema(gvk)
		if s == nil && cluster != nil {
			s = cluster.Schema(gvk)
		}
		return s
	}
	return schemaOf, res, nil
}
