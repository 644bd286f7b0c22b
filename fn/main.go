// Command function-kausality is the Kausality composition function: a
// Composition pipeline step that lets through only the composed-resource
// mutations an allowance covers and keeps managed resources read-only towards
// the cloud unless an allowance opens their gate.
package main

import (
	"time"

	"github.com/alecthomas/kong"
	"github.com/prometheus/client_golang/prometheus"

	function "github.com/crossplane/function-sdk-go"

	"github.com/kausality-io/kausality-crossplane/internal/compose"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
)

// CLI is the function's command line, the same flags as the Go function
// template so that Crossplane's package runtime can start it unchanged.
type CLI struct {
	Debug bool `help:"Emit debug logs in addition to info logs." short:"d"`

	Network        string `default:"tcp"   help:"Network on which to listen for gRPC connections."`
	Address        string `default:":9443" help:"Address at which to listen for gRPC connections."`
	TLSCertsDir    string `aliases:"tls-server-certs-dir" env:"TLS_SERVER_CERTS_DIR" help:"Directory containing server certs (tls.key, tls.crt) and the CA used to verify client certificates (ca.crt)."`
	Insecure       bool   `help:"Run without mTLS credentials. If you supply this flag --tls-certs-dir will be ignored."`
	MetricsAddress string `default:":8080" help:"Address at which to serve Prometheus metrics; empty disables them."`

	// FixedTime makes renders reproducible: example golden files and the
	// demo pin the clock so hop timestamps and gate expiry do not drift.
	FixedTime time.Time `env:"KAUSALITY_FIXED_TIME" help:"Use this RFC 3339 time as the current time (for reproducible crossplane render output)." hidden:""`
}

// Run starts the gRPC server and blocks until it stops.
func (c *CLI) Run() error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}
	o := compose.Options{}
	// The SDK serves the default registry on MetricsAddress, next to its
	// gRPC metrics.
	if c.MetricsAddress != "" {
		o.Metrics = metrics.NewFunction(prometheus.DefaultRegisterer)
	}
	if !c.FixedTime.IsZero() {
		o.Now = func() time.Time { return c.FixedTime }
	}
	f := compose.NewFunction(log, o)
	return function.Serve(f,
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSCertsDir),
		function.Insecure(c.Insecure),
		function.WithMetricsServer(c.MetricsAddress))
}

func main() {
	ctx := kong.Parse(&CLI{}, kong.Description("Kausality: every change to a composed resource needs a cause."))
	ctx.FatalIfErrorf(ctx.Run())
}
