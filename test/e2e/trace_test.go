package e2e

import (
	"context"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
)

// traceXR logs every change of a Claim's XR while the test runs, with
// E2E_TRACE set: a debugging aid for how real Crossplane writes it.
func traceXR(t *testing.T, key client.ObjectKey) {
	t.Helper()
	if os.Getenv("E2E_TRACE") == "" {
		return
	}
	wc, err := client.NewWithWatch(cp.Admin, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	x := xr(t, key)
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(controlplane.XRGVK.GroupVersion().WithKind("XDatabaseList"))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, l, client.MatchingFields{"metadata.name": x.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	bl := &unstructured.UnstructuredList{}
	bl.SetGroupVersionKind(controlplane.BucketGVK.GroupVersion().WithKind("BucketList"))
	bw, err := wc.Watch(ctx, bl, client.MatchingLabels{"crossplane.io/composite": x.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range bw.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			size, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "forProvider", "size")
			var mgrs []string
			for _, m := range u.GetManagedFields() {
				mgrs = append(mgrs, m.Manager+"/"+m.Subresource+"@"+m.Time.Format("15:04:05"))
			}
			t.Logf("Bucket %s %s rv %s gen %d size %v gate %v applied %s managers %v", u.GetName(), ev.Type, u.GetResourceVersion(), u.GetGeneration(), size, controlplane.Gate(u),
				u.GetAnnotations()[v1alpha1.AnnotationApplied], mgrs)
		}
	}()
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			spec, _ := u.Object["spec"].(map[string]any)
			var mgrs []string
			for _, m := range u.GetManagedFields() {
				mgrs = append(mgrs, m.Manager+"/"+m.Subresource+"@"+m.Time.Format("15:04:05"))
			}
			t.Logf("XR %s rv %s gen %d size %v allowances %s conditions %s managers %v", ev.Type, u.GetResourceVersion(), u.GetGeneration(), spec["size"],
				u.GetAnnotations()[v1alpha1.AnnotationAllowances], controlplane.Conditions(u), mgrs)
		}
	}()
}
