package policycontroller

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

func TestAPIResolver(t *testing.T) {
	// App Mesh's Mesh: a plural no guess from the kind produces, three
	// versions of which two are served.
	meshCRD := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "meshes.appmesh.aws.upbound.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "appmesh.aws.upbound.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "meshes", Kind: "Mesh", Categories: []string{"crossplane", "managed", "aws"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta2", Served: true, Storage: true}, {Name: "v1beta1", Served: true}, {Name: "v1alpha1"},
			},
		},
	}
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)

	cases := map[string]struct {
		reason string
		named  policy.Named
		getErr error
		want   v1alpha1.ResolvedTarget
		wantOK bool
		err    error
	}{
		"CRD": {reason: "A CRD gives the kind, the served versions and the scope.",
			named: policy.Named{Group: "appmesh.aws.upbound.io", Resource: "meshes"},
			want: v1alpha1.ResolvedTarget{APIGroup: "appmesh.aws.upbound.io", Resource: "meshes", Kind: "Mesh", Versions: []string{"v1beta1", "v1beta2"},
				Categories: []string{"crossplane", "managed", "aws"}},
			wantOK: true},
		"GuessedPlural": {reason: "The plural guessed from the kind is no resource.",
			named: policy.Named{Group: "appmesh.aws.upbound.io", Resource: "meshs"},
			want:  v1alpha1.ResolvedTarget{APIGroup: "appmesh.aws.upbound.io", Resource: "meshs"}},
		"BuiltIn": {reason: "A kind without a CRD resolves through discovery.",
			named:  policy.Named{Resource: "secrets"},
			want:   v1alpha1.ResolvedTarget{Resource: "secrets", Kind: "Secret", Versions: []string{"v1"}, Namespaced: true},
			wantOK: true},
		"LookupFails": {reason: "A failed read is an error, never an unresolved target.",
			named: policy.Named{Group: "appmesh.aws.upbound.io", Resource: "meshes"}, getErr: errBoom,
			want: v1alpha1.ResolvedTarget{APIGroup: "appmesh.aws.upbound.io", Resource: "meshes"},
			err:  errors.Wrap(errBoom, "cannot get CustomResourceDefinition meshes.appmesh.aws.upbound.io")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := runtime.NewScheme()
			if err := apiextensionsv1.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			kube := fake.NewClientBuilder().WithScheme(s).WithObjects(meshCRD.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if tc.getErr != nil {
						return tc.getErr
					}
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			got, ok, err := APIResolver{Reader: kube, Mapper: m}.Resolve(context.Background(), tc.named)
			if diff := cmp.Diff(tc.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nResolve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if ok != tc.wantOK {
				t.Errorf("%s\nResolve(...) ok = %t, want %t", tc.reason, ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nResolve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
