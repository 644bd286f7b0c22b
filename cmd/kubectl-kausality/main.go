// Command kubectl-kausality is a kubectl plugin (`kubectl kausality …`)
// that shows, explains and previews what Kausality decides: trace draws a
// Claim, XR or managed resource and the tree below it with what Kausality
// holds for each object; status lists the XRs that hold something back;
// explain says which policy and rule withheld a change and what would
// permit it; plan says what a change would do before it is applied; and
// policy derives AllowancePolicies from Compositions and checks them. It
// acts with the user's own kubeconfig: every command but plan and
// uninstall needs only read access. Each command is a package of its own
// (a Cmd with Help and Run), as crossplane's crank lays out its commands.
package main

import (
	"github.com/alecthomas/kong"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/check"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/derive"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/explain"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/plan"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/status"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/trace"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/uninstall"
)

// CLI is the plugin's command line, with kubectl's connection flags.
type CLI struct {
	kube.Flags `embed:""`

	Version kong.VersionFlag `help:"Print the version and exit."`

	Trace   trace.Cmd   `cmd:"" help:"Show a Claim, XR or managed resource and everything below it, with what Kausality holds for each."`
	Status  status.Cmd  `cmd:"" help:"List the XRs of the kinds AllowancePolicies name that hold a change back, are frozen, are being created, or in Log or Audit mode let through what Enforce would withhold."`
	Explain explain.Cmd `cmd:"" help:"Say, for what Kausality withholds from a Claim, XR or managed resource, which policy decided and what would permit it."`
	Plan    plan.Cmd    `cmd:"" help:"Say what a change to a Claim or XR would do before it is applied: admission by dry run, and per composed resource what reaches the cloud, is withheld or held."`
	Policy  PolicyCmd   `cmd:"" help:"Derive AllowancePolicies from Compositions, and check Compositions against them."`

	Uninstall uninstall.Cmd `cmd:"" help:"Once provider-kausality is deleted, hand every managed resource Kausality gated back to its provider: remove the gate and Kausality's label and annotations."`
}

// PolicyCmd is `kubectl kausality policy`: AllowancePolicies from
// Compositions.
type PolicyCmd struct {
	Derive derive.Cmd `cmd:"" help:"Write an AllowancePolicy that mirrors a Composition's patch-and-transform patches (read structurally), any other pipeline (by a render experiment, with --functions), or a kro ResourceGraphDefinition's ${schema.spec...} references."`
	Check  check.Cmd  `cmd:"" help:"List the patches no rule covers, the rules no patch uses and the composed kinds no policy restricts; exits non-zero on a gap."`
}

// version is set at release builds (make release: -X main.version=…).
var version = "dev"

func main() {
	c := &CLI{}
	ctx := kong.Parse(c, kong.Name("kubectl-kausality"), kong.Description("See what Kausality decided."), kong.Vars{"version": version})
	ctx.FatalIfErrorf(ctx.Run(&c.Flags))
}
