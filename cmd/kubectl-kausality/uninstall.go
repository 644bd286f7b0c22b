package main

import (
	"context"
	"os"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/uninstall"
)

// UninstallCmd is `kubectl kausality uninstall`.
type UninstallCmd struct {
	Yes                bool     `help:"Release the resources; without it the command only lists them."`
	ManagementPolicies []string `name:"management-policies" default:"*" help:"The managementPolicies a released resource gets (comma-separated)."`
}

// Run releases the gated managed resources (uninstall.Run).
func (u *UninstallCmd) Run(c *CLI) error {
	s, err := c.connect()
	if err != nil {
		return err
	}
	return uninstall.Run(context.Background(), s.kube, uninstall.Options{Yes: u.Yes, ManagementPolicies: u.ManagementPolicies}, os.Stdout)
}

// Help prints examples of uninstall.
func (u *UninstallCmd) Help() string {
	return `
Run it last, after removing the kausality step from your Compositions and
deleting the provider-kausality package (docs/OPERATIONS.md, "Taking it out"):
a released resource's provider applies its spec as it stands, so check
kubectl kausality status for withheld changes first.

Examples:
  # What would be released.
  kubectl kausality uninstall

  # Release every gated managed resource to the providers' default, ["*"].
  kubectl kausality uninstall --yes

  # Release them read-only, to review each before its provider writes again.
  kubectl kausality uninstall --yes --management-policies Observe
`
}
