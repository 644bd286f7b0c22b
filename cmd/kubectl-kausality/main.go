// Command kubectl-kausality is a kubectl plugin (`kubectl kausality …`)
// that shows, explains and previews what Kausality decides: trace draws a
// Claim, XR or managed resource and the tree below it with what Kausality
// holds for each object; status lists the XRs that hold something back;
// explain says which policy and rule withheld a change and what would
// permit it; plan says what a change would do before it is applied; and
// policy derives AllowancePolicies from Compositions and checks them. It
// acts with the user's own kubeconfig: every command but plan needs only
// read access, and plan needs the right to update the object, since it
// asks admission by a server-side dry run.
package main

import (
	"context"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/show"
)

// CLI is the plugin's command line, with kubectl's connection flags.
type CLI struct {
	Kubeconfig string           `help:"Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)."`
	Context    string           `help:"The kubeconfig context to use."`
	Namespace  string           `help:"The namespace of the object (default: the context's)." short:"n"`
	Version    kong.VersionFlag `help:"Print the version and exit."`

	Trace   TraceCmd   `cmd:"" help:"Show a Claim, XR or managed resource and everything below it, with what Kausality holds for each."`
	Status  StatusCmd  `cmd:"" help:"List the XRs of the kinds AllowancePolicies name that hold a change back, are frozen, are being created, or in Log or Audit mode let through what Enforce would withhold."`
	Explain ExplainCmd `cmd:"" help:"Say, for what Kausality withholds from a Claim, XR or managed resource, which policy decided and what would permit it."`
	Plan    PlanCmd    `cmd:"" help:"Say what a change to a Claim or XR would do before it is applied: admission by dry run, and per composed resource what reaches the cloud, is withheld or held."`
	Policy  PolicyCmd  `cmd:"" help:"Derive AllowancePolicies from Compositions, and check Compositions against them."`

	Uninstall UninstallCmd `cmd:"" help:"Once provider-kausality is deleted, hand every managed resource Kausality gated back to its provider: remove the gate and Kausality's label and annotations."`
}

// TraceCmd is `kubectl kausality trace TYPE/NAME`.
type TraceCmd struct {
	Resource string        `arg:"" help:"TYPE/NAME or TYPE, as kubectl takes them (xnetworks/shop, xnetwork.aws.platform.example.org/shop)."`
	Name     string        `arg:"" optional:"" help:"NAME, when the first argument is a TYPE alone."`
	Output   string        `default:"default" enum:"default,wide,json,yaml,dot" help:"Output format: default, wide (adds the initiator and the trace), json, yaml or dot (Graphviz)." short:"o"`
	Watch    bool          `help:"Print the tree again whenever it changes, until interrupted." short:"w"`
	Interval time.Duration `default:"2s" help:"How often --watch reads the tree."`
}

// StatusCmd is `kubectl kausality status`.
type StatusCmd struct {
	AllNamespaces bool `help:"Across all namespaces." short:"A"`
}

// version is set at release builds (make release: -X main.version=…).
var version = "dev"

func main() {
	c := &CLI{}
	ctx := kong.Parse(c, kong.Name("kubectl-kausality"), kong.Description("See what Kausality decided."), kong.Vars{"version": version})
	ctx.FatalIfErrorf(ctx.Run(c))
}

// session is what every command needs: a reader and a mapper.
type session struct {
	kube      client.Client
	reader    client.Reader
	mapper    meta.RESTMapper
	namespace string
}

func (c *CLI) connect() (session, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return session{}, errors.Wrap(err, "cannot load the kubeconfig")
	}
	ns := c.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return session{}, errors.Wrap(err, "cannot read the context's namespace")
		}
	}
	return newSession(cfg, ns)
}

func newSession(cfg *rest.Config, namespace string) (session, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return session{}, errors.Wrap(err, "cannot make an HTTP client")
	}
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return session{}, errors.Wrap(err, "cannot discover the API server's kinds")
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return session{}, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return session{}, err
	}
	cl, err := client.New(cfg, client.Options{HTTPClient: hc, Mapper: m, Scheme: s})
	if err != nil {
		return session{}, errors.Wrap(err, "cannot make a client")
	}
	return session{kube: cl, reader: cl, mapper: m, namespace: namespace}, nil
}

// Run prints the tree.
func (t *TraceCmd) Run(c *CLI) error {
	s, err := c.connect()
	if err != nil {
		return err
	}
	if t.Watch {
		return t.watch(s)
	}
	return show.Trace(context.Background(), s.reader, s.mapper, s.namespace, t.Resource, t.Name, t.Output, os.Stdout)
}

// Run prints the XRs that hold something.
func (st *StatusCmd) Run(c *CLI) error {
	s, err := c.connect()
	if err != nil {
		return err
	}
	ns := s.namespace
	if st.AllNamespaces {
		ns = ""
	}
	return show.Status(context.Background(), s.reader, ns, os.Stdout)
}
