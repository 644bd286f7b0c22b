package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
)

func TestS5HandEditOfManagedResource(t *testing.T) {
	key := created(t, composition(t, 1), "s5", "orders")
	data := buckets(t, key)["data"]

	// Bob resizes the data bucket by hand: admitted, traced to him, but the
	// gate stays closed and the next composition does not "fix" it either.
	if err := controlplane.Update(as(t, controlplane.Bob), data, func() { _ = unstructured.SetNestedField(data.Object, int64(7), "spec", "forProvider", "size") }); err != nil {
		t.Fatalf("bob's edit: %v", err)
	}
	if tr := traceOf(t, data); len(tr) != 1 || tr[0].User != controlplane.Bob || tr[0].Field != "spec.forProvider.size" {
		t.Errorf("trace after bob's edit = %+v, want one origin hop by bob on spec.forProvider.size", tr)
	}
	if !slices.Equal(gate(data), controlplane.ClosedGate) {
		t.Errorf("gate after bob's edit = %v, want %v", gate(data), controlplane.ClosedGate)
	}
	settle(t, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 0, 0}})
	if s, _ := cp.Cloud.Get(data.GetName()); s.Size != 1 {
		t.Errorf("cloud size = %d, want 1", s.Size)
	}

	// A policy for Buckets lets Alice initiate exactly such an edit.
	policyForTest(t, `
metadata: {name: buckets-by-hand}
spec:
  for: {apiGroup: recorder.kausality.io, apiVersion: v1alpha1, kind: Bucket}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  rules:
  - trigger: spec.forProvider.size
    policies:
    - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Update]
`)
	logs := buckets(t, key)["logs"]
	controlplane.Eventually(t, 30*time.Second, "the policy to apply to Bucket edits", func() (bool, string) {
		// Bob is not a subject: with the policy in place his edit is denied.
		probe := logs.DeepCopy()
		err := controlplane.Update(as(t, controlplane.Bob), probe, func() { _ = unstructured.SetNestedField(probe.Object, int64(9), "spec", "forProvider", "size") })
		return err != nil && strings.Contains(err.Error(), "AllowancePolicy buckets-by-hand"), fmt.Sprint(err)
	})
	if err := controlplane.Update(alice(t), logs, func() { _ = unstructured.SetNestedField(logs.Object, int64(3), "spec", "forProvider", "size") }); err != nil {
		t.Fatalf("alice's edit: %v", err)
	}
	if tr := traceOf(t, logs); len(tr) != 1 || tr[0].User != controlplane.Alice {
		t.Errorf("trace after alice's edit = %+v, want one origin hop by alice", tr)
	}
	settle(t, key)
	expectCalls(t, key, map[string][3]int{"data": {1, 0, 0}, "logs": {1, 1, 0}})
	expectClosed(t, key)
	if s, _ := cp.Cloud.Get(logs.GetName()); s.Size != 3 {
		t.Errorf("cloud size of logs = %d, want alice's 3", s.Size)
	}
}

func TestS7AnnotationsAreProtected(t *testing.T) {
	key := created(t, composition(t, 1), "s7", "orders")
	data := buckets(t, key)["data"]

	b := data.DeepCopy()
	err := controlplane.Update(as(t, controlplane.Bob), b, func() {
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationAllowances] = `[{"relation":"External","target":{"external":{"kind":"*"}},"verbs":["*"],"generation":99}]`
		b.SetAnnotations(ann)
	})
	controlplane.ErrorContains(t, err, "annotation kausality.io/allowances", "only Kausality and Crossplane may change")
	c := claim(key.Namespace, key.Name, "", nil)
	err = controlplane.Update(alice(t), c, func() {
		ann := c.GetAnnotations()
		ann[v1alpha1.AnnotationTrace] = `[]`
		c.SetAnnotations(ann)
	})
	controlplane.ErrorContains(t, err, "annotation kausality.io/trace", "only Kausality and Crossplane may change")

	// Even a trusted writer (Crossplane's service account) cannot store a
	// malformed annotation, and the stored one is kept.
	before := buckets(t, key)["data"].GetAnnotations()[v1alpha1.AnnotationAllowances]
	b = data.DeepCopy()
	err = controlplane.Update(as(t, controlplane.CrossplaneUser), b, func() {
		ann := b.GetAnnotations()
		ann[v1alpha1.AnnotationAllowances] = `[{"relation":"External",`
		b.SetAnnotations(ann)
	})
	controlplane.ErrorContains(t, err, "cannot parse annotation kausality.io/allowances on Bucket "+data.GetName())
	if after := buckets(t, key)["data"].GetAnnotations()[v1alpha1.AnnotationAllowances]; after != before {
		t.Errorf("allowances changed from %q to %q", before, after)
	}
}

// policyForTest creates an AllowancePolicy for the rest of the test.
func policyForTest(t *testing.T, y string) {
	t.Helper()
	p := &v1alpha1.AllowancePolicy{}
	if err := yaml.Unmarshal([]byte(y), p); err != nil {
		t.Fatal(err)
	}
	admin := as(t, "admin")
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), p) })
}
