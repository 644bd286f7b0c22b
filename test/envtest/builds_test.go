package envtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// controllerPod creates the pod a controller runs in, as a cluster has it:
// in crossplane-system, under the controller's service account, running
// image. Nothing runs it here; admission only reads which images it names.
func controllerPod(t *testing.T, name, serviceAccount, image string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	kube := as(t, "admin")
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: serviceAccount}},
	} {
		if err := kube.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: serviceAccount, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
	if err := kube.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// fromPod is a client acting as user with a token bound to pod p: the API
// server then names the pod in the user's extra, which impersonation
// reproduces.
func fromPod(t *testing.T, user string, p *corev1.Pod) client.Client {
	t.Helper()
	c, err := client.New(fixture.FromPod(fixture.As(admin, user, "system:serviceaccounts"), p), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCrossplaneUpgradeNeedsUpgradeAllowance: Crossplane upgraded to a new
// build writes a change no allowance ships. Without an UpgradeAllowance for
// its service account the write is denied and the cloud sees nothing; with
// one it is admitted, its build recorded, and the change reaches the cloud
// once, traced to the UpgradeAllowance.
func TestCrossplaneUpgradeNeedsUpgradeAllowance(t *testing.T) {
	ctx := context.Background()
	waitForRules(t, "xdatabases")
	waitForRules(t, "buckets")
	const oldImage, newImage = "xpkg.crossplane.io/crossplane/crossplane:v2.1.0", "xpkg.crossplane.io/crossplane/crossplane:v2.1.1"
	oldPod := controllerPod(t, "crossplane-6d4b8", "crossplane", oldImage)
	newPod := controllerPod(t, "crossplane-9c7f2", "crossplane", newImage)
	oldXP, newXP := fromPod(t, crossplane, oldPod), fromPod(t, crossplane, newPod)

	cloud.Put("upgraded-1", recorder.State{Size: 1, Region: "eu"})
	xr := object("XDatabase", "", "upgraded-x", map[string]any{"size": "1"}, nil)
	if err := as(t, alice, "platform-team").Create(ctx, xr); err != nil {
		t.Fatal(err)
	}
	reconciled(t, xr)
	b := bucket("upgraded-1", 1, xr)
	if err := oldXP.Create(ctx, b); err != nil {
		t.Fatalf("Crossplane v2.1.0 creates the gated Bucket: %v", err)
	}
	waitReconciled(t, oldXP, b)
	record := func() logic.Controllers {
		t.Helper()
		if err := as(t, "admin").Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			t.Fatal(err)
		}
		c, err := logic.ParseControllers(b.GetAnnotations()[v1alpha1.AnnotationControllerBuilds])
		if err != nil {
			t.Fatalf("the controller record of %s: %v", b.GetName(), err)
		}
		return c
	}
	if got, want := record()[crossplane], logic.BuildHash([]string{oldImage}); got != want {
		t.Fatalf("build recorded for %s = %q, want v2.1.0's %q", crossplane, got, want)
	}

	// The new build writes a region nothing caused.
	moveRegion := func(c client.Client) error {
		return controlplane.Update(c, b, func() { _ = unstructured.SetNestedField(b.Object, "us", "spec", "forProvider", "region") })
	}
	err := moveRegion(newXP)
	if err == nil || !strings.Contains(err.Error(), "runs a new build ("+newImage) || !strings.Contains(err.Error(), "spec.forProvider.region of Bucket upgraded-1") {
		t.Fatalf("Crossplane v2.1.1's uncaused region change: error %v, want a denial naming the new build and the field", err)
	}
	t.Logf("denied: %v", err)
	if got := record()[crossplane]; got != logic.BuildHash([]string{oldImage}) {
		t.Errorf("a denied write moved the record to %q", got)
	}

	// An UpgradeAllowance for Crossplane's service account covering it.
	ua := &v1alpha1.UpgradeAllowance{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`metadata: {name: crossplane-2-1-1}
spec:
  serviceAccount: %s
  policies:
  - target: {apiGroup: recorder.kausality.io, resource: buckets}
    verbs: [Update]
    mutations: [{jsonPath: spec.forProvider.region, verbs: [Mutate]}]
  - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
    relation: External
    verbs: [Update]`, crossplane)), ua); err != nil {
		t.Fatal(err)
	}
	if err := as(t, "admin").Create(ctx, ua); err != nil {
		t.Fatal(err)
	}
	if err := moveRegion(newXP); err != nil {
		t.Fatalf("Crossplane v2.1.1's region change under UpgradeAllowance %s: %v", ua.GetName(), err)
	}
	if got, want := record()[crossplane], logic.BuildHash([]string{newImage}); got != want {
		t.Errorf("build recorded after the upgrade = %q, want v2.1.1's %q", got, want)
	}
	var fromUpgrade []allowance.Allowance
	for _, a := range fixture.Allowances(t, b) {
		if a.FromUpgrade() && a.Trace[0].Name == ua.GetName() {
			fromUpgrade = append(fromUpgrade, a)
		}
	}
	if len(fromUpgrade) != 1 || !fromUpgrade[0].HasVerb(v1alpha1.VerbUpdate) {
		t.Fatalf("allowances traced to %s: %+v, want one External Update", ua.GetName(), fromUpgrade)
	}
	fixture.Eventually(t, 30*time.Second, "the region to reach the cloud", func() (bool, string) {
		s, _ := cloud.Get("upgraded-1")
		return s.Region == "us", fmt.Sprintf("cloud region %q", s.Region)
	})
	fixture.Eventually(t, 30*time.Second, "the gate to close", func() (bool, string) {
		_ = as(t, "admin").Get(ctx, client.ObjectKeyFromObject(b), b)
		return !strings.Contains(fmt.Sprint(policiesOf(b)), "Update"), fmt.Sprint(policiesOf(b))
	})
	if n := cloud.Count(recorder.VerbUpdate, "upgraded-1"); n != 1 {
		t.Errorf("the cloud saw %d Updates, want exactly 1", n)
	}
}
