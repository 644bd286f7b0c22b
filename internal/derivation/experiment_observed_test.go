package derivation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func composedAs(name string, obj map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: obj}
	u.SetAnnotations(map[string]string{AnnotationCompositionResourceName: name})
	return u
}

func TestObserved(t *testing.T) {
	xr := map[string]any{"metadata": map[string]any{"name": "Prod", "namespace": "platform"}}
	ready := []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-01-01T00:00:00Z"},
	}
	cases := map[string]struct {
		desired *unstructured.Unstructured
		want    map[string]any
	}{
		"ManagedGetsAtProvider": {
			desired: composedAs("nodeGroup", map[string]any{"apiVersion": "eks.aws.m.upbound.io/v1beta1", "kind": "NodeGroup",
				"spec": map[string]any{"forProvider": map[string]any{"region": "eu-central-1"}}}),
			want: map[string]any{"apiVersion": "eks.aws.m.upbound.io/v1beta1", "kind": "NodeGroup",
				"metadata": map[string]any{"name": "prod-nodegroup", "namespace": "platform", "annotations": map[string]any{AnnotationCompositionResourceName: "nodeGroup"}},
				"spec":     map[string]any{"forProvider": map[string]any{"region": "eu-central-1"}},
				"status": map[string]any{"conditions": ready,
					"atProvider": map[string]any{"region": "eu-central-1", "id": "prod-nodegroup", "arn": "arn:aws:nodegroup:::prod-nodegroup"}}},
		},
		"KeepsItsNameAndAtProviderID": {
			desired: composedAs("role", map[string]any{"apiVersion": "iam.gcp.m.upbound.io/v1beta1", "kind": "Role",
				"metadata": map[string]any{"name": "given", "namespace": "other"},
				"spec":     map[string]any{"forProvider": map[string]any{"id": "x"}}}),
			want: map[string]any{"apiVersion": "iam.gcp.m.upbound.io/v1beta1", "kind": "Role",
				"metadata": map[string]any{"name": "given", "namespace": "other", "annotations": map[string]any{AnnotationCompositionResourceName: "role"}},
				"spec":     map[string]any{"forProvider": map[string]any{"id": "x"}},
				"status":   map[string]any{"conditions": ready, "atProvider": map[string]any{"id": "x"}}},
		},
		"UnmanagedGetsNoAtProvider": {
			desired: composedAs("secret", map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"k": "dg=="}}),
			want: map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"k": "dg=="},
				"metadata": map[string]any{"name": "prod-secret", "namespace": "platform", "annotations": map[string]any{AnnotationCompositionResourceName: "secret"}},
				"status":   map[string]any{"conditions": ready}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.desired.DeepCopy()
			got := Observed(xr, []*unstructured.Unstructured{tc.desired})
			if diff := cmp.Diff(tc.want, got[0].Object); diff != "" {
				t.Errorf("Observed(...): -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(before.Object, tc.desired.Object); diff != "" {
				t.Errorf("Observed(...) changed the desired resource: -before, +after:\n%s", diff)
			}
		})
	}
}

func TestSettled(t *testing.T) {
	a, b := composedAs("a", map[string]any{}), composedAs("b", map[string]any{})
	cases := map[string]struct {
		before, after []*unstructured.Unstructured
		want          bool
	}{
		"SameInAnotherOrder": {before: []*unstructured.Unstructured{a, b}, after: []*unstructured.Unstructured{b, a}, want: true},
		"OneMore":            {before: []*unstructured.Unstructured{a}, after: []*unstructured.Unstructured{a, b}, want: false},
		"OneFewer":           {before: []*unstructured.Unstructured{a, b}, after: []*unstructured.Unstructured{b}, want: false},
		"NothingEither":      {want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Settled(tc.before, tc.after); got != tc.want {
				t.Errorf("Settled(...) = %v, want %v", got, tc.want)
			}
		})
	}
}
