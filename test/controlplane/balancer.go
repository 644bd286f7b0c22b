package controlplane

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// balancer plays the provider's webhook Service with its Endpoints: it
// accepts the API server's connections on the Service's address and hands
// each to the next replica whose readiness probe passes, as kube-proxy
// does with the endpoints of ready pods. A replica that is not ready gets
// no connection; with none ready the connection is closed, and the API
// server fails the request closed.
type balancer struct {
	ln net.Listener
	// backends are the replicas' webhook addresses and readiness.
	backends func() []*backend
	next     atomic.Uint64
	wg       sync.WaitGroup
	// fault is the Fault the Service plays now.
	fault atomic.Int32
	// hung are the connections a FaultHang holds, released when it ends;
	// live those forwarded to a replica, cut when a fault starts (the API
	// server keeps its connections to a webhook open and reuses them).
	mu   sync.Mutex
	hung []net.Conn
	live map[net.Conn]bool
}

// A Fault is how the webhook Service misbehaves on purpose.
type Fault int32

// Faults.
const (
	// FaultNone: connections reach a ready replica.
	FaultNone Fault = iota
	// FaultRefuse: every connection is closed at once, as when no pod
	// is behind the Service.
	FaultRefuse
	// FaultHang: connections are accepted and never answered, as a pod
	// that is stuck does; the API server gives up after the webhook's
	// timeout.
	FaultHang
)

// backend is one replica as the balancer sees it.
type backend struct {
	webhook, health string
	ready           atomic.Bool
}

// probe keeps b.ready in line with the replica's /readyz until ctx ends,
// every period, as the kubelet's readiness probe would.
func (b *backend) probe(ctx context.Context, period time.Duration) {
	c := &http.Client{Timeout: period}
	for ctx.Err() == nil {
		b.ready.Store(readyz(ctx, c, "http://"+b.health+"/readyz"))
		select {
		case <-ctx.Done():
		case <-time.After(period):
		}
	}
	b.ready.Store(false)
}

func readyz(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// listen starts a balancer on addr.
func listen(addr string, backends func() []*backend) (*balancer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot listen on %s for provider-kausality's webhook Service", addr)
	}
	b := &balancer{ln: ln, backends: backends}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(c)
	}
}

// setFault makes the balancer play f; ending FaultHang closes the
// connections it held.
func (b *balancer) setFault(f Fault) {
	b.fault.Store(int32(f))
	b.mu.Lock()
	defer b.mu.Unlock()
	if f != FaultNone {
		for c := range b.live {
			_ = c.Close()
		}
	}
	if f != FaultHang {
		for _, c := range b.hung {
			_ = c.Close()
		}
		b.hung = nil
	}
}

// forward hands c to a ready replica, trying each once.
func (b *balancer) forward(c net.Conn) {
	switch Fault(b.fault.Load()) {
	case FaultRefuse:
		_ = c.Close()
		return
	case FaultHang:
		b.mu.Lock()
		b.hung = append(b.hung, c)
		b.mu.Unlock()
		return
	}
	defer c.Close() //nolint:errcheck // the peer sees the close either way
	bs := b.backends()
	start := int(b.next.Add(1))
	for i := range bs {
		be := bs[(start+i)%len(bs)]
		if !be.ready.Load() {
			continue
		}
		up, err := net.DialTimeout("tcp", be.webhook, time.Second)
		if err != nil {
			continue
		}
		b.track(c, true)
		if Fault(b.fault.Load()) != FaultNone {
			// A fault started while this connection was dialled.
			b.track(c, false)
			_ = up.Close()
			return
		}
		pipe(c, up)
		b.track(c, false)
		return
	}
}

// track records c as forwarded (live) or done.
func (b *balancer) track(c net.Conn, live bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live == nil {
		b.live = map[net.Conn]bool{}
	}
	if live {
		b.live[c] = true
	} else {
		delete(b.live, c)
	}
}

// pipe copies between a and b until either side closes.
func pipe(a, b net.Conn) {
	defer b.Close() //nolint:errcheck // closing ends the other copy
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
}

// ready reports whether some replica is ready.
func (b *balancer) ready() bool {
	for _, be := range b.backends() {
		if be.ready.Load() {
			return true
		}
	}
	return false
}

func (b *balancer) close() {
	_ = b.ln.Close()
	b.wg.Wait()
}
