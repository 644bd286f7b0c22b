package controlplane

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// supervise restarts provider-kausality when it exits, as Kubernetes
// restarts a crashed container (it exits when it starts before its CRDs
// are served), unless KillProvider stopped it, until ctx ends.
func (r *externalRuntime) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		r.mu.Lock()
		p := r.provider
		if p.cmd != nil && p.exited() && !p.down {
			if err := r.startProvider(); err != nil {
				appendLog(r.c.Log("runtime"), err.Error())
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (p *providerProcess) exited() bool {
	select {
	case <-p.done:
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

// startProvider starts provider-kausality. The caller holds r.mu.
func (r *externalRuntime) startProvider() error {
	p := r.provider
	pr, err := r.c.process(ProviderKausality, []string{"KUBECONFIG=" + p.kubeconfig}, p.bin,
		"--webhook-host", webhookHost, "--webhook-port", "9443", "--webhook-certs", p.certs,
		"--metrics-address", "0", "--health-address", "0", "--discovery-interval", "1s",
		"--crossplane-service-account", CrossplaneSA, "--max-gate-open", MaxGateOpen.String(), "--debug")
	if err != nil {
		return err
	}
	p.cmd, p.done, p.down = pr.cmd, pr.done, false
	return nil
}

// listening waits until provider-kausality's webhook server listens.
func (r *externalRuntime) listening() error {
	addr := net.JoinHostPort(webhookHost, "9443")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			return conn.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Errorf("provider-kausality does not listen on %s; see %s", addr, r.c.Log(ProviderKausality))
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

// StartProvider starts provider-kausality again after KillProvider and
// waits until its webhooks listen.
func (c *ControlPlane) StartProvider() error {
	c.runtime.mu.Lock()
	err := c.runtime.startProvider()
	c.runtime.mu.Unlock()
	if err != nil {
		return err
	}
	return c.runtime.listening()
}

// KillProvider kills provider-kausality, as a crash would.
func (c *ControlPlane) KillProvider() {
	c.runtime.mu.Lock()
	defer c.runtime.mu.Unlock()
	if p := c.runtime.provider; p != nil && p.cmd != nil {
		p.down = true
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// ProviderLog is provider-kausality's log so far.
func (c *ControlPlane) ProviderLog() string { return c.Tail(ProviderKausality, 1<<20) }
