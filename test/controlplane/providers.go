package controlplane

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// Replicas is how many provider-kausality processes the control plane
// runs, as the install's DeploymentRuntimeConfig does: every one serves
// admission behind the webhook Service and the leader runs the
// controllers, so every scenario's writes reach leader and non-leader
// alike.
const Replicas = 2

// newProviderProcess prepares n replicas of bin, each on free ports, and
// starts the balancer in front of them (where e leads the webhook
// Service) and their readiness probes, which run until ctx ends.
func newProviderProcess(ctx context.Context, bin string, n int, e *egress) (*providerProcess, error) {
	p := &providerProcess{bin: bin}
	for i := range n {
		webhook, err := render.FreeAddress()
		if err != nil {
			return nil, err
		}
		health, err := render.FreeAddress()
		if err != nil {
			return nil, err
		}
		name := ProviderKausality
		if i > 0 {
			name = fmt.Sprintf("%s-%d", ProviderKausality, i)
		}
		rep := &replica{backend: backend{webhook: webhook, health: health}, log: name}
		p.replicas = append(p.replicas, rep)
		go rep.probe(ctx, 200*time.Millisecond)
	}
	backends := make([]*backend, len(p.replicas))
	for i, rep := range p.replicas {
		backends[i] = &rep.backend
	}
	lb, err := listen("127.0.0.1:0", func() []*backend { return backends })
	if err != nil {
		return nil, err
	}
	e.route(net.JoinHostPort(serviceHost, "9443"), lb.ln.Addr().String())
	p.lb = lb
	return p, nil
}

// supervise restarts a provider-kausality replica when it exits, as
// Kubernetes restarts a crashed container (it exits when it starts before
// its CRDs are served, or when it loses the lease), unless KillProvider
// stopped it, until ctx ends.
func (r *externalRuntime) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		r.mu.Lock()
		for _, rep := range r.provider.replicas {
			if rep.cmd != nil && rep.exited() && !rep.down {
				if err := r.startReplica(rep); err != nil {
					appendLog(r.c.Log("runtime"), err.Error())
				}
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (rep *replica) exited() bool {
	select {
	case <-rep.done:
		return true
	default:
		return false
	}
}

// MaxGateOpen is provider-kausality's --max-gate-open on the control
// plane: short, so a scenario can outlast it (a freeze longer than a gate
// may stay open), and long enough for every gate to be applied in time on
// a loaded machine.
const MaxGateOpen = 90 * time.Second

// startProvider starts every replica of provider-kausality that is not
// running. The caller holds r.mu.
func (r *externalRuntime) startProvider() error {
	for _, rep := range r.provider.replicas {
		if rep.cmd != nil && !rep.exited() {
			continue
		}
		if err := r.startReplica(rep); err != nil {
			return err
		}
	}
	return nil
}

// startReplica starts one replica, with leader election as the install
// runs it. The caller holds r.mu.
func (r *externalRuntime) startReplica(rep *replica) error {
	p := r.provider
	host, port, err := net.SplitHostPort(rep.webhook)
	if err != nil {
		return errors.Wrapf(err, "bad webhook address %s", rep.webhook)
	}
	if fi, err := os.Stat(r.c.Log(rep.log)); err == nil {
		rep.logFrom = fi.Size()
	}
	pr, err := r.c.process(rep.log, []string{"KUBECONFIG=" + p.kubeconfig, "POD_NAMESPACE=" + SystemNamespace}, p.bin,
		"--webhook-host", host, "--webhook-port", port, "--webhook-certs", p.certs,
		"--metrics-address", "0", "--health-address", rep.health, "--discovery-interval", "1s", "--leader-election",
		"--crossplane-service-account", CrossplaneSA, "--max-gate-open", MaxGateOpen.String(), "--debug")
	if err != nil {
		return err
	}
	rep.cmd, rep.done, rep.down = pr.cmd, pr.done, false
	// Not ready until its probe says so, as a new pod's endpoint is not.
	rep.ready.Store(false)
	return nil
}

// listening waits until some provider-kausality replica is ready, so the
// webhook Service answers.
func (r *externalRuntime) listening() error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if r.provider.lb.ready() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Errorf("no provider-kausality replica is ready after 2 minutes; see %s", r.c.Log(ProviderKausality))
}

// startRecorder runs the recording provider's controller in this process,
// as its service account.
func (r *externalRuntime) startRecorder(user string, pod *corev1.Pod) error {
	cfg := rest.CopyConfig(r.c.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: fixture.PodExtra(pod)}
	// Its log, crossplane-runtime's managed reconciler at debug level, is
	// kept with the others: what it did with each gate is half of a
	// failed scenario.
	f, err := os.OpenFile(r.c.Log("recorder"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return errors.Wrap(err, "cannot open the recording provider's log")
	}
	log := zap.New(zap.WriteTo(f), zap.UseDevMode(true))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: r.c.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: log})
	if err != nil {
		return errors.Wrap(err, "cannot create the recording provider")
	}
	if err := recorder.Setup(mgr, r.c.Cloud, Poll); err != nil {
		return err
	}
	kinds, err := recorder.KindsIn(filepath.Join(r.c.Root, "test", "recorder", "package", "crds"))
	if err != nil {
		return err
	}
	if err := recorder.SetupKinds(mgr, r.c.Cloud, Poll, kinds...); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.recorder = cancel
	go func() { _ = mgr.Start(ctx) }()
	return nil
}

// StartProvider starts the provider-kausality replicas again after
// KillProvider and waits until one is ready.
func (c *ControlPlane) StartProvider() error {
	c.runtime.mu.Lock()
	err := c.runtime.startProvider()
	c.runtime.mu.Unlock()
	if err != nil {
		return err
	}
	return c.runtime.listening()
}

// KillProvider kills every provider-kausality replica, as a crash of the
// whole Deployment would; they stay down until StartProvider.
func (c *ControlPlane) KillProvider() {
	c.runtime.mu.Lock()
	defer c.runtime.mu.Unlock()
	for _, rep := range c.runtime.provider.replicas {
		if rep.cmd != nil && !rep.exited() {
			rep.down = true
			_ = rep.cmd.Process.Kill()
			<-rep.done
			// A dead pod's endpoint leaves the Service: without this a
			// StartProvider right after would find the replica ready by
			// its last probe and return before the new process serves.
			rep.ready.Store(false)
		}
	}
}

// leaseAcquired is what client-go's leader election logs when a replica
// becomes the leader, in lower case (its capitalisation changed between
// versions).
const leaseAcquired = "successfully acquired lease"

// Leader is the index of the provider-kausality replica that holds the
// lease, -1 while none does: the one that logged acquiring it since it
// last started. A replica that loses the lease exits, so at most one
// running replica has.
func (c *ControlPlane) Leader() int {
	c.runtime.mu.Lock()
	defer c.runtime.mu.Unlock()
	for i, rep := range c.runtime.provider.replicas {
		if rep.cmd == nil || rep.exited() {
			continue
		}
		b, err := os.ReadFile(c.Log(rep.log))
		if err != nil || int64(len(b)) < rep.logFrom {
			continue
		}
		if strings.Contains(strings.ToLower(string(b[rep.logFrom:])), leaseAcquired) {
			return i
		}
	}
	return -1
}

// KillReplica kills replica i as a crash would (SIGKILL: the lease is not
// released); Kubernetes, here supervise, starts it again a second later.
func (c *ControlPlane) KillReplica(i int) {
	c.runtime.mu.Lock()
	defer c.runtime.mu.Unlock()
	rep := c.runtime.provider.replicas[i]
	if rep.cmd != nil && !rep.exited() {
		_ = rep.cmd.Process.Kill()
		<-rep.done
		rep.ready.Store(false)
	}
}

// StopReplica stops replica i as Kubernetes does a pod it deletes or
// drains (SIGTERM: it shuts down and releases the lease) and returns once
// it exited and the API server had time to drop the connections it kept
// open to it; supervise starts it again a second later.
func (c *ControlPlane) StopReplica(i int) {
	c.runtime.mu.Lock()
	defer c.runtime.mu.Unlock()
	rep := c.runtime.provider.replicas[i]
	if rep.cmd != nil && !rep.exited() {
		_ = rep.cmd.Process.Signal(syscall.SIGTERM)
		<-rep.done
		// Its endpoint leaves the Service at once, as Kubernetes removes a
		// terminating pod's; the closes of the webhook connections the API
		// server pooled reach it within a moment. A write sent on one
		// before that fails the webhook call, as it can on a real cluster,
		// and its writer retries: the scenarios after this one would
		// otherwise meet that race instead of what they test.
		rep.ready.Store(false)
		time.Sleep(time.Second)
	}
}

// WebhookFault makes provider-kausality's webhook Service play f until it
// is called again with FaultNone; the replicas keep running.
func (c *ControlPlane) WebhookFault(f Fault) { c.runtime.provider.lb.setFault(f) }

// ProviderLog is provider-kausality's log so far, every replica's.
func (c *ControlPlane) ProviderLog() string {
	var out strings.Builder
	for _, rep := range c.runtime.provider.replicas {
		fmt.Fprintf(&out, "--- %s\n%s\n", rep.log, c.Tail(rep.log, 1<<20))
	}
	return out.String()
}
