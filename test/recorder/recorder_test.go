package recorder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kausality-io/kausality-crossplane/test/fixture"
	mv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/m/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
)

// poll is how often the reconciler re-observes an up-to-date Bucket.
const poll = time.Second

// timeout bounds every wait.
const timeout = 15 * time.Second

// TestBucketLifecycle drives one Bucket through create, update, observe-only
// drift, and delete, and checks exactly which calls reached the cloud.
func TestBucketLifecycle(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run these tests with 'make test', which builds kube-apiserver and etcd into .cache/bin")
	}

	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("package", "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cannot start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, mv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}

	log := logr.Discard()
	if os.Getenv("KAUSALITY_TEST_LOG") != "" {
		log = zap.New(zap.UseDevMode(true))
	}
	ctrl.SetLogger(log)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 log,
	})
	if err != nil {
		t.Fatalf("cannot create manager: %v", err)
	}
	cloud := NewCloud()
	if err := Setup(mgr, cloud, poll); err != nil {
		t.Fatalf("cannot set up the recording provider: %v", err)
	}
	ctx := start(t, mgr)

	// Read straight from the API server, not through the manager's cache.
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	const name = "b1"
	defer func() {
		if t.Failed() {
			t.Logf("cloud calls: %+v", cloud.Calls())
		}
	}()

	// 1. Full management: the bucket is created once, with size 1.
	b := &v1alpha1.Bucket{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BucketSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
				ManagementPolicies: xpv2.ManagementPolicies{xpv2.ManagementActionAll},
			},
			ForProvider: v1alpha1.BucketParameters{Size: 1, Region: "eu", Tags: map[string]string{"team": "a"}},
		},
	}
	if err := kube.Create(ctx, b); err != nil {
		t.Fatalf("cannot create Bucket: %v", err)
	}
	waitReady(t, kube, name)
	wantCalls(t, cloud, name, VerbCreate, 1, 1)
	wantCalls(t, cloud, name, VerbUpdate, 0, 0)
	wantSize(t, cloud, name, 1)

	// 2. Full management: a spec change is written once.
	change(t, kube, name, func(b *v1alpha1.Bucket) { b.Spec.ForProvider.Size = 2 })
	waitSynced(t, kube, name)
	settle()
	wantCalls(t, cloud, name, VerbUpdate, 1, 2)
	wantSize(t, cloud, name, 2)

	// 3. Observe + LateInitialize: the reconciler sees the drift, reports
	// Synced for the new generation, and writes nothing.
	change(t, kube, name, func(b *v1alpha1.Bucket) {
		b.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionLateInitialize}
	})
	waitSynced(t, kube, name)
	observes := cloud.Count(VerbObserve, name)
	change(t, kube, name, func(b *v1alpha1.Bucket) { b.Spec.ForProvider.Size = 3 })
	got := waitSynced(t, kube, name)
	settle()
	wantCalls(t, cloud, name, VerbUpdate, 1, 2)
	wantSize(t, cloud, name, 2)
	if n := cloud.Count(VerbObserve, name); n <= observes {
		t.Errorf("Observe calls after the size change = %d, want more than %d", n, observes)
	}
	if s := got.GetCondition(xpv2.TypeSynced).Status; s != corev1.ConditionTrue {
		t.Errorf("Synced under observe-only policies = %s, want True", s)
	}

	// 4. Back to full management: the drift is corrected, once.
	change(t, kube, name, func(b *v1alpha1.Bucket) {
		b.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionAll}
	})
	waitSynced(t, kube, name)
	settle()
	wantCalls(t, cloud, name, VerbUpdate, 2, 3)
	wantSize(t, cloud, name, 3)

	// 5. Delete under full management: the bucket is deleted once.
	if err := kube.Delete(ctx, &v1alpha1.Bucket{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("cannot delete Bucket: %v", err)
	}
	fixture.Eventually(t, timeout, "the Bucket to be gone", func() (bool, string) {
		err := kube.Get(ctx, client.ObjectKey{Name: name}, &v1alpha1.Bucket{})
		return kerrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	wantCalls(t, cloud, name, VerbDelete, 1, 0)
	if _, ok := cloud.Get(name); ok {
		t.Errorf("cloud still has %s after delete", name)
	}
	wantCalls(t, cloud, name, VerbCreate, 1, 1)
	wantCalls(t, cloud, name, VerbUpdate, 2, 3)

	// 6. The namespaced (Crossplane v2) Bucket: created, changed and
	// deleted once each, by the same reconciler.
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	const nsName = "nb1"
	nb := &mv1alpha1.Bucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: nsName},
		Spec: mv1alpha1.BucketSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: xpv2.ManagementPolicies{xpv2.ManagementActionAll}},
			ForProvider:         v1alpha1.BucketParameters{Size: 1, Region: "eu"},
		},
	}
	if err := kube.Create(ctx, nb); err != nil {
		t.Fatalf("cannot create the namespaced Bucket: %v", err)
	}
	key := client.ObjectKeyFromObject(nb)
	fixture.Eventually(t, timeout, "the namespaced Bucket to be Ready at its generation", func() (bool, string) {
		if err := kube.Get(ctx, key, nb); err != nil {
			return false, err.Error()
		}
		s, r := nb.GetCondition(xpv2.TypeSynced), nb.GetCondition(xpv2.TypeReady)
		return s.Status == corev1.ConditionTrue && s.ObservedGeneration == nb.GetGeneration() && r.Status == corev1.ConditionTrue, fmt.Sprintf("Synced %s at %d, Ready %s", s.Status, s.ObservedGeneration, r.Status)
	})
	wantCalls(t, cloud, nsName, VerbCreate, 1, 1)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := kube.Get(ctx, key, nb); err != nil {
			return err
		}
		nb.Spec.ForProvider.Size = 2
		return kube.Update(ctx, nb)
	}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, timeout, "the namespaced Bucket's change in the cloud", func() (bool, string) {
		n := cloud.Count(VerbUpdate, nsName)
		return n == 1, fmt.Sprintf("%d Updates", n)
	})
	settle()
	wantCalls(t, cloud, nsName, VerbUpdate, 1, 2)
	if err := kube.Delete(ctx, nb); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, timeout, "the namespaced Bucket to be gone", func() (bool, string) {
		err := kube.Get(ctx, key, &mv1alpha1.Bucket{})
		return kerrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	wantCalls(t, cloud, nsName, VerbDelete, 1, 0)
}

// settle waits long enough for a poll to come and go, so that calls which
// should not happen would have happened.
func settle() { time.Sleep(poll + poll/2) }

// waitSynced waits until the Bucket's Synced condition is True for its
// current generation, and returns the Bucket.
func waitSynced(t *testing.T, kube client.Client, name string) *v1alpha1.Bucket {
	t.Helper()
	b := &v1alpha1.Bucket{}
	fixture.Eventually(t, timeout, "Synced at the current generation", func() (bool, string) {
		if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, b); err != nil {
			return false, err.Error()
		}
		c := b.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionTrue && c.ObservedGeneration == b.GetGeneration(),
			fmt.Sprintf("generation %d, Synced %s (%s) observedGeneration %d", b.GetGeneration(), c.Status, c.Message, c.ObservedGeneration)
	})
	return b
}

// waitReady waits until the Bucket is Synced at its current generation and
// Ready, i.e. re-observed after its creation.
func waitReady(t *testing.T, kube client.Client, name string) {
	t.Helper()
	waitSynced(t, kube, name)
	fixture.Eventually(t, timeout, "Ready", func() (bool, string) {
		b := &v1alpha1.Bucket{}
		if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, b); err != nil {
			return false, err.Error()
		}
		c := b.GetCondition(xpv2.TypeReady)
		return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready %s (%s)", c.Status, c.Reason)
	})
}

// change applies fn to the Bucket and updates it, retrying on conflicts with
// the controller's own writes.
func change(t *testing.T, kube client.Client, name string, fn func(*v1alpha1.Bucket)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &v1alpha1.Bucket{}
		if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, b); err != nil {
			return err
		}
		fn(b)
		return kube.Update(context.Background(), b)
	})
	if err != nil {
		t.Fatalf("cannot update Bucket %s: %v", name, err)
	}
}

// wantCalls checks how many calls of verb the cloud saw for name, and the
// size the last of them carried.
func wantCalls(t *testing.T, cloud *Cloud, name, verb string, n int, lastSize int64) {
	t.Helper()
	if got := cloud.Count(verb, name); got != n {
		t.Fatalf("%s calls for %s = %d, want %d", verb, name, got, n)
	}
	if n == 0 {
		return
	}
	var last Call
	for _, c := range cloud.Calls() {
		if c.Verb == verb && c.Name == name {
			last = c
		}
	}
	if last.Size != lastSize {
		t.Errorf("last %s of %s had size %d, want %d", verb, name, last.Size, lastSize)
	}
}

// wantSize checks the size of the named bucket in the cloud.
func wantSize(t *testing.T, cloud *Cloud, name string, size int64) {
	t.Helper()
	s, ok := cloud.Get(name)
	if !ok {
		t.Fatalf("cloud has no bucket %s", name)
	}
	if s.Size != size {
		t.Errorf("cloud size of %s = %d, want %d", name, s.Size, size)
	}
}

// start runs mgr until the test ends, and returns a context for the
// test's requests.
func start(t *testing.T, mgr ctrl.Manager) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped: %v", err)
		}
	})
	return ctx
}

// TestHoldPrefix: a held prefix holds the writes of every bucket named
// with it until released, and no other.
func TestHoldPrefix(t *testing.T) {
	c := NewCloud()
	release := c.HoldPrefix("midcreate-")
	other := make(chan error, 1)
	go func() { other <- c.write(VerbCreate, "orders-1", State{Size: 1}) }()
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { held <- c.write(VerbCreate, "midcreate-x-1", State{Size: 1}) }()
	select {
	case err := <-held:
		t.Fatalf("a write of a bucket named with the held prefix went through before the release (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if n := c.Count(VerbCreate, "midcreate-x-1"); n != 1 {
		t.Errorf("Creates of the held bucket after the release = %d, want 1", n)
	}
}
