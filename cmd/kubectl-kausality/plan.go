package main

import (
	"context"
	"os"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/plan"
)

// exitBlocked is the exit code of `plan --exit-code` when admission would
// deny the change or Kausality would withhold part of it; 1 stays an
// error of the command itself.
const exitBlocked = 2

// PlanCmd is `kubectl kausality plan -f FILE`.
type PlanCmd struct {
	Filename         string        `help:"The changed Claim or XR." required:"" short:"f" type:"existingfile"`
	Functions        string        `help:"The Functions crossplane render runs the pipeline with (a YAML file or directory, as crossplane render takes them)." required:"" type:"path"`
	Crossplane       string        `default:"crossplane" help:"The crossplane CLI."`
	CrossplaneBinary string        `help:"A Crossplane core binary crossplane render uses instead of Docker (--crossplane-binary)."`
	CrossplaneUser   string        `default:"system:serviceaccount:crossplane-system:crossplane" help:"Who Crossplane core writes as: a Claim's change reaches its XR as this user."`
	Timeout          time.Duration `default:"1m" help:"How long each render may take."`
	Output           string        `default:"default" enum:"default,json" help:"Output format: default (a diff per composed resource) or json." short:"o"`
	ExitCode         bool          `help:"Exit with 2 when admission would deny the change or Kausality would withhold any of it."`
}

// Run prints what the change would do. It writes nothing: the change is
// sent with dryRun=All.
func (pc *PlanCmd) Run(c *CLI) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return errors.Wrap(err, "cannot load the kubeconfig")
	}
	ns := c.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return errors.Wrap(err, "cannot read the context's namespace")
		}
	}
	// Admission's warnings arrive only as response headers.
	warnings := &plan.Warnings{}
	cfg.WarningHandlerWithContext = warnings
	s, err := newSession(cfg, ns)
	if err != nil {
		return err
	}
	cl, ok := s.reader.(client.Client)
	if !ok {
		return errors.New("the session's client cannot write, which the dry run needs")
	}
	p, err := plan.Run(context.Background(), plan.Options{
		Client: cl, Mapper: s.mapper, Namespace: ns, File: pc.Filename,
		Functions: pc.Functions, Crossplane: pc.Crossplane, CrossplaneBinary: pc.CrossplaneBinary,
		CrossplaneUser: pc.CrossplaneUser, Warnings: warnings, Timeout: pc.Timeout,
	})
	if err != nil {
		return err
	}
	if err := plan.Print(os.Stdout, p, pc.Output); err != nil {
		return err
	}
	if pc.ExitCode && p.Blocked() {
		os.Exit(exitBlocked)
	}
	return nil
}
