package plan

import (
	"context"
	"os"
	"time"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
)

// exitBlocked is the exit code of `plan --exit-code` when admission would
// deny the change or Kausality would withhold part of it; 1 stays an
// error of the command itself.
const exitBlocked = 2

// Cmd is `kubectl kausality plan -f FILE`.
type Cmd struct {
	Filename         string         `help:"The changed Claim or XR." required:"" short:"f" type:"existingfile"`
	Functions        string         `help:"The Functions crossplane render runs the pipeline with (a YAML file or directory, as crossplane render takes them)." required:"" type:"path"`
	Crossplane       string         `default:"crossplane" help:"The crossplane CLI."`
	CrossplaneBinary string         `help:"A Crossplane core binary crossplane render uses instead of Docker (--crossplane-binary)."`
	CrossplaneUser   string         `default:"system:serviceaccount:crossplane-system:crossplane" help:"Who Crossplane core writes as: a Claim's change reaches its XR as this user."`
	Timeout          time.Duration  `default:"1m" help:"How long each render may take."`
	Output           printer.Format `default:"default" help:"Output format: default (a diff per composed resource), json or yaml." short:"o"`
	ExitCode         bool           `help:"Exit with 2 when admission would deny the change or Kausality would withhold any of it."`
}

// Validate rejects an -o plan does not print, so that a mistyped one
// fails before a render is run.
func (c *Cmd) Validate() error {
	_, err := printer.New(c.Output, formats...)
	return err
}

// Help prints examples of plan.
func (c *Cmd) Help() string {
	return `
Examples:
  # The change in shop.yaml, rendered with the Functions in functions.yaml.
  kubectl kausality plan -f shop.yaml --functions functions.yaml

  # In CI: exit 2 when admission would deny it or Kausality would withhold any of it.
  kubectl kausality plan -f shop.yaml --functions functions.yaml --exit-code
`
}

// Run prints what the change would do. It writes nothing: the change is
// sent with dryRun=All.
func (c *Cmd) Run(f *kube.Flags) error {
	cfg, ns, err := f.Config()
	if err != nil {
		return err
	}
	// Admission's warnings arrive only as response headers.
	warnings := &Warnings{}
	cfg.WarningHandlerWithContext = warnings
	s, err := kube.NewSession(cfg, ns)
	if err != nil {
		return err
	}
	p, err := Build(context.Background(), Options{
		Client: s.Client, Mapper: s.Mapper, Namespace: ns, File: c.Filename,
		Functions: c.Functions, Crossplane: c.Crossplane, CrossplaneBinary: c.CrossplaneBinary,
		CrossplaneUser: c.CrossplaneUser, Warnings: warnings, Timeout: c.Timeout,
	})
	if err != nil {
		return err
	}
	if err := Print(os.Stdout, p, c.Output); err != nil {
		return err
	}
	if c.ExitCode && p.Blocked() {
		os.Exit(exitBlocked)
	}
	return nil
}
