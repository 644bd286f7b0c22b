package recorder

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestRealKindLifecycle drives a managed resource of a real provider kind,
// served from its CRD alone, through create, update, observe-only drift and
// delete, and checks exactly which calls reached the cloud, what the
// provider reported back and the connection secret it wrote.
func TestRealKindLifecycle(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run these tests with 'make test', which builds kube-apiserver and etcd into .cache/bin")
	}
	dir := filepath.Join("package", "crds")
	kinds, err := KindsIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	instance := schema.GroupVersionKind{Group: "rds.aws.m.upbound.io", Version: "v1beta1", Kind: "Instance"}
	if !slices.Contains(kinds, instance) {
		t.Fatalf("KindsIn(%s) = %v, want it to hold %s", dir, kinds, instance)
	}

	env := &envtest.Environment{CRDDirectoryPaths: []string{dir}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cannot start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	cloud := NewCloud()
	if err := SetupKinds(mgr, cloud, poll, kinds...); err != nil {
		t.Fatal(err)
	}
	ctx := start(t, mgr)
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("cloud calls: %+v", cloud.Calls())
		}
	}()

	// The CRD's required-parameter rule is the real one: it binds only
	// while the management policies let the provider create or update.
	cluster := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": map[string]any{"region": "eu-central-1"}}}}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Kind: "Cluster"})
	cluster.SetNamespace("team-a")
	cluster.SetName("c1")
	if err := kube.Create(ctx, cluster.DeepCopy()); err == nil || !kerrors.IsInvalid(err) {
		t.Errorf("creating a Cluster without vpcConfig under [\"*\"]: got %v, want the CRD's rule to refuse it", err)
	}
	cluster.Object["spec"].(map[string]any)["managementPolicies"] = []any{"Observe"}
	if err := kube.Create(ctx, cluster); err != nil {
		t.Errorf("creating a Cluster without vpcConfig that only observes: %v", err)
	}

	const name = "db1"
	db := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"forProvider":                map[string]any{"region": "eu-central-1", "instanceClass": "db.t3.micro", "allocatedStorage": int64(20)},
		"writeConnectionSecretToRef": map[string]any{"name": "db1-conn"},
	}}}
	db.SetGroupVersionKind(instance)
	db.SetNamespace("team-a")
	db.SetName(name)
	key := client.ObjectKeyFromObject(db)
	if err := kube.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	synced := func(what string, more func(*unstructured.Unstructured) (bool, string)) *unstructured.Unstructured {
		t.Helper()
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(instance)
		fixture.Eventually(t, timeout, what, func() (bool, string) {
			if err := kube.Get(ctx, key, got); err != nil {
				return false, err.Error()
			}
			s := condition(got, xpv2.TypeSynced)
			if s.Status != corev1.ConditionTrue || s.ObservedGeneration != got.GetGeneration() {
				return false, fmt.Sprintf("Synced %s at generation %d of %d", s.Status, s.ObservedGeneration, got.GetGeneration())
			}
			return more(got)
		})
		return got
	}
	got := synced("the Instance to be created and Ready", func(u *unstructured.Unstructured) (bool, string) {
		r := condition(u, xpv2.TypeReady)
		return r.Status == corev1.ConditionTrue, fmt.Sprintf("Ready %s", r.Status)
	})
	wantObjectCalls(t, cloud, "Instance", name, map[string]int{VerbCreate: 1, VerbUpdate: 0, VerbDelete: 0})
	if id, _, _ := unstructured.NestedString(got.Object, "status", "atProvider", "id"); id != ObjectID("Instance", name) {
		t.Errorf("status.atProvider.id = %q, want %q", id, ObjectID("Instance", name))
	}
	if s, _, _ := unstructured.NestedInt64(got.Object, "status", "atProvider", "allocatedStorage"); s != 20 {
		t.Errorf("status.atProvider.allocatedStorage = %d, want 20", s)
	}
	secret := &corev1.Secret{}
	fixture.Eventually(t, timeout, "the connection secret", func() (bool, string) {
		err := kube.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "db1-conn"}, secret)
		return err == nil, fmt.Sprint(err)
	})
	if string(secret.Data["id"]) != ObjectID("Instance", name) || len(secret.Data["endpoint"]) == 0 || string(secret.Data["username"]) != name || len(secret.Data["password"]) == 0 {
		t.Errorf("connection secret data = %v, want id, endpoint, username and password", secret.Data)
	}

	edit := func(fn func(u *unstructured.Unstructured)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(instance)
			if err := kube.Get(ctx, key, u); err != nil {
				return err
			}
			fn(u)
			return kube.Update(ctx, u)
		}); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(50), "spec", "forProvider", "allocatedStorage")
	})
	synced("the resize to be applied", func(*unstructured.Unstructured) (bool, string) {
		n := cloud.CountObject(VerbUpdate, "Instance", name)
		return n == 1, fmt.Sprintf("%d Updates", n)
	})
	settle()
	wantObjectCalls(t, cloud, "Instance", name, map[string]int{VerbCreate: 1, VerbUpdate: 1})
	if s, _ := cloud.GetObject("Instance", name); s["allocatedStorage"] != int64(50) {
		t.Errorf("cloud allocatedStorage = %v, want 50", s["allocatedStorage"])
	}

	// Observe only: the drift is seen and nothing is written.
	edit(func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"Observe"}, "spec", "managementPolicies")
		_ = unstructured.SetNestedField(u.Object, int64(80), "spec", "forProvider", "allocatedStorage")
	})
	synced("the observe-only generation to be observed", func(*unstructured.Unstructured) (bool, string) { return true, "" })
	settle()
	wantObjectCalls(t, cloud, "Instance", name, map[string]int{VerbCreate: 1, VerbUpdate: 1})

	edit(func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"*"}, "spec", "managementPolicies")
	})
	synced("the drift to be corrected", func(*unstructured.Unstructured) (bool, string) {
		n := cloud.CountObject(VerbUpdate, "Instance", name)
		return n == 2, fmt.Sprintf("%d Updates", n)
	})
	if err := kube.Delete(ctx, db); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, timeout, "the Instance to be gone", func() (bool, string) {
		err := kube.Get(ctx, key, &unstructured.Unstructured{Object: map[string]any{"apiVersion": instance.GroupVersion().String(), "kind": instance.Kind}})
		return kerrors.IsNotFound(err), fmt.Sprint(err)
	})
	wantObjectCalls(t, cloud, "Instance", name, map[string]int{VerbCreate: 1, VerbUpdate: 2, VerbDelete: 1})
	if _, ok := cloud.GetObject("Instance", name); ok {
		t.Errorf("the cloud still has Instance %s", name)
	}
}

func condition(u *unstructured.Unstructured, ct xpv2.ConditionType) xpv2.Condition {
	return (&composed.Unstructured{Unstructured: *u}).GetCondition(ct)
}

// wantObjectCalls checks how many calls of each verb the cloud saw for the
// resource of kind named name.
func wantObjectCalls(t *testing.T, cloud *Cloud, kind, name string, want map[string]int) {
	t.Helper()
	for verb, n := range want {
		if got := cloud.CountObject(verb, kind, name); got != n {
			t.Errorf("%s calls for %s %s = %d, want %d", verb, kind, name, got, n)
		}
	}
}
