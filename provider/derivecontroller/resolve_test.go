package derivecontroller

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kausality-io/kausality-crossplane/internal/derivation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

func TestCluster(t *testing.T) {
	mesh := schema.GroupVersionKind{Group: "appmesh.example.org", Version: "v1", Kind: "Mesh"}
	xstore := schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XStore"}
	unknown := schema.GroupVersionKind{Group: "nowhere.example.org", Version: "v1", Kind: "Thing"}
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	pc := schema.GroupVersionKind{Group: "aws.m.upbound.io", Version: "v1beta1", Kind: "ProviderConfig"}
	mapper := meta.NewDefaultRESTMapper(nil)
	// Mesh is served as meshes, which no guess from the kind gives.
	mapper.AddSpecific(mesh, mesh.GroupVersion().WithResource("meshes"), mesh.GroupVersion().WithResource("mesh"), meta.RESTScopeNamespace)
	mapper.Add(xstore, meta.RESTScopeRoot)
	mapper.Add(deployment, meta.RESTScopeNamespace)
	mapper.Add(pc, meta.RESTScopeNamespace)

	s := scheme(t)
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	xrd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
		"metadata": map[string]any{"name": "xstores.example.com"},
		"spec": map[string]any{
			"group": "example.com", "names": map[string]any{"kind": "XStore", "plural": "xstores"},
			"versions": []any{map[string]any{"name": "v1alpha1", "schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "properties": map[string]any{"spec": map[string]any{"type": "object", "required": []any{"size"},
					"properties": map[string]any{"size": map[string]any{"type": "integer"}}}},
			}}}},
		},
	}}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "xstores.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Names: apiextensionsv1.CustomResourceDefinitionNames{Categories: []string{"composite"}}}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "meshes.appmesh.example.org"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Names: apiextensionsv1.CustomResourceDefinitionNames{Categories: []string{"crossplane", "managed", "aws"}}}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "providerconfigs.aws.m.upbound.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Names: apiextensionsv1.CustomResourceDefinitionNames{Categories: []string{"crossplane", "provider", "aws"}}}},
		xrd,
	).Build()
	c := Cluster{Reader: kube, Mapper: mapper}

	cases := map[string]struct {
		reason string
		gvk    schema.GroupVersionKind
		want   derivation.Kind
		ok     bool
	}{
		"Plural":         {reason: "The plural is the API server's, not a guess; a CRD in the managed category is managed.", gvk: mesh, want: derivation.Kind{Resource: "meshes", Class: policy.ClassManaged}, ok: true},
		"Composite":      {reason: "A kind whose CRD is in the composite category gets no External verbs.", gvk: xstore, want: derivation.Kind{Resource: "xstores", Class: policy.ClassComposite}, ok: true},
		"Unknown":        {reason: "A kind the API server does not serve is unknown, and the derivation notes its guess.", gvk: unknown},
		"Builtin":        {reason: "A kind served without a CRD (Kubernetes' own) has no external resource.", gvk: deployment, want: derivation.Kind{Resource: "deployments", Class: policy.ClassUnmanaged}, ok: true},
		"ProviderConfig": {reason: "A CRD outside the managed category has no external resource.", gvk: pc, want: derivation.Kind{Resource: "providerconfigs", Class: policy.ClassUnmanaged}, ok: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok, err := c.Resolve(tc.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok || got != tc.want {
				t.Errorf("%s\nResolve(%s) = %+v, %v; want %+v, %v", tc.reason, tc.gvk, got, ok, tc.want, tc.ok)
			}
		})
	}

	sch, err := c.Schema(context.Background(), xstore)
	if err != nil {
		t.Fatal(err)
	}
	if !sch.Present("spec.size") {
		t.Error("Schema(XStore) does not say spec.size is required: the XRD was not read")
	}
	if sch, err := c.Schema(context.Background(), mesh); err != nil || sch != nil {
		t.Errorf("Schema(Mesh) = %v, %v; want none: no XRD defines it", sch, err)
	}
}
