// Package envtest runs the provider against a real kube-apiserver and
// etcd: its webhooks registered through the API server from the package's
// webhook configuration, requests made as different users through
// impersonation, the gate controller on real watches and the recording
// provider (crossplane-runtime's managed reconciler) as the MR controller.
package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/provider/server"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	recordermv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/m/v1alpha1"
	recorderv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// Users the tests act as. Alice is on the platform team; Bob is not.
const (
	alice      = "alice@example.com"
	bob        = "bob@example.com"
	crossplane = "system:serviceaccount:crossplane-system:crossplane"
)

// poll is how often the recording provider re-observes.
const poll = time.Second

var (
	env      *envtest.Environment
	admin    *rest.Config
	scheme   *runtime.Scheme
	cloud    = recorder.NewCloud()
	provider manager.Manager
	// clock is the provider's clock; tests move it forward to expire gates.
	clock = &testClock{}
	// crossplanePod is the pod Crossplane's requests come from.
	crossplanePod *corev1.Pod
)

type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests with 'make test', which builds kube-apiserver and etcd into .cache/bin")
		return 1
	}
	defer render.Occupy()()
	root := filepath.Join("..", "..")
	env = controlplane.Environment(root)
	var err error
	if admin, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot start kube-apiserver and etcd:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// start runs the provider and the recording provider (as the envtest
// administrator), and gives users edit rights, not cluster-admin, so every
// webhook path is exercised by non-admin users.
func start(ctx context.Context) error {
	var err error
	if scheme, err = server.Scheme(); err != nil {
		return err
	}
	for _, add := range []func(*runtime.Scheme) error{recorderv1alpha1.AddToScheme, recordermv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	kube, err := client.New(admin, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	for _, o := range []client.Object{
		// Users (Alice, Bob, Carol) and Crossplane's service account edit
		// Claims, composites and Buckets, their status included, and read
		// Kausality's kinds, as crossplane-edit bound cluster-wide would
		// let them; only "admin" may write AllowancePolicies and
		// Namespaces.
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "kausality-test-edit"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"example.com"}, Resources: []string{"*"}, Verbs: []string{"*"}},
				{APIGroups: []string{recorderv1alpha1.Group}, Resources: []string{"buckets", "buckets/status"}, Verbs: []string{"*"}},
				{APIGroups: []string{v1alpha1.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"namespaces", "events"}, Verbs: []string{"get", "list", "watch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "kausality-test-edit"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kausality-test-edit"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "admin-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "admin"},
				{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "admin-reader"}},
		},
	} {
		if err := kube.Create(ctx, o); err != nil {
			return fmt.Errorf("cannot grant users access: %w", err)
		}
	}

	// Crossplane acts from its pod, with a pod-bound token, as on a
	// cluster: admission knows its build (a token bound to no pod is an
	// unknown build's).
	xpPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: "crossplane-0"},
		Spec: corev1.PodSpec{ServiceAccountName: "crossplane", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "main", Image: "xpkg.crossplane.io/crossplane/crossplane:v2.3.4"}}},
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: "crossplane"}},
		xpPod,
	} {
		if err := kube.Create(ctx, o); err != nil {
			return fmt.Errorf("cannot create Crossplane's pod: %w", err)
		}
	}
	crossplanePod = xpPod

	log := logr.Discard()
	if os.Getenv("KAUSALITY_TEST_LOG") != "" {
		log = zap.New(zap.UseDevMode(true))
	}
	ctrl.SetLogger(log)
	wo := env.WebhookInstallOptions
	if provider, err = server.New(ctx, admin, server.Options{
		MetricsAddress: "0", HealthAddress: "0",
		WebhookHost: wo.LocalServingHost, WebhookPort: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		StaticWebhook: "provider-kausality", CrossplaneUser: crossplane,
		Gate: gate.Config{MaxOpen: 10 * time.Minute}, DiscoveryInterval: time.Hour, Now: clock.Now, Log: logging.NewLogrLogger(log),
		// Crossplane's Composition CRDs are in test/crds; only annotated
		// Compositions get a derived policy (derivation_test.go).
		DerivePolicies: true,
	}); err != nil {
		return fmt.Errorf("cannot create the provider: %w", err)
	}
	go func() {
		if err := provider.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "provider stopped:", err)
		}
	}()

	rec, err := ctrl.NewManager(admin, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: log})
	if err != nil {
		return fmt.Errorf("cannot create the recording provider: %w", err)
	}
	if err := recorder.Setup(rec, cloud, poll); err != nil {
		return fmt.Errorf("cannot set up the recording provider: %w", err)
	}
	go func() {
		if err := rec.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "recording provider stopped:", err)
		}
	}()

	for _, y := range suitePolicies {
		p := &v1alpha1.AllowancePolicy{}
		if err := yaml.Unmarshal([]byte(y), p); err != nil {
			return fmt.Errorf("bad policy fixture: %w", err)
		}
		// The policy webhook answers once the provider's webhook server is
		// up; until then creation fails closed.
		deadline := time.Now().Add(60 * time.Second)
		for err := kube.Create(ctx, p); err != nil; err = kube.Create(ctx, p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("cannot create AllowancePolicy %s: %w", p.GetName(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// as is a client acting as user, through impersonation; warnings the API
// server returns are collected into warnings when it is not nil.
func as(t testing.TB, user string, groups ...string) client.Client {
	t.Helper()
	cfg := fixture.As(admin, user, groups...)
	if user == crossplane {
		cfg = fixture.FromPod(cfg, crossplanePod)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("cannot create a client for %s: %v", user, err)
	}
	return c
}

// warningsAs is like as and also returns the API server's warnings.
func warningsAs(t testing.TB, user string, groups ...string) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := fixture.As(admin, user, groups...)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("cannot create a client for %s: %v", user, err)
	}
	return c, w
}

type warnings struct{ got []string }

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) { w.got = append(w.got, text) }

// waitForRules waits until the provider's dynamic webhooks cover resource.
func waitForRules(t testing.TB, resource string) {
	t.Helper()
	if err := controlplane.WaitForRules(context.Background(), as(t, "admin-reader"), resource); err != nil {
		t.Fatal(err)
	}
}
