package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// appDir is Crossplane v2's get-started App: an XR composing a Deployment
// and a Service, Kubernetes' own kinds.
var appDir = filepath.Join("..", "..", "examples", "corpus", "app")

var appGVK = schema.GroupVersionKind{Group: "example.crossplane.io", Version: "v1", Kind: "App"}

// installApp installs the App's XRD and the policy `kubectl kausality
// policy derive` wrote for it, as an administrator would, and waits until
// the provider has resolved the policy's targets as unmanaged kinds and
// its webhooks cover Apps.
// The tests that run Apps run in parallel and install it once: two
// writers of the same policy from its file conflict.
func installApp(t *testing.T) {
	t.Helper()
	appInstall.Lock()
	defer appInstall.Unlock()
	if appInstalled {
		return
	}
	installExample(t, appDir, "apps.example.crossplane.io", "apps", []string{"apps"}, policy.ClassUnmanaged,
		schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, schema.GroupVersionKind{Version: "v1", Kind: "Service"})
	appInstalled = !t.Failed()
}

var (
	appInstall   sync.Mutex
	appInstalled bool
)

// appDeployment is the App's Deployment, nil until it exists.
func appDeployment(t *testing.T, key client.ObjectKey) *appsv1.Deployment {
	t.Helper()
	ds := &appsv1.DeploymentList{}
	if err := cp.AdminClient().List(context.Background(), ds, client.InNamespace(key.Namespace), client.MatchingLabels{"crossplane.io/composite": key.Name}); err != nil {
		t.Fatal(err)
	}
	if len(ds.Items) != 1 {
		return nil
	}
	return &ds.Items[0]
}

// createApp has Alice create an App named my-app composed by comp in
// namespace ns, and waits until its Deployment and Service exist.
func createApp(t *testing.T, comp, ns string) (*unstructured.Unstructured, client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	namespace(t, ns)
	app := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"image": "nginx:1.27"}}}
	app.SetGroupVersionKind(appGVK)
	app.SetNamespace(ns)
	app.SetName("my-app")
	_ = unstructured.SetNestedField(app.Object, comp, "spec", "crossplane", "compositionRef", "name")
	if err := alice(t).Create(ctx, app); err != nil {
		t.Fatalf("alice creates App %s/%s: %v", ns, app.GetName(), err)
	}
	key := client.ObjectKeyFromObject(app)
	fixture.Eventually(t, settleTimeout, "the Deployment and the Service to be composed", func() (bool, string) {
		return appDeployment(t, key) != nil && appService(t, key) != nil, describeApp(ctx, key)
	})
	return app, key
}

// appService is the App's Service, nil until it exists.
func appService(t *testing.T, key client.ObjectKey) *corev1.Service {
	t.Helper()
	svcs := &corev1.ServiceList{}
	if err := cp.AdminClient().List(context.Background(), svcs, client.InNamespace(key.Namespace), client.MatchingLabels{"crossplane.io/composite": key.Name}); err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 1 {
		return nil
	}
	return &svcs.Items[0]
}

// appCreated has the administrator report the App's Deployment Available
// (no kubelet runs here: as the deployment controller would once its pods
// run) and waits until the App is Ready and its creation over.
func appCreated(t *testing.T, key client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	available(t, key)
	fixture.Eventually(t, settleTimeout, "the App to be Ready and created", func() (bool, string) {
		x, err := cp.Object(ctx, appGVK, key)
		if err != nil || x == nil {
			return false, fmt.Sprint(err)
		}
		return policy.Ready(x.Object) && policy.ConditionTrue(x.Object, v1alpha1.ConditionCreated), describeApp(ctx, key)
	})
}

func image(d *appsv1.Deployment) string {
	if d == nil || len(d.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// TestV2GetStartedApp: the App of Crossplane v2's get-started guide under
// Kausality on real core. The Deployment and the Service are created
// (a real API server refuses spec.managementPolicies on them, so neither
// gets a gate), traced to Alice. Alice's permitted image change reaches
// the Deployment once; Bob's is denied; a Composition edit no rule and no
// UpgradeAllowance covers leaves the Deployment as it is, and the App
// says why.
func TestV2GetStartedApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	installApp(t)
	comp := compositionFrom(t, filepath.Join(appDir, "composition.yaml"))
	app, key := createApp(t, comp, "v2-app")
	d := appDeployment(t, key)
	if d.Annotations[v1alpha1.AnnotationTrace] == "" || !strings.Contains(d.Annotations[v1alpha1.AnnotationTrace], controlplane.Alice) {
		t.Errorf("Deployment trace %q does not name %s", d.Annotations[v1alpha1.AnnotationTrace], controlplane.Alice)
	}
	if _, ok := d.Labels[v1alpha1.LabelGated]; ok {
		t.Errorf("the Deployment is labelled %s: it has no gate", v1alpha1.LabelGated)
	}
	appCreated(t, key)
	specs := watchSpecs(t, key)

	// Alice's permitted change reaches the Deployment, once.
	if err := controlplane.Update(alice(t), app, func() { _ = unstructured.SetNestedField(app.Object, "nginx:1.28", "spec", "image") }); err != nil {
		t.Fatalf("alice changes the image: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the new image to reach the Deployment", func() (bool, string) {
		d = appDeployment(t, key)
		return image(d) == "nginx:1.28", describeApp(ctx, key)
	})

	// Bob, whom no policy names, cannot change it.
	err := controlplane.Update(as(t, controlplane.Bob), app, func() { _ = unstructured.SetNestedField(app.Object, "evil:latest", "spec", "image") })
	fixture.ErrorContains(t, err, "spec.image", "AllowancePolicy apps")

	// A Composition edit nobody approved: three replicas instead of two.
	edited := compositionFrom(t, filepath.Join(appDir, "cases", "4-composition-change", "composition.yaml"))
	if edited != comp {
		t.Fatalf("the edited Composition is %s, want it to replace %s", edited, comp)
	}
	fixture.Eventually(t, settleTimeout, "the App to withhold the new revision's replicas", func() (bool, string) {
		x, err := cp.Object(ctx, appGVK, key)
		if err != nil || x == nil {
			return false, fmt.Sprint(err)
		}
		c := policy.Condition(x.Object, v1alpha1.ConditionAllowed)
		m, _ := c["message"].(string)
		return c["status"] == "False" && strings.Contains(m, "spec.replicas") && strings.Contains(m, "UpgradeAllowance"), describeApp(ctx, key)
	})
	time.Sleep(2 * controlplane.Poll)
	// Every spec the Deployment had, in order: created with nginx:1.27,
	// Alice's image once, and never three replicas. (A Deployment's
	// generation counts annotation changes too, so it cannot count spec
	// writes.)
	want := []string{"nginx:1.27 ×2", "nginx:1.28 ×2"}
	if diff := cmp.Diff(want, specs()); diff != "" {
		t.Errorf("the Deployment's specs over the test: -want +got:\n%s", diff)
	}
}

// watchSpecs watches the App's Deployment from now on and returns what
// reports, in order, each distinct image and replica count it has had,
// starting with the current one.
func watchSpecs(t *testing.T, key client.ObjectKey) func() []string {
	t.Helper()
	wc, err := client.NewWithWatch(cp.Admin, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(key.Namespace), client.MatchingLabels{"crossplane.io/composite": key.Name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			s := fmt.Sprintf("%s ×%d", image(d), ptr.Deref(d.Spec.Replicas, 0))
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
			mu.Unlock()
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// available reports the App's Deployment Available through its status.
func available(t *testing.T, key client.ObjectKey) {
	t.Helper()
	d := appDeployment(t, key)
	if err := controlplane.UpdateStatus(cp.AdminClient(), d, func() {
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas, d.Status.AvailableReplicas, d.Status.ReadyReplicas = 2, 2, 2
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastTransitionTime: metav1.Now(), LastUpdateTime: metav1.Now()}}
	}); err != nil {
		t.Fatal(err)
	}
}

// describeApp is the App's conditions and its Deployment's image and
// replicas, for a failure message.
func describeApp(ctx context.Context, key client.ObjectKey) string {
	x, err := cp.Object(ctx, appGVK, key)
	if err != nil || x == nil {
		return fmt.Sprintf("App %s: %v", key, err)
	}
	cs, _, _ := unstructured.NestedSlice(x.Object, "status", "conditions")
	var b strings.Builder
	fmt.Fprintf(&b, "App %s conditions:", key)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		fmt.Fprintf(&b, " %v=%v (%v)", m["type"], m["status"], m["message"])
	}
	ds := &appsv1.DeploymentList{}
	if err := cp.AdminClient().List(ctx, ds, client.InNamespace(key.Namespace), client.MatchingLabels{"crossplane.io/composite": key.Name}); err == nil {
		for _, d := range ds.Items {
			fmt.Fprintf(&b, "; Deployment %s generation %d replicas %v image %s", d.Name, d.Generation, d.Spec.Replicas, image(&d))
		}
	}
	return b.String()
}

// TestV2ServiceExposedByCompositionEdit: for a Service, metadata is the
// change. A Composition edit that would make the App's Service an
// internet-facing load balancer with a public DNS name (the AWS load
// balancer controller and external-dns act on its annotations) is
// withheld on real core: the Service keeps its metadata and the App names
// the revision and the UpgradeAllowance that would let it through. Once
// the platform team approves the revision with an UpgradeAllowance for
// Service metadata, the annotations and the label reach the Service, and
// its trace starts at the UpgradeAllowance.
func TestV2ServiceExposedByCompositionEdit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	installApp(t)
	comp := compositionFrom(t, filepath.Join(appDir, "composition.yaml"))
	_, key := createApp(t, comp, "v2-app-exposed")
	appCreated(t, key)
	ns := key.Namespace
	service := func() *corev1.Service { return appService(t, key) }

	const scheme, hostname = "service.beta.kubernetes.io/aws-load-balancer-scheme", "external-dns.alpha.kubernetes.io/hostname"
	exposed := func(s *corev1.Service) bool {
		return s != nil && (s.Annotations[scheme] != "" || s.Annotations[hostname] != "" || s.Labels["exposure"] != "")
	}
	// Every version of the Service from now on: none may be exposed before
	// the UpgradeAllowance exists.
	var (
		mu       sync.Mutex
		approved bool
		early    []string
	)
	wc, err := client.NewWithWatch(cp.Admin, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	w, err := wc.Watch(wctx, &corev1.ServiceList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			s, ok := e.Object.(*corev1.Service)
			mu.Lock()
			if ok && exposed(s) && !approved {
				early = append(early, fmt.Sprintf("%s %v %v", s.ResourceVersion, s.Annotations, s.Labels))
			}
			mu.Unlock()
		}
	}()

	edited := compositionFrom(t, filepath.Join(appDir, "cases", "7-service-exposed", "composition.yaml"))
	if edited != comp {
		t.Fatalf("the edited Composition is %s, want it to replace %s", edited, comp)
	}
	fixture.Eventually(t, settleTimeout, "the App to withhold the new revision's Service metadata", func() (bool, string) {
		x, err := cp.Object(ctx, appGVK, key)
		if err != nil || x == nil {
			return false, fmt.Sprint(err)
		}
		c := policy.Condition(x.Object, v1alpha1.ConditionAllowed)
		m, _ := c["message"].(string)
		return c["status"] == "False" && strings.Contains(m, "metadata.annotations") && strings.Contains(m, "UpgradeAllowance"), describeApp(ctx, key)
	})
	time.Sleep(3 * controlplane.Poll)
	if s := service(); exposed(s) {
		t.Fatalf("the Service was exposed by a revision nobody approved: annotations %v, labels %v", s.Annotations, s.Labels)
	}

	mu.Lock()
	approved = true
	mu.Unlock()
	u := &v1alpha1.UpgradeAllowance{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
metadata: {name: %s-2}
spec:
  compositions: [{name: %s, revision: 2}]
  policies:
  - target: {apiVersion: v1, resource: services}
    relation: ControllerChild
    verbs: [Update]
    mutations:
    - {jsonPath: "metadata.annotations[*]", verbs: [Insert]}
    - {jsonPath: "metadata.labels[*]", verbs: [Insert]}
`, comp, comp)), u); err != nil {
		t.Fatal(err)
	}
	if err := as(t, "admin").Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = as(t, "admin").Delete(context.Background(), u) })
	fixture.Eventually(t, settleTimeout, "the approved revision's metadata to reach the Service", func() (bool, string) {
		s := service()
		if s == nil {
			return false, "no Service"
		}
		return s.Annotations[scheme] == "internet-facing" && s.Annotations[hostname] == "my-app.example.com" && s.Labels["exposure"] == "public",
			fmt.Sprintf("annotations %v labels %v — %s", s.Annotations, s.Labels, describeApp(ctx, key))
	})
	if tr, err := allowance.ParseTrace(service().Annotations[v1alpha1.AnnotationTrace]); err != nil || len(tr) == 0 || tr[0].Kind != v1alpha1.UpgradeAllowanceKind || tr[0].Name != u.GetName() {
		t.Errorf("Service trace = %v (%v), want it to start at UpgradeAllowance %s", kinds(tr), err, u.GetName())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Errorf("the Service was exposed before the UpgradeAllowance existed: %q", early)
	}
}
