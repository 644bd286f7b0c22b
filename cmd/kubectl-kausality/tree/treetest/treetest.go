// Package treetest holds the tree every `kubectl kausality` test reads:
// an XPlatform composing an XStorage (nested) and a logs bucket, the
// XStorage composing a data bucket and referencing one that is gone.
package treetest

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Obj is an object of the given kind and name with fields.
func Obj(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// Ref is a reference to an object, as Crossplane writes one.
func Ref(apiVersion, kind, name string) map[string]any {
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "name": name}
}

// Ready is a status with Synced and Ready True.
func Ready() map[string]any {
	return map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True"}, map[string]any{"type": "Ready", "status": "True"}}}
}

// Bucket is a gated Bucket composed as resource.
func Bucket(name, resource string) *unstructured.Unstructured {
	u := Obj("s3.aws.m.upbound.io/v1beta1", "Bucket", "team-a", name, map[string]any{
		"spec":   map[string]any{"managementPolicies": []any{"Observe", "LateInitialize"}},
		"status": Ready(),
	})
	u.SetLabels(map[string]string{v1alpha1.LabelGated: "true"})
	u.SetAnnotations(map[string]string{"crossplane.io/composition-resource-name": resource})
	return u
}

// Objects are a tree: an XPlatform composes an XStorage (nested) and a logs bucket;
// the XStorage composes a data bucket and references one that is gone.
func Objects() []client.Object {
	platform := Obj("example.org/v1alpha1", "XPlatform", "team-a", "shop", map[string]any{
		"spec": map[string]any{"crossplane": map[string]any{"resourceRefs": []any{
			Ref("s3.aws.m.upbound.io/v1beta1", "Bucket", "shop-logs"),
			Ref("example.org/v1alpha1", "XStorage", "shop-storage"),
		}}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True"}, map[string]any{"type": "Ready", "status": "True"},
			map[string]any{"type": v1alpha1.ConditionCreated, "status": "True"},
			map[string]any{"type": v1alpha1.ConditionAllowed, "status": "False", "message": "resource logs: withheld Mutate spec.forProvider.tags"},
		}},
	})
	storage := Obj("example.org/v1alpha1", "XStorage", "team-a", "shop-storage", map[string]any{
		"spec": map[string]any{"crossplane": map[string]any{"resourceRefs": []any{
			Ref("s3.aws.m.upbound.io/v1beta1", "Bucket", "shop-data"),
			Ref("s3.aws.m.upbound.io/v1beta1", "Bucket", "shop-gone"),
		}}},
		"status": Ready(),
	})
	storage.SetAnnotations(map[string]string{"crossplane.io/composition-resource-name": "storage"})
	return []client.Object{platform, storage, Bucket("shop-logs", "logs"), Bucket("shop-data", "data")}
}

// Reader is a fake client holding Objects.
func Reader(t *testing.T) client.WithWatch {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(Objects()...).Build()
}

// Mapper serves the XPlatform kind, namespaced.
func Mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XPlatform"}, meta.RESTScopeNamespace)
	return m
}
