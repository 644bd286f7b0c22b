package controlplane

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// serviceHost is the ExternalName of provider-kausality's webhook Service.
// The .invalid domain never resolves: only the egress proxy knows where it
// leads, so no address or port of the machine is in the way.
const serviceHost = "provider-kausality.invalid"

// egressConfig sends every connection the API server makes to a Service
// (webhooks, conversion) through an HTTP CONNECT proxy on a Unix socket,
// kube-apiserver's egress selector as konnectivity uses it.
const egressConfig = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`

// egress is that proxy. Crossplane points a provider's webhooks at port
// 9443 of its Service, a port the harness cannot choose; the proxy leads
// that Service's host and port to wherever the balancer listens (a free
// port), so the suite runs on a machine where 9443 is taken.
type egress struct {
	ln     net.Listener
	mu     sync.Mutex
	routes map[string]string
}

// startEgress starts the proxy on a socket in dir and configures env's
// kube-apiserver to use it.
func startEgress(env *envtest.Environment, dir string) (*egress, error) {
	sock := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot listen on %s for the API server's egress", sock)
	}
	cfg := filepath.Join(dir, "egress-selector.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, egressConfig, sock), 0o600); err != nil {
		_ = ln.Close()
		return nil, errors.Wrap(err, "cannot write the egress selector configuration")
	}
	env.ControlPlane.GetAPIServer().Configure().Set("egress-selector-config-file", cfg)
	e := &egress{ln: ln, routes: map[string]string{}}
	go e.serve()
	return e, nil
}

// route leads connections to from (host:port) to to.
func (e *egress) route(from, to string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.routes[from] = to
}

func (e *egress) close() { _ = e.ln.Close() }

func (e *egress) serve() {
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		go e.connect(c)
	}
}

// connect answers one CONNECT: it dials the target (through a route if
// one is set), answers 200 and copies both ways; a target it cannot reach
// gets 502, which the API server reports as the webhook's failure.
func (e *egress) connect(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		_ = c.Close()
		return
	}
	to := req.Host
	e.mu.Lock()
	if r, ok := e.routes[to]; ok {
		to = r
	}
	e.mu.Unlock()
	up, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		_ = c.Close()
		return
	}
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = c.Close()
		_ = up.Close()
		return
	}
	defer c.Close() //nolint:errcheck // the peer sees the close either way
	pipe(c, up)
}
