//go:build removal

// Package removal takes Kausality out of a control plane the way
// docs/OPERATIONS.md ("Taking it out") says, on real Crossplane core. It
// deletes the provider package, so it runs on a control plane of its own,
// after the scenario suite: `make removal` (part of `make test`) builds it
// with the removal tag.
package removal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/uninstall"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

var cp *controlplane.ControlPlane

// v2Dir holds the scenario suite's Crossplane v2 XStore chain.
var v2Dir = filepath.Join("..", "e2e", "testdata", "v2")

func TestMain(m *testing.M) {
	os.Exit(controlplane.Suite(m, "kausality-removal-", &cp, func(ctx context.Context) error { return cp.InstallStore(ctx, v2Dir) }))
}

func counts(name string) [3]int {
	return [3]int{cp.Cloud.Count(recorder.VerbCreate, name), cp.Cloud.Count(recorder.VerbUpdate, name), cp.Cloud.Count(recorder.VerbDelete, name)}
}

// TestTakingItOut: an XStore's Buckets are gated; the platform team removes
// the kausality step from the Composition (the Buckets stay gated while the
// provider is there), deletes the provider package (the garbage collector
// takes its webhook configurations, deletion protection policies and CRDs
// with it, so a Bucket can be created without Kausality), and runs
// `kubectl kausality uninstall --yes` (the Buckets get ["*"] and lose
// Kausality's label and annotations). No step calls the cloud; afterwards
// Alice's resize reaches it as on a cluster that never had Kausality.
func TestTakingItOut(t *testing.T) {
	ctx := context.Background()
	const ns = "shop"
	if err := cp.Namespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const comp = "xstores-removal"
	if err := cp.Composition(ctx, filepath.Join(v2Dir, "composition.yaml"), comp); err != nil {
		t.Fatal(err)
	}
	alice, err := cp.As(controlplane.Alice, "platform-team")
	if err != nil {
		t.Fatal(err)
	}
	x := controlplane.NewStore(ns, "shop", "small", comp)
	if err := alice.Create(ctx, x); err != nil {
		t.Fatalf("alice creates XStore shop: %v", err)
	}
	key := client.ObjectKeyFromObject(x)
	if err := cp.WaitStoreSettled(ctx, key, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	bs, err := cp.StoreBuckets(ctx, key)
	if err != nil || len(bs) != 2 {
		t.Fatalf("buckets %v (%v), want data and logs", bs, err)
	}
	calls := map[string][3]int{}
	for _, b := range bs {
		calls[b.GetName()] = counts(b.GetName())
	}

	// 1. The Composition without the kausality step: the provider keeps
	// the Buckets gated.
	raw, err := os.ReadFile(filepath.Join(v2Dir, "composition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &c.Object); err != nil {
		t.Fatal(err)
	}
	steps, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
	steps = slices.DeleteFunc(steps, func(s any) bool { return s.(map[string]any)["step"] == "kausality" })
	_ = unstructured.SetNestedSlice(c.Object, steps, "spec", "pipeline")
	c.SetName(comp)
	if err := cp.Apply(ctx, c); err != nil {
		t.Fatalf("the Composition without the kausality step: %v", err)
	}
	time.Sleep(10 * time.Second)
	for res, b := range buckets(t, key) {
		if b.GetLabels()[v1alpha1.LabelGated] != "true" || !slices.Equal(controlplane.Gate(b), controlplane.ClosedGate) {
			t.Errorf("bucket %s after the step left the Composition: gated %q, gate %v; want it still gated closed while the provider is installed", res, b.GetLabels()[v1alpha1.LabelGated], controlplane.Gate(b))
		}
	}

	// 2. Delete the provider package: everything it wrote goes with it.
	admin := cp.AdminClient()
	if err := admin.Delete(ctx, &pkgv1.Provider{ObjectMeta: metav1.ObjectMeta{Name: controlplane.ProviderKausality}}); err != nil {
		t.Fatalf("the administrator deletes Provider %s: %v", controlplane.ProviderKausality, err)
	}
	fixture.Eventually(t, 2*time.Minute, "the garbage collector to take what provider-kausality wrote", func() (bool, string) {
		var left []string
		for _, o := range []client.Object{
			&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: policycontroller.DynamicName}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: policycontroller.DynamicName}},
			&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "allowancepolicies.kausality.io"}},
		} {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); !kerrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v)", o, o.GetName(), err))
			}
		}
		vaps := &admissionregistrationv1.ValidatingAdmissionPolicyList{}
		if err := admin.List(ctx, vaps, client.MatchingLabels{"kausality.io/managed-by": "provider-kausality"}); err != nil || len(vaps.Items) > 0 {
			left = append(left, fmt.Sprintf("%d ValidatingAdmissionPolicies (%v)", len(vaps.Items), err))
		}
		return len(left) == 0, strings.Join(left, ", ")
	})

	// 3. kubectl kausality uninstall --yes.
	var out bytes.Buffer
	if err := uninstall.Release(ctx, admin, uninstall.Options{Yes: true}, &out); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out.String())
	}
	t.Logf("uninstall:\n%s", out.String())
	for res, b := range buckets(t, key) {
		if _, gated := b.GetLabels()[v1alpha1.LabelGated]; gated || !slices.Equal(controlplane.Gate(b), []string{"*"}) {
			t.Errorf("bucket %s after uninstall: labels %v, gate %v; want no gated label and [*]", res, b.GetLabels(), controlplane.Gate(b))
		}
		for k := range b.GetAnnotations() {
			if strings.HasPrefix(k, "kausality.io/") {
				t.Errorf("bucket %s after uninstall keeps annotation %s", res, k)
			}
		}
	}
	time.Sleep(2 * controlplane.Poll)
	for name, want := range calls {
		if got := counts(name); got != want {
			t.Errorf("bucket %s: cloud calls %v while Kausality was taken out, want %v (none)", name, got, want)
		}
	}

	// Without Kausality: a Bucket is created, Alice's resize reaches the cloud.
	b := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(1), "region": "eu"}}}}
	b.SetGroupVersionKind(controlplane.MBucketGVK)
	b.SetNamespace(ns)
	b.SetName("after")
	if err := alice.Create(ctx, b); err != nil {
		t.Fatalf("alice creates a Bucket without Kausality: %v", err)
	}
	if err := controlplane.Update(alice, x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("alice resizes XStore shop: %v", err)
	}
	data := bs["data"].GetName()
	fixture.Eventually(t, 2*time.Minute, "the new Bucket and the resize to reach the cloud", func() (bool, string) {
		return counts("after") == [3]int{1, 0, 0} && counts(data) == [3]int{1, 1, 0}, fmt.Sprintf("after %v, data %v", counts("after"), counts(data))
	})
}

func buckets(t *testing.T, key client.ObjectKey) map[string]*unstructured.Unstructured {
	t.Helper()
	bs, err := cp.StoreBuckets(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}
