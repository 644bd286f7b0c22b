// Package e2e plays the accident scenarios across the whole chain on real
// Crossplane (test/controlplane): core, its RBAC manager and the packages
// installed from a registry, users with namespace-scoped edit rights
// writing Claims through the provider's admission webhooks, Crossplane
// composing with function-patch-and-transform and function-kausality, the
// gate controller opening and closing gates, and the recording provider
// showing what the cloud saw. Scenarios wait on objects and conditions,
// never on a number of reconciles.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

var cp *controlplane.ControlPlane

// settleTimeout bounds how long a scenario waits for the chain to settle.
const settleTimeout = 90 * time.Second

func TestMain(m *testing.M) { os.Exit(controlplane.Suite(m, "kausality-e2e-", &cp, setup)) }

// setup installs the scenarios' XRDs (the database example's, legacy, and
// the Crossplane v2 XStore) and AllowancePolicies, and waits until the
// provider's webhooks cover them.
func setup(ctx context.Context) error {
	if err := cp.InstallDatabase(ctx, filepath.Join("testdata", "policies.yaml")); err != nil {
		return err
	}
	return cp.InstallStore(ctx, v2Dir)
}

func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	c, err := cp.As(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func alice(t *testing.T) client.Client { return as(t, controlplane.Alice, "platform-team") }

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// composition applies testdata/composition-<revision>.yaml as the test's
// own Composition and returns its name.
func composition(t *testing.T, revision int) string {
	t.Helper()
	return compositionFrom(t, filepath.Join("testdata", fmt.Sprintf("composition-%d.yaml", revision)))
}

// compositionFrom applies the Composition in file as the test's own
// Composition and returns its name.
func compositionFrom(t *testing.T, file string) string {
	t.Helper()
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if err := cp.Composition(context.Background(), file, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func namespace(t *testing.T, name string) {
	t.Helper()
	if err := cp.Namespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

// namespaceMode has the administrator set the Namespace's kausality.io/mode
// to m, or remove it when m is "".
func namespaceMode(t *testing.T, name, m string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := controlplane.Update(as(t, "admin"), ns, func() {
		if m == "" {
			delete(ns.Annotations, v1alpha1.AnnotationMode)
			return
		}
		metav1.SetMetaDataAnnotation(&ns.ObjectMeta, v1alpha1.AnnotationMode, m)
	}); err != nil {
		t.Fatalf("the administrator sets %s=%q on Namespace %s: %v", v1alpha1.AnnotationMode, m, name, err)
	}
}

func claim(namespace, name, size string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
	u.SetGroupVersionKind(controlplane.ClaimGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetAnnotations(annotations)
	return u
}

// settle waits until the chain of a Claim has settled (see
// ControlPlane.Settled).
func settle(t *testing.T, key client.ObjectKey) {
	t.Helper()
	settleClosed(t, key, controlplane.ClosedGate)
}

// settleClosed is settle for a Composition whose closed gate is closed.
func settleClosed(t *testing.T, key client.ObjectKey, closed []string) {
	t.Helper()
	ctx := context.Background()
	start, last := time.Now(), time.Now()
	fixture.Eventually(t, settleTimeout, fmt.Sprintf("the chain of %s to settle", key), func() (bool, string) {
		ok, why, err := cp.SettledClosed(ctx, key, closed)
		if err != nil {
			return false, err.Error()
		}
		if os.Getenv("E2E_TRACE") != "" && time.Since(last) > 3*time.Second {
			last = time.Now()
			t.Logf("%s settling: %s — %s", time.Since(start).Round(time.Second), why, cp.Describe(ctx, key))
		}
		return ok, why + " — " + cp.Describe(ctx, key)
	})
	if os.Getenv("E2E_TRACE") != "" {
		t.Logf("%s settled in %s: %s", key, time.Since(start).Round(100*time.Millisecond), cp.Describe(ctx, key))
	}
}

// xr is the XR of a Claim.
func xr(t *testing.T, key client.ObjectKey) *unstructured.Unstructured {
	t.Helper()
	x, err := cp.XR(context.Background(), key)
	if err != nil || x == nil {
		t.Fatalf("XR of %s: %v", key, err)
	}
	return x
}

// buckets are the XR's composed Buckets by composition resource name.
func buckets(t *testing.T, key client.ObjectKey) map[string]*unstructured.Unstructured {
	t.Helper()
	bs, err := cp.Buckets(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func gate(o *unstructured.Unstructured) []string { return controlplane.Gate(o) }

func traceOf(t *testing.T, o *unstructured.Unstructured) allowance.Trace {
	t.Helper()
	tr, err := allowance.ParseTrace(o.GetAnnotations()[v1alpha1.AnnotationTrace])
	if err != nil {
		t.Fatalf("trace of %s: %v", o.GetName(), err)
	}
	return tr
}

func kinds(tr allowance.Trace) []string {
	out := make([]string, 0, len(tr))
	for _, h := range tr {
		out = append(out, h.Kind)
	}
	return out
}

// counts are a bucket's external Create, Update and Delete calls.
func counts(name string) [3]int {
	return [3]int{cp.Cloud.Count(recorder.VerbCreate, name), cp.Cloud.Count(recorder.VerbUpdate, name), cp.Cloud.Count(recorder.VerbDelete, name)}
}

// expectCalls checks every bucket's external calls: want maps resource
// name to Create/Update/Delete counts. It waits for them, since the cloud
// lags the gate by a poll, and then checks they stay.
func expectCalls(t *testing.T, key client.ObjectKey, want map[string][3]int) {
	t.Helper()
	bs := buckets(t, key)
	fixture.Eventually(t, settleTimeout, "the cloud calls", func() (bool, string) {
		if os.Getenv("E2E_TRACE") != "" {
			defer func() { t.Logf("chain: %s", cp.Describe(context.Background(), key)) }()
		}
		for res, w := range want {
			b, ok := bs[res]
			if !ok {
				return false, fmt.Sprintf("no %s bucket", res)
			}
			if got := counts(b.GetName()); got != w {
				return false, fmt.Sprintf("bucket %s: Create/Update/Delete = %v, want %v", res, got, w)
			}
		}
		return true, ""
	})
	// Nothing more happens after a poll of the provider.
	time.Sleep(2 * controlplane.Poll)
	for res, w := range want {
		if got := counts(bs[res].GetName()); got != w {
			t.Errorf("%s bucket %s: external Create/Update/Delete = %v, want %v", key, res, got, w)
		}
	}
}

// expectClosed waits until every bucket's gate is closed: a gate the last
// change opened closes once the provider applied it, which may come after
// the cloud call expectCalls waited for (settle may see the chain settled
// before a Claim's change reached the XR).
func expectClosed(t *testing.T, key client.ObjectKey) {
	t.Helper()
	fixture.Eventually(t, settleTimeout, "every gate closed", func() (bool, string) {
		for res, b := range buckets(t, key) {
			if !slices.Equal(gate(b), controlplane.ClosedGate) {
				return false, fmt.Sprintf("%s bucket %s gate = %v, want %v", key, res, gate(b), controlplane.ClosedGate)
			}
		}
		return true, ""
	})
}

// deleteProtected sets kausality.io/allow-delete on obj (a Claim or XR
// whose policy protects it) as user, then deletes it as user.
func deleteProtected(t *testing.T, user client.Client, obj *unstructured.Unstructured) {
	t.Helper()
	if err := allowDelete(user, obj); err != nil {
		t.Fatalf("setting allow-delete on %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	if err := user.Delete(context.Background(), obj); err != nil {
		t.Fatalf("deleting %s %s with allow-delete: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// allowDelete sets kausality.io/allow-delete on obj as user: a
// metadata-only write.
func allowDelete(user client.Client, obj *unstructured.Unstructured) error {
	return controlplane.Update(user, obj, func() {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v1alpha1.AnnotationAllowDelete] = "true"
		obj.SetAnnotations(ann)
	})
}

// composedOf are the composed resources of the given kinds an XR
// controls, by composition resource name.
func composedOf(t *testing.T, key client.ObjectKey, gvks ...schema.GroupVersionKind) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, gvk := range gvks {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := cp.AdminClient().List(context.Background(), l, client.InNamespace(key.Namespace), client.MatchingLabels{"crossplane.io/composite": key.Name}); err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			out[l.Items[i].GetAnnotations()["crossplane.io/composition-resource-name"]] = &l.Items[i]
		}
	}
	return out
}

// describeXR is an XR's conditions, for messages.
func describeXR(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) string {
	x, err := cp.Object(ctx, gvk, key)
	if err != nil || x == nil {
		return fmt.Sprintf("%s %s: %v", gvk.Kind, key, err)
	}
	cs, _, _ := unstructured.NestedSlice(x.Object, "status", "conditions")
	return fmt.Sprintf("%s %s conditions %v", gvk.Kind, key, cs)
}

// installExample installs an example's XRD (whose CRD is crd) and
// policies.yaml, as an administrator would, and waits until the
// provider's webhooks cover resources and it has resolved the policy
// named policyName's targets for kinds (apiVersion and kind) as class.
func installExample(t *testing.T, dir, crd, policyName string, resources []string, class policy.Class, kinds ...schema.GroupVersionKind) {
	t.Helper()
	ctx := context.Background()
	if err := cp.ApplyFile(ctx, filepath.Join(dir, "xrd.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := cp.Established(ctx, 90*time.Second, crd); err != nil {
		t.Fatal(err)
	}
	if err := cp.ApplyFile(ctx, filepath.Join(dir, "policies.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.WaitForRules(ctx, cp.AdminClient(), resources...); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, fmt.Sprintf("policy %s's targets to resolve", policyName), func() (bool, string) {
		p := &v1alpha1.AllowancePolicy{}
		if err := cp.AdminClient().Get(ctx, client.ObjectKey{Name: policyName}, p); err != nil {
			return false, err.Error()
		}
		k := policy.KindsOf([]v1alpha1.AllowancePolicy{*p})
		for _, gvk := range kinds {
			if c := k.ChildOf(gvk.GroupVersion().String(), gvk.Kind); c.Guessed || c.Class != class {
				return false, fmt.Sprintf("%s: %+v", gvk.Kind, c)
			}
		}
		return true, ""
	})
}
