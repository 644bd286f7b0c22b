package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// webhookIdleTimeout is how long the webhook server keeps a connection the
// API server left idle. kube-apiserver's webhook client drops its own idle
// connections after Go's default 90 s (k8s.io/apimachinery's
// SetTransportDefaults); controller-runtime's server drops them after the
// same 90 s, so the two race, and a call the API server writes onto a
// connection the server has just closed fails ("broken pipe") and the
// write it was admitting is refused. Kept open longer, an idle connection
// is always closed by the API server first.
const webhookIdleTimeout = 3 * time.Minute

// webhookShutdownTimeout bounds how long a stopping replica waits for the
// admission calls it is answering, as controller-runtime's server does.
const webhookShutdownTimeout = time.Minute

// webhookServer is controller-runtime's webhook server (registration,
// per-path metrics, the mux) serving over TLS with webhookIdleTimeout.
type webhookServer struct {
	*webhook.DefaultServer
	certDir string
	mux     *http.ServeMux
	// idle is how long an idle connection is kept: webhookIdleTimeout.
	idle time.Duration

	mu sync.Mutex
	// addr is where it listens: as configured until it started, then
	// the listener's own address (port 0 picks a free one).
	addr    string
	started bool
}

// newWebhookServer serves webhooks on host:port with tls.crt and tls.key
// of certDir, reloaded when they change.
func newWebhookServer(host string, port int, certDir string) *webhookServer {
	mux := http.NewServeMux()
	s := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, WebhookMux: mux})
	return &webhookServer{DefaultServer: s.(*webhook.DefaultServer), addr: net.JoinHostPort(host, strconv.Itoa(port)), certDir: certDir, mux: mux, idle: webhookIdleTimeout}
}

// Start serves until ctx ends, then waits for the calls in flight.
func (s *webhookServer) Start(ctx context.Context) error {
	cw, err := certwatcher.New(filepath.Join(s.certDir, "tls.crt"), filepath.Join(s.certDir, "tls.key"))
	if err != nil {
		return errors.Wrapf(err, "cannot load the webhook serving certificate from %s", s.certDir)
	}
	go func() { _ = cw.Start(ctx) }()
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	ln, err := tls.Listen("tcp", addr, &tls.Config{GetCertificate: cw.GetCertificate, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return errors.Wrapf(err, "cannot listen on %s for webhooks", addr)
	}
	srv := &http.Server{Handler: s.mux, IdleTimeout: s.idle, ReadHeaderTimeout: 32 * time.Second, MaxHeaderBytes: 1 << 20}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), webhookShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.mu.Lock()
	s.started, s.addr = true, ln.Addr().String()
	s.mu.Unlock()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Wrap(err, "cannot serve webhooks")
	}
	<-stopped
	return nil
}

// StartedChecker passes once the server is started and takes a TLS
// connection.
func (s *webhookServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		s.mu.Lock()
		started, addr := s.started, s.addr
		s.mu.Unlock()
		if !started {
			return errors.New("webhook server has not been started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it answers
		if err != nil {
			return errors.Wrap(err, "webhook server is not reachable")
		}
		return errors.Wrap(conn.Close(), "webhook server is not reachable: closing connection")
	}
}
