// Package trace is `kubectl kausality trace`: a Claim, XR or managed
// resource and everything below it, with what Kausality holds for each,
// printed once or followed with --watch.
package trace

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
)

// Cmd is `kubectl kausality trace TYPE/NAME`.
type Cmd struct {
	Resource string         `arg:"" help:"TYPE/NAME or TYPE, as kubectl takes them (xnetworks/shop, xnetwork.aws.platform.example.org/shop)."`
	Name     string         `arg:"" optional:"" help:"NAME, when the first argument is a TYPE alone."`
	Output   printer.Format `default:"default" help:"Output format: default, wide (adds the initiator and the trace), json, yaml or dot (Graphviz)." short:"o"`
	Watch    bool           `help:"Print the tree again whenever it changes, until interrupted." short:"w"`
	Interval time.Duration  `default:"2s" help:"How often --watch reads the tree."`
}

// formats are the -o values trace takes: a tree has columns to add and
// can be drawn, so every format.
var formats = []printer.Format{printer.FormatDefault, printer.FormatWide, printer.FormatJSON, printer.FormatYAML, printer.FormatDot}

// Validate rejects an -o trace does not print, so that a mistyped one
// fails before a cluster is asked.
func (c *Cmd) Validate() error {
	_, err := printer.New(c.Output, formats...)
	return err
}

// Help prints examples of trace.
func (c *Cmd) Help() string {
	return `
Examples:
  # The tree of an XR, in the current namespace.
  kubectl kausality trace xstores/shop

  # With each object's initiator and trace, watched.
  kubectl kausality trace xnetwork.aws.platform.example.org/shop -o wide -w

  # As a Graphviz graph.
  kubectl kausality trace databaseclaims/orders -n team-a -o dot | dot -Tsvg > orders.svg
`
}

// Run prints the tree, or follows it until the user interrupts: an
// interrupt ends the watch cleanly rather than killing the process
// mid-frame.
func (c *Cmd) Run(f *kube.Flags) error {
	s, err := f.Connect()
	if err != nil {
		return err
	}
	if !c.Watch {
		return Trace(context.Background(), s.Client, s.Mapper, s.Namespace, c.Resource, c.Name, c.Output, os.Stdout)
	}
	if c.Interval <= 0 {
		return errors.Errorf("--interval %s: must be positive", c.Interval)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	return Watch(ctx, s.Client, s.Mapper, s.Namespace, c.Resource, c.Name, c.Output, os.Stdout, time.Now, tick.C)
}

// Trace reads the object named by resource (TYPE/NAME, or TYPE with name)
// in namespace (ignored for cluster-scoped kinds) and prints its tree to w
// in format.
func Trace(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, name string, format printer.Format, w io.Writer) error {
	p, err := printer.New(format, formats...)
	if err != nil {
		return err
	}
	root, err := tree.ReadNamed(ctx, r, m, namespace, resource, name)
	if err != nil {
		return err
	}
	return p.Print(w, printer.Tree{Node: root})
}
