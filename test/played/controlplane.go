// Package played is the played Crossplane the scenarios ran on before they
// moved to real Crossplane core (test/controlplane): the real `crossplane
// render` applied by server-side apply as Crossplane's service account, on
// envtest, every user cluster-admin. It is kept only for the scenarios and
// the demo not yet moved (issue 10) and goes away with them.
package played

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kausality-io/kausality-crossplane/provider/server"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	recorderv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// Users of the scenarios. Alice is on the platform team; Bob is not.
const (
	Alice          = "alice@example.com"
	Bob            = "bob@example.com"
	CrossplaneUser = "system:serviceaccount:crossplane-system:crossplane"
	// CrossplaneSA is Crossplane's service account as the provider's flag
	// takes it.
	CrossplaneSA = "crossplane-system:crossplane"
)

// Poll is how often the recording provider re-observes.
const Poll = time.Second

// A ControlPlane is a running embedded control plane.
type ControlPlane struct {
	Root   string
	Dir    string
	Admin  *rest.Config
	Scheme *runtime.Scheme
	Cloud  *recorder.Cloud
	Tools  render.Tools
	// Functions is the functions.yaml pointing at the running functions.
	Functions string

	env         *envtest.Environment
	provider    *exec.Cmd
	providerBin string
	fns         *render.Functions
	cancel      context.CancelFunc
}

// Start brings the control plane up; dir holds binaries, kubeconfig and
// logs. KUBEBUILDER_ASSETS must point at kube-apiserver and etcd (make sets
// it to .cache/bin).
func Start(ctx context.Context, root, dir string) (*ControlPlane, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run through make, which builds kube-apiserver and etcd into .cache/bin")
	}
	tools, err := render.FindTools(root)
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{Root: root, Dir: dir, Cloud: recorder.NewCloud(), Tools: tools}
	c.env = controlplane.Environment(root)
	if c.Admin, err = c.env.Start(); err != nil {
		return nil, errors.Wrap(err, "cannot start kube-apiserver and etcd")
	}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	if c.Scheme, err = server.Scheme(); err != nil {
		return nil, err
	}
	if err := recorderv1alpha1.AddToScheme(c.Scheme); err != nil {
		return nil, err
	}
	admin, err := client.New(c.Admin, client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, err
	}
	// The scenarios are about what Kausality allows, not RBAC.
	if err := admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "everyone-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
	}); err != nil && !kerrors.IsAlreadyExists(err) {
		return nil, errors.Wrap(err, "cannot grant users access")
	}

	rctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	rec, err := ctrl.NewManager(c.Admin, ctrl.Options{Scheme: c.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()})
	if err != nil {
		return nil, errors.Wrap(err, "cannot create the recording provider")
	}
	if err := recorder.Setup(rec, c.Cloud, Poll); err != nil {
		return nil, err
	}
	go func() { _ = rec.Start(rctx) }()

	c.providerBin = filepath.Join(dir, "provider-kausality")
	build := exec.CommandContext(ctx, "go", "build", "-o", c.providerBin, "./provider")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, errors.Wrapf(err, "cannot build provider-kausality: %s", out)
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	if err := c.StartProvider(); err != nil {
		return nil, err
	}

	kausality, err := freeAddress()
	if err != nil {
		return nil, err
	}
	pat, err := freeAddress()
	if err != nil {
		return nil, err
	}
	if c.fns, err = render.StartFunctions(ctx, root, dir, tools, render.FunctionOptions{KausalityAddress: kausality, PatchTransformAddress: pat}); err != nil {
		return nil, err
	}
	c.Functions = filepath.Join(dir, "functions.yaml")
	if err := os.WriteFile(c.Functions, []byte(fmt.Sprintf(functionsYAML, pat, kausality)), 0o600); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

const functionsYAML = `apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-patch-and-transform
  annotations:
    render.crossplane.io/runtime: Development
    render.crossplane.io/runtime-development-target: %s
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.7
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-kausality
  annotations:
    render.crossplane.io/runtime: Development
    render.crossplane.io/runtime-development-target: %s
spec:
  package: xpkg.crossplane.io/kausality-io/function-kausality:v0.1.0
`

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.Wrap(err, "cannot find a free port")
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func (c *ControlPlane) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Admin.Host, CertificateAuthorityData: c.Admin.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Admin.CertData, ClientKeyData: c.Admin.KeyData, Token: c.Admin.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	return errors.Wrap(clientcmd.WriteToFile(*cfg, filepath.Join(c.Dir, "kubeconfig")), "cannot write the kubeconfig")
}

// StartProvider starts the provider binary and waits until its webhook
// server listens.
func (c *ControlPlane) StartProvider() error {
	wo := c.env.WebhookInstallOptions
	logf, err := os.OpenFile(filepath.Join(c.Dir, "provider.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.providerBin, //nolint:gosec // our own binary
		"--webhook-port", strconv.Itoa(wo.LocalServingPort), "--webhook-certs", wo.LocalServingCertDir,
		"--metrics-address", "0", "--health-address", "0", "--discovery-interval", "1s",
		"--crossplane-service-account", CrossplaneSA, "--max-gate-open", "10m", "--debug")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(c.Dir, "kubeconfig"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return errors.Wrap(err, "cannot start provider-kausality")
	}
	c.provider = cmd
	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			return conn.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Errorf("provider-kausality does not listen on %s; see %s", addr, filepath.Join(c.Dir, "provider.log"))
}

// KillProvider kills the provider process, as a crash would.
func (c *ControlPlane) KillProvider() {
	if c.provider == nil {
		return
	}
	_ = c.provider.Process.Signal(syscall.SIGKILL)
	_, _ = c.provider.Process.Wait()
	c.provider = nil
}

// ProviderLog is the provider's log so far.
func (c *ControlPlane) ProviderLog() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "provider.log"))
	return string(b)
}

// As is a client acting as user, through impersonation.
func (c *ControlPlane) As(user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(c.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return client.New(cfg, client.Options{Scheme: c.Scheme})
}

// Stop ends everything Start started.
func (c *ControlPlane) Stop() {
	c.KillProvider()
	c.fns.Stop()
	if c.cancel != nil {
		c.cancel()
	}
	if c.env != nil {
		_ = c.env.Stop()
	}
}
