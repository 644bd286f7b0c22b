package controlplane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Secrets `crossplane core init` writes: the root CA that signs every
// package runtime's certificate, and core's client certificate for calling
// functions.
const (
	secretCA     = "crossplane-root-ca"
	secretClient = "crossplane-tls-client"
)

// coreEnv is the environment the chart's Deployment gives core, for init
// and start alike: webhooks off (nothing in this cluster could reach core's
// own webhook service) and the External package runtime.
func (c *ControlPlane) coreEnv(kubeconfig string) []string {
	return []string{
		"KUBECONFIG=" + kubeconfig,
		"POD_NAMESPACE=" + SystemNamespace,
		"ENABLE_WEBHOOKS=false",
		"TLS_CA_SECRET_NAME=" + secretCA,
		"TLS_CLIENT_SECRET_NAME=" + secretClient,
		"CRDS_PATH=" + filepath.Join(c.module, "cluster", "crds"),
		"PACKAGE_RUNTIME=External",
	}
}

// initCore runs `crossplane core init` as Crossplane's service account, as
// the chart's init container does. It races its own CRDs (no matches for
// kind "Lock") and waits on the ClusterRole aggregation; it is idempotent,
// so it is retried.
func (c *ControlPlane) initCore(ctx context.Context) error {
	pod, err := c.controllerPod(ctx, "crossplane-7b9d5c", "crossplane", c.CrossplaneImage())
	if err != nil {
		return err
	}
	kc, err := c.kubeconfig("crossplane", CrossplaneUser, pod)
	if err != nil {
		return err
	}
	return until(ctx, 90*time.Second, func() error {
		cmd := exec.CommandContext(ctx, c.Tools.CrossplaneCore, "core", "init")
		cmd.Env = append(os.Environ(), c.coreEnv(kc)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return errors.Wrapf(err, "crossplane core init: %s", out)
		}
		return nil
	})
}

// startCore starts Crossplane: `crossplane core start` as its service
// account, with the client certificate init made mounted as the chart
// mounts it.
func (c *ControlPlane) startCore(ctx context.Context) error {
	s := &corev1.Secret{}
	if err := c.admin.Get(ctx, client.ObjectKey{Namespace: SystemNamespace, Name: secretClient}, s); err != nil {
		return errors.Wrapf(err, "cannot read secret %s", secretClient)
	}
	certs := filepath.Join(c.Dir, "tls", "crossplane-client")
	if err := writeCerts(certs, s.Data); err != nil {
		return err
	}
	cache := filepath.Join(c.Dir, "xpkg-cache")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return err
	}
	env := append(c.coreEnv(filepath.Join(c.Dir, "crossplane.kubeconfig")),
		"TLS_CLIENT_CERTS_DIR="+certs, "XPKG_CACHE_DIR="+cache,
		// Port 0: any free port, so the suites and the RBAC manager
		// never clash.
		"METRICS_PORT=0", "HEALTH_PROBE_PORT=0")
	// Crossplane's default XR watch circuit breaker (a burst of 100
	// tokens, charged per watch event of a composed resource) opens while
	// an XR of two gated Buckets is created, and on the suite's EKS XR of
	// eight resources, and then holds each to a reconcile every 30 s for
	// 5 minutes (TestV2CircuitBreakerBudget measures the cost;
	// docs/OPERATIONS.md says why the default is not kept). The suite runs
	// with the burst the README recommends, unless asked for the defaults.
	args := []string{"core", "start", "--debug"}
	if !c.sources.CrossplaneDefaults {
		args = append(args, "--circuit-breaker-burst=1000")
	}
	_, err := c.process("crossplane", env, c.Tools.CrossplaneCore, args...)
	return err
}

// startRBACManager starts `crossplane rbac start` as its service account:
// it grants Crossplane and each provider access to the provider's CRDs,
// and aggregates each XRD's kinds to crossplane-edit and friends.
func (c *ControlPlane) startRBACManager(ctx context.Context) error {
	kc, err := c.kubeconfig("rbac-manager", RBACManagerUser, nil)
	if err != nil {
		return err
	}
	env := []string{"KUBECONFIG=" + kc}
	if err := until(ctx, 60*time.Second, func() error {
		cmd := exec.CommandContext(ctx, c.Tools.CrossplaneCore, "rbac", "init")
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return errors.Wrapf(err, "crossplane rbac init: %s", out)
		}
		return nil
	}); err != nil {
		return err
	}
	// The RBAC manager has no flag for its metrics address; the Makefile
	// builds crossplane-core with controller-runtime's default set to 0,
	// so it serves no metrics and no port of the machine is in its way.
	// It is started again should it exit in its first seconds.
	return until(ctx, 3*time.Minute, func() error {
		p, err := c.process("rbac-manager", env, c.Tools.CrossplaneCore, "rbac", "start", "--provider-clusterrole=crossplane:allowed-provider-permissions")
		if err != nil {
			return err
		}
		select {
		case <-p.done:
			return errors.Errorf("the RBAC manager exited: %s", c.Tail("rbac-manager", 3))
		case <-time.After(2 * time.Second):
			return nil
		}
	})
}
