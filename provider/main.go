// Command provider-kausality is the Kausality provider: the gate
// controller, which opens and closes managed resources' gates as allowances
// arrive and are consumed, and the admission webhooks that evaluate
// AllowancePolicies on Claims and composites, check the chain down to
// managed resources, protect kausality.io annotations and guard against
// accidental deletion. Crossplane installs it as a provider package.
package main

import (
	"time"

	"github.com/alecthomas/kong"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/provider/server"
)

// CLI is the provider's command line. Environment variables follow the
// names Crossplane sets for provider deployments.
type CLI struct {
	Debug bool `help:"Emit debug logs." short:"d" env:"DEBUG"`

	MetricsAddress string `default:":8080" help:"Address to serve Prometheus metrics on; 0 disables." env:"METRICS_BIND_ADDRESS"`
	HealthAddress  string `default:":8081" help:"Address to serve /healthz and /readyz on; 0 disables." env:"HEALTH_PROBE_BIND_ADDRESS"`
	PprofAddress   string `help:"Address to serve Go's pprof profiles on; empty disables." env:"PPROF_BIND_ADDRESS"`

	LeaderElection bool   `help:"Use leader election, so only one replica acts." env:"LEADER_ELECTION"`
	Namespace      string `default:"crossplane-system" help:"Namespace of the leader election lease." env:"POD_NAMESPACE"`

	WebhookPort   int    `default:"9443" help:"Port the admission webhooks listen on." env:"WEBHOOK_PORT"`
	WebhookCerts  string `default:"/tls/server" help:"Directory holding the webhook serving certificate (tls.crt, tls.key)." env:"WEBHOOK_TLS_CERT_DIR"`
	WebhookHost   string `help:"Address the admission webhooks listen on; empty: every interface." env:"WEBHOOK_HOST"`
	StaticWebhook string `help:"ValidatingWebhookConfiguration from the package whose client config the provider's own webhook configurations copy; empty: the one holding webhook policies.kausality.io (Crossplane names it crossplane-provider-<Provider name>)."`

	CrossplaneServiceAccount string        `default:"crossplane-system:crossplane" help:"namespace:name of Crossplane's service account, trusted to write kausality.io annotations." env:"CROSSPLANE_SERVICE_ACCOUNT"`
	MaxGateOpen              time.Duration `default:"${max_gate_open}" help:"Close a gate whose allowance was stamped longer ago than this."`
	DiscoveryInterval        time.Duration `default:"30s" help:"How often to look for new managed resource kinds."`
	MaxReconcileRate         int           `default:"10" help:"How many managed resources of one kind the gate controller reconciles at once." env:"MAX_RECONCILE_RATE"`
	DerivePolicies           bool          `help:"Keep an AllowancePolicy derived from each Composition annotated kausality.io/derive-policy: \"true\" in sync with its revisions. The provider then writes AllowancePolicies: bind the ClusterRole of package/install/derive-policies.yaml first." env:"DERIVE_POLICIES"`
}

// Run starts the provider and blocks until it is stopped.
func (c *CLI) Run() error {
	zl, err := zap.NewProduction()
	if c.Debug {
		zl, err = zap.NewDevelopment()
	}
	if err != nil {
		return err
	}
	log := zapr.NewLogger(zl)
	ctrl.SetLogger(log)
	ctx := ctrl.SetupSignalHandler()
	mgr, err := server.New(ctx, ctrl.GetConfigOrDie(), server.Options{
		MetricsAddress: c.MetricsAddress, HealthAddress: c.HealthAddress, PprofAddress: c.PprofAddress,
		LeaderElection: c.LeaderElection, LeaderElectionNamespace: c.Namespace,
		WebhookHost: c.WebhookHost, WebhookPort: c.WebhookPort, CertDir: c.WebhookCerts, StaticWebhook: c.StaticWebhook,
		CrossplaneUser: server.ServiceAccountUser(c.CrossplaneServiceAccount),
		Gate:           gate.Config{MaxOpen: c.MaxGateOpen}, DiscoveryInterval: c.DiscoveryInterval, MaxReconcileRate: c.MaxReconcileRate,
		DerivePolicies: c.DerivePolicies,
		Log:            logging.NewLogrLogger(log),
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func main() {
	ctx := kong.Parse(&CLI{}, kong.Name("provider-kausality"), kong.Description("Kausality: gates and admission for Crossplane; every change needs a cause."),
		// The function's Input defaults to the same limit, so both close a
		// gate at the same moment.
		kong.Vars{"max_gate_open": gate.DefaultMaxOpen.String()})
	ctx.FatalIfErrorf(ctx.Run())
}
