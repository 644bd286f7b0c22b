package controlplane

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// egressProxy is the HTTP CONNECT proxy the API server dials every
// webhook Service through (the cluster selection of its
// EgressSelectorConfiguration, as konnectivity is configured): a
// webhook's port is whatever Crossplane writes (9443 for a provider), and
// the proxy sends it to the free port the balancer in front of
// provider-kausality's replicas listens on, so no fixed port of the
// machine is in the suite's way. Any other address is dialled as asked.
type egressProxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	routes map[string]string
	conns  map[net.Conn]bool
}

// egressConfig is the EgressSelectorConfiguration: cluster traffic
// (webhooks, aggregated APIs) goes through the proxy on the Unix socket
// %s (over TCP the API server insists on TLS to the proxy).
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

// egress starts the proxy and makes env's kube-apiserver dial webhooks
// through it.
func (c *ControlPlane) egress(env *envtest.Environment) error {
	sock := filepath.Join(c.Dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return errors.Wrap(err, "cannot listen for the API server's egress")
	}
	p := &egressProxy{ln: ln, routes: map[string]string{}, conns: map[net.Conn]bool{}}
	cfg := filepath.Join(c.Dir, "egress-selector.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, egressConfig, sock), 0o600); err != nil {
		_ = ln.Close()
		return errors.Wrap(err, "cannot write the egress selector configuration")
	}
	env.ControlPlane.GetAPIServer().Configure().Set("egress-selector-config-file", cfg)
	p.wg.Add(1)
	go p.serve()
	c.proxy = p
	c.stop = append(c.stop, p.close)
	return nil
}

// route sends connections for from (host:port) to to.
func (p *egressProxy) route(from, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[from] = to
}

func (p *egressProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.tunnel(c)
	}
}

// tunnel answers one CONNECT and copies bytes both ways until either side
// closes.
func (p *egressProxy) tunnel(c net.Conn) {
	defer c.Close() //nolint:errcheck // the tunnel is over either way
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil || req.Method != http.MethodConnect {
		_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
		return
	}
	to := req.Host
	p.mu.Lock()
	if r, ok := p.routes[to]; ok {
		to = r
	}
	p.conns[c] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	up, err := net.DialTimeout("tcp", to, 10*time.Second)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close() //nolint:errcheck // the tunnel is over either way
	// The client speaks TLS only once it has the answer, so the reader
	// above holds nothing more of it.
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// close stops accepting and ends every tunnel.
func (p *egressProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
