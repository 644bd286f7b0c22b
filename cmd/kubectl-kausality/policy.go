package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/policy"
)

// PolicyCmd is `kubectl kausality policy`: AllowancePolicies from
// Compositions.
type PolicyCmd struct {
	Derive PolicyDeriveCmd `cmd:"" help:"Write an AllowancePolicy that mirrors a Composition's patch-and-transform patches (read structurally), any other pipeline (by a render experiment, with --functions), or a kro ResourceGraphDefinition's ${schema.spec...} references."`
	Check  PolicyCheckCmd  `cmd:"" help:"List the patches no rule covers, the rules no patch uses and the composed kinds no policy restricts; exits non-zero on a gap."`
}

// PolicyDeriveCmd is `kubectl kausality policy derive -f composition.yaml`
// (or -f rgd.yaml: the kind decides how to read the file).
type PolicyDeriveCmd struct {
	File               string   `name:"filename" short:"f" required:"" help:"The file holding the Composition, or a kro ResourceGraphDefinition ('-': stdin)."`
	XRD                string   `name:"xrd" help:"The file holding the XR's CompositeResourceDefinition: fields it requires only ever change, never appear or vanish."`
	CRDs               []string `name:"crds" sep:"none" help:"A directory of CRDs (and XRDs) of the composed kinds (repeatable); without it, the cluster resolves them if it can, else their plurals are guessed."`
	User               []string `sep:"none" help:"A user who may initiate changes (repeatable)."`
	Group              []string `sep:"none" help:"A group whose members may initiate changes (repeatable)."`
	ServiceAccount     []string `sep:"none" help:"A service account, namespace/name, that may initiate changes (repeatable)."`
	Propagator         []string `sep:"none" help:"A service account, namespace/name, that may only carry a change on, such as crossplane-system/crossplane for a composed XR (repeatable)."`
	Deleting           string   `default:"orphan" enum:"orphan,delete" help:"What deleting the XR does to its cloud resources: orphan (keep them) or delete."`
	DeletionProtection bool     `help:"Require the kausality.io/allow-delete annotation before an XR of the kind may be deleted."`
	Name               string   `help:"The policy's name (default: the XR's plural)."`
	// The render experiment: a Composition with a step that is not
	// patch-and-transform is rendered when --functions is given (the
	// functions must be reachable, as for crossplane render), else its
	// steps are noted in the policy; --experiment renders any Composition.
	Experiment       bool          `help:"Derive by rendering even when every step is patch-and-transform (without it, only a Composition with another step is rendered, and only when --functions is given). Renders a baseline XR and one XR per leaf field of the XRD's spec with that field changed, and turns what changed in the composed resources into rules; needs --xrd."`
	Functions        string        `help:"The Functions crossplane render runs the pipeline with (a YAML file or directory, as crossplane render takes them): enables the render experiment for Compositions with steps that are not patch-and-transform." type:"path"`
	XR               string        `name:"xr" help:"A file holding the baseline XR of a render experiment (default: one made up from the XRD's schema); status fields it lacks are made up so resources composed once the XR reports them are rendered." type:"path"`
	Crossplane       string        `default:"crossplane" help:"The crossplane CLI a render experiment runs."`
	CrossplaneBinary string        `help:"A Crossplane core binary crossplane render uses instead of Docker (--crossplane-binary)."`
	Timeout          time.Duration `default:"1m" help:"How long each render of an experiment may take."`
}

// Run prints the derived policy.
func (d *PolicyDeriveCmd) Run(c *CLI) error {
	var cluster *policy.Cluster
	if len(d.CRDs) == 0 {
		if s, err := c.connect(); err == nil {
			cluster = policy.NewCluster(s.reader, s.mapper)
		} else {
			fmt.Fprintf(os.Stderr, "no cluster to resolve kinds (%v): their plurals are guessed; pass --crds\n", err)
		}
	}
	return policy.Derive(policy.DeriveOptions{
		Composition: d.File, XRD: d.XRD, CRDs: d.CRDs,
		Users: d.User, Groups: d.Group, ServiceAccounts: d.ServiceAccount, Propagators: d.Propagator,
		Deleting: d.Deleting, DeletionProtection: d.DeletionProtection, Name: d.Name,
		Experiment: d.Experiment,
		Render: policy.RenderOptions{
			Functions: d.Functions, Crossplane: d.Crossplane, CrossplaneBinary: d.CrossplaneBinary,
			XR: d.XR, Timeout: d.Timeout,
		},
	}, cluster, os.Stdout)
}

// PolicyCheckCmd is `kubectl kausality policy check`.
type PolicyCheckCmd struct {
	File   []string `name:"filename" short:"f" sep:"none" help:"Files holding Compositions (repeatable); without it, every Composition and AllowancePolicy in the cluster."`
	Policy []string `sep:"none" help:"Files holding the AllowancePolicies (repeatable), with -f."`
	CRDs   []string `name:"crds" sep:"none" help:"A directory of CRDs (and XRDs) of the composed kinds (repeatable), with -f; without it, the cluster resolves them if it can."`
	// A Composition that is not all patch-and-transform is read by the
	// render experiment derive runs, so check finds the gaps of what
	// derive wrote.
	XRD              string        `name:"xrd" help:"A file holding the XRs' CompositeResourceDefinitions, for Compositions check renders." type:"path"`
	Functions        string        `help:"The Functions crossplane render runs a pipeline with: needed for a Composition with a step that is not patch-and-transform." type:"path"`
	Crossplane       string        `default:"crossplane" help:"The crossplane CLI a render experiment runs."`
	CrossplaneBinary string        `help:"A Crossplane core binary crossplane render uses instead of Docker (--crossplane-binary)."`
	Timeout          time.Duration `default:"1m" help:"How long each render of an experiment may take."`
}

func (p *PolicyCheckCmd) render() policy.RenderOptions {
	return policy.RenderOptions{Functions: p.Functions, Crossplane: p.Crossplane, CrossplaneBinary: p.CrossplaneBinary, Timeout: p.Timeout}
}

// Run prints the gaps and fails when there is one.
func (p *PolicyCheckCmd) Run(c *CLI) error {
	if len(p.File) == 0 {
		s, err := c.connect()
		if err != nil {
			return err
		}
		return policy.CheckCluster(context.Background(), *policy.NewCluster(s.reader, s.mapper), p.render(), os.Stdout)
	}
	var cluster *policy.Cluster
	if len(p.CRDs) == 0 {
		if s, err := c.connect(); err == nil {
			cluster = policy.NewCluster(s.reader, s.mapper)
		}
	}
	return policy.CheckFiles(policy.CheckOptions{Compositions: p.File, Policies: p.Policy, CRDs: p.CRDs, XRD: p.XRD, Render: p.render()}, cluster, os.Stdout)
}
