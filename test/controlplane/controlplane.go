// Package controlplane is the control plane the scenario suite and the demo
// run on: real Crossplane core with its RBAC manager, installed and run the
// way a cluster runs them, on a real kube-apiserver and etcd (envtest) with
// kube-controller-manager's ClusterRole aggregation and garbage collector.
//
// Every component is a process authenticated as its own service account
// with the RBAC Crossplane's Helm chart and RBAC manager give it; users
// have namespace-scoped roles. Function-kausality, provider-kausality,
// function-patch-and-transform and the recording provider are installed
// as Function and Provider packages pushed to an in-process OCI registry.
// Crossplane runs them with the External package runtime, which this
// package plays (runtime.go): it starts the function and provider
// processes with certificates signed by Crossplane's CA and tells
// Crossplane where they are.
package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kausality-io/kausality-crossplane/provider/server"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	recordermv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/m/v1alpha1"
	recorderv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// Users of the scenarios. Alice is on the platform team; Bob is not. Both
// have namespace-scoped edit rights only (Namespace).
const (
	Alice = "alice@example.com"
	Bob   = "bob@example.com"
)

// Crossplane's namespace and the service accounts its chart, and the
// runtime configs of the packages, give each component.
const (
	SystemNamespace = "crossplane-system"
	CrossplaneUser  = "system:serviceaccount:" + SystemNamespace + ":crossplane"
	RBACManagerUser = "system:serviceaccount:" + SystemNamespace + ":rbac-manager"
	// CrossplaneSA is Crossplane's service account as the provider's flag
	// takes it.
	CrossplaneSA = SystemNamespace + ":crossplane"
)

// Poll is how often the recording provider re-observes.
const Poll = time.Second

// A ControlPlane is a running control plane.
type ControlPlane struct {
	Root   string
	Dir    string
	Admin  *rest.Config
	Scheme *runtime.Scheme
	Cloud  *recorder.Cloud
	Tools  render.Tools
	// Registry is the OCI registry's host:port the packages come from.
	Registry string

	env     *envtest.Environment
	admin   client.Client
	module  string // the crossplane module's directory
	procs   []*exec.Cmd
	runtime *externalRuntime
	egress  *egress
	stop    []func()
	cancel  context.CancelFunc
	cli     cliBuild
	sources Options
	// packageFiles are the package files the README's install pushes, by
	// the name it gives them (function-kausality.xpkg), where they are not
	// make xpkg's (an earlier release's, built by buildPackages).
	packageFiles map[string]string
}

// Options choose the builds of Kausality a control plane runs.
type Options struct {
	// FunctionSource and ProviderSource are the source trees
	// function-kausality and provider-kausality (binary and package) are
	// built from: the repository (root) when empty, or an earlier
	// release's (Checkout), for the version-skew scenarios.
	FunctionSource, ProviderSource string
	// CrossplaneDefaults runs Crossplane core with every flag at its
	// default, the XR watch circuit breaker's burst included (make
	// breaker-defaults measures what that costs).
	CrossplaneDefaults bool
}

// EnvCrossplaneDefaults set (to anything) has Suite start core with
// Options.CrossplaneDefaults.
const EnvCrossplaneDefaults = "KAUSALITY_CROSSPLANE_DEFAULTS"

// Start brings the control plane up and installs the packages; dir holds
// binaries, kubeconfigs, certificates and logs. KUBEBUILDER_ASSETS must
// point at kube-apiserver and etcd (make sets it to .cache/bin), and `make
// xpkg` must have built the packages into _output.
func Start(ctx context.Context, root, dir string) (*ControlPlane, error) {
	return StartWith(ctx, root, dir, Options{})
}

// StartWith is Start with the builds o chooses.
func StartWith(ctx context.Context, root, dir string, o Options) (*ControlPlane, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run through make, which builds kube-apiserver and etcd into .cache/bin")
	}
	tools, err := render.FindTools(root)
	if err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard())
	if o.FunctionSource == "" {
		o.FunctionSource = root
	}
	if o.ProviderSource == "" {
		o.ProviderSource = root
	}
	c := &ControlPlane{Root: root, Dir: dir, Cloud: recorder.NewCloud(), Tools: tools, sources: o}
	if c.module, err = crossplaneModule(root); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	if c.Scheme, err = scheme(); err != nil {
		return nil, err
	}
	c.env = &envtest.Environment{}
	if err := c.audit(c.env); err != nil {
		return nil, err
	}
	if c.egress, err = startEgress(c.env, c.Dir); err != nil {
		return nil, err
	}
	c.stop = append(c.stop, c.egress.close)
	if c.Admin, err = c.env.Start(); err != nil {
		return nil, errors.Wrap(err, "cannot start kube-apiserver and etcd")
	}
	if c.admin, err = client.New(c.Admin, client.Options{Scheme: c.Scheme}); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel

	steps := []struct {
		what string
		do   func(context.Context) error
	}{
		{"start kube-controller-manager", c.startControllerManager},
		{"install Crossplane's RBAC", c.installRBAC},
		{"run crossplane core init", c.initCore},
		{"start Crossplane", c.startCore},
		{"start the RBAC manager", c.startRBACManager},
		{"start the OCI registry and push the packages", c.pushPackages},
		{"play the External package runtime", func(ctx context.Context) error { return c.startRuntime(ctx, rctx) }},
		{"install the packages", c.installPackages},
		{"bind the recording provider's edit role", c.bindProviderEdit},
		{"wait for provider-kausality's webhooks", func(context.Context) error { return c.runtime.listening() }},
	}
	for _, s := range steps {
		if err := s.do(ctx); err != nil {
			return nil, errors.Wrapf(err, "cannot %s (logs in %s)", s.what, dir)
		}
	}
	ok = true
	return c, nil
}

func scheme() (*runtime.Scheme, error) {
	s, err := server.Scheme()
	if err != nil {
		return nil, err
	}
	for _, add := range []func(*runtime.Scheme) error{recorderv1alpha1.AddToScheme, recordermv1alpha1.AddToScheme, pkgv1.AddToScheme, pkgv1beta1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// kubeconfig writes a kubeconfig for user, the administrator's client
// certificate impersonating user: how each process authenticates as its
// service account. The API server adds the service account groups. With a
// pod, the user's extra names it, as a pod-bound token's does.
func (c *ControlPlane) kubeconfig(name, user string, pod *corev1.Pod) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Admin.Host, CertificateAuthorityData: c.Admin.CAData}
	ai := &clientcmdapi.AuthInfo{ClientCertificateData: c.Admin.CertData, ClientKeyData: c.Admin.KeyData, Token: c.Admin.BearerToken}
	if user != "" {
		ai.Impersonate = user
		ai.ImpersonateUserExtra = fixture.PodExtra(pod)
	}
	cfg.AuthInfos[name] = ai
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: name}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(c.Dir, name+".kubeconfig")
	return path, errors.Wrapf(clientcmd.WriteToFile(*cfg, path), "cannot write %s", path)
}

// A proc is a running process; done is closed when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// process starts bin with args and env, logging to name.log, and kills it
// with the harness.
func (c *ControlPlane) process(name string, env []string, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(c.Log(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // our own and the pinned tools' binaries
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, errors.Wrapf(err, "cannot start %s", name)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	c.procs = append(c.procs, cmd)
	return p, nil
}

// Log is the path of a component's log.
func (c *ControlPlane) Log(name string) string { return filepath.Join(c.Dir, name+".log") }

// Tail is the last n lines of a component's log.
func (c *ControlPlane) Tail(name string, n int) string {
	b, _ := os.ReadFile(c.Log(name))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (c *ControlPlane) startControllerManager(_ context.Context) error {
	kc, err := c.kubeconfig("kube-controller-manager", "", nil)
	if err != nil {
		return err
	}
	_, err = c.process("kube-controller-manager", nil, filepath.Join(c.Root, ".cache", "bin", "kube-controller-manager"),
		"--kubeconfig", kc, "--leader-elect=false", "--secure-port=0",
		// Each controller acts as its own service account, as kubeadm
		// runs it: the garbage collector is
		// system:serviceaccount:kube-system:generic-garbage-collector.
		"--use-service-account-credentials=true",
		"--controllers=clusterrole-aggregation,garbagecollector")
	return err
}

// Apply creates objs as the administrator, or updates them to what objs
// say when they exist.
func (c *ControlPlane) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := c.admin.Create(ctx, o.DeepCopy()); err != nil {
			if !kerrors.IsAlreadyExists(err) {
				return errors.Wrapf(err, "cannot create %s %s", o.GetKind(), o.GetName())
			}
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.admin.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			u := o.DeepCopy()
			u.SetResourceVersion(cur.GetResourceVersion())
			if err := c.admin.Update(ctx, u); err != nil {
				return errors.Wrapf(err, "cannot update %s %s", o.GetKind(), o.GetName())
			}
		}
	}
	return nil
}

// ApplyFile applies every object of a YAML file, retrying while webhooks
// come up.
func (c *ControlPlane) ApplyFile(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path) //nolint:gosec // the suite's own test data
	if err != nil {
		return err
	}
	objs, err := decodeAll(raw)
	if err != nil {
		return errors.Wrapf(err, "cannot decode %s", path)
	}
	return until(ctx, 60*time.Second, func() error { return c.Apply(ctx, objs...) })
}

// until calls fn until it succeeds or d passes, and returns its last error.
func until(ctx context.Context, d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Stop ends everything Start started.
func (c *ControlPlane) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	for i := len(c.stop) - 1; i >= 0; i-- {
		c.stop[i]()
	}
	for _, p := range c.procs {
		if p.Process != nil {
			_ = p.Process.Signal(syscall.SIGKILL)
		}
	}
	if c.env != nil {
		_ = c.env.Stop()
	}
}

// Races returns the data races the race detector reported in the logs of
// provider-kausality and function-kausality, which the control plane
// builds with -race, or "" when there were none.
func (c *ControlPlane) Races() string {
	var out strings.Builder
	names := []string{"function-kausality", ProviderKausality}
	if c.runtime != nil && c.runtime.provider != nil {
		for _, rep := range c.runtime.provider.replicas[1:] {
			names = append(names, rep.log)
		}
	}
	for _, name := range names {
		raw, err := os.ReadFile(c.Log(name))
		if err != nil {
			continue
		}
		if i := strings.Index(string(raw), "WARNING: DATA RACE"); i >= 0 {
			end := min(len(raw), i+4000)
			fmt.Fprintf(&out, "%s (%s):\n%s\n", name, c.Log(name), raw[i:end])
		}
	}
	return out.String()
}

func (c *ControlPlane) String() string {
	return fmt.Sprintf("control plane at %s (logs in %s)", c.Admin.Host, c.Dir)
}
