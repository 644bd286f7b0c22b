package uninstall

import (
	"context"
	"os"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
)

// Cmd is `kubectl kausality uninstall`.
type Cmd struct {
	Yes                bool     `help:"Release the resources; without it the command only lists them."`
	ManagementPolicies []string `name:"management-policies" help:"Narrow what a released resource gets (comma-separated): each gets what its Composition's pipeline asks for, cut down to these; never more."`
}

// Help prints examples of uninstall.
func (c *Cmd) Help() string {
	return `
Run it last, after removing the kausality step from your Compositions and
deleting the provider-kausality package (docs/OPERATIONS.md, "Taking it out"):
a released resource's provider applies its spec as it stands, so check
kubectl kausality status for withheld changes first.

Examples:
  # What would be released.
  kubectl kausality uninstall

  # Release every gated managed resource to the managementPolicies its
  # Composition's pipeline asks for (["*"] where it asks for none).
  kubectl kausality uninstall --yes

  # Release them read-only, to review each before its provider writes again.
  kubectl kausality uninstall --yes --management-policies Observe
`
}

// Run releases the gated managed resources (Release).
func (c *Cmd) Run(f *kube.Flags) error {
	s, err := f.Connect()
	if err != nil {
		return err
	}
	return Release(context.Background(), s.Client, Options{Yes: c.Yes, ManagementPolicies: c.ManagementPolicies}, os.Stdout)
}
