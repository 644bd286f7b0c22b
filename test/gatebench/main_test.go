// Package gatebench measures the gate controller at scale: the provider
// binary runs as its own process against a real kube-apiserver and etcd
// (envtest), n gated Buckets of the recording provider's kind get an open
// Update gate, and the test, playing the cloud provider, reports each one's
// observed generation and watches how long the provider takes to close the
// gate again, and how much memory it holds while doing so.
//
//	go test ./test/gatebench/ -run '^$' -bench . -benchtime 1x
//
// needs KUBEBUILDER_ASSETS (make sets it to .cache/bin). -gatebench.rate N
// spreads the measured status writes to N a second (default: all at once);
// GATEBENCH_PROVIDER_ENV sets environment variables of the provider (and
// reference) processes alone, to try runtime settings (GOMEMLIMIT, GOGC).
// The memory figures come with a reference: a bare controller-runtime
// manager (./reference) caching the same Buckets in the same run. TestGateCloses is the
// same run with a few resources, for make test.
package gatebench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// The test's own clients must not be what limits the run: client-go's
// default of 5 requests per second would dominate every figure.
const (
	clientQPS   = 5000
	clientBurst = 10000
)

var (
	env    *envtest.Environment
	admin  *rest.Config
	scheme *runtime.Scheme
	// dir holds the provider binary, its kubeconfig and its logs.
	dir          string
	providerBin  string
	referenceBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run with 'make test' or KUBEBUILDER_ASSETS=$PWD/.cache/bin (make tools builds kube-apiserver and etcd there)")
		return 1
	}
	defer render.Occupy()()
	root := filepath.Join("..", "..")
	var err error
	if dir, err = os.MkdirTemp("", "gatebench-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()

	// Built as make xpkg builds the binary that ships.
	providerBin = filepath.Join(dir, "provider-kausality")
	referenceBin = filepath.Join(dir, "reference")
	for bin, pkg := range map[string]string{providerBin: "./provider", referenceBin: "./test/gatebench/reference"} {
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "cannot build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}

	ctrllog.SetLogger(logr.Discard())
	env = controlplane.Environment(root)
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start kube-apiserver and etcd:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	admin = rest.CopyConfig(cfg)
	admin.QPS, admin.Burst = clientQPS, clientBurst

	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// setup writes the provider's kubeconfig (the provider authenticates as
// the admin, as in test/controlplane) and lets every authenticated user do
// what RBAC would let them: the benchmark is about the gate controller.
func setup() error {
	scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	kube, err := client.New(admin, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := kube.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "everyone-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
	}); err != nil && !kerrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot grant users access: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.CertData, ClientKeyData: admin.KeyData, Token: admin.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, filepath.Join(dir, "kubeconfig"))
}

// as is a client acting as user through impersonation, with the test's
// rate limits.
func as(user string, groups ...string) (client.Client, error) {
	cfg := admin
	if user != "" {
		cfg = fixture.As(admin, user, groups...)
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
