package envtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestPolicyTargetResolvedThroughItsCRD: a policy naming a kind by its
// CRD's plural (meshes, which no guess from the kind Mesh produces) is not
// Ready while the API server serves no such resource, and records the
// kind and every served version once the CRD exists, within moments (the
// provider watches CRDs).
func TestPolicyTargetResolvedThroughItsCRD(t *testing.T) {
	ctx := context.Background()
	adminC := as(t, "admin")
	p := &v1alpha1.AllowancePolicy{}
	if err := yaml.Unmarshal([]byte(`
metadata: {name: meshes}
spec:
  for: {apiGroup: example.com, kind: XNetwork}
  rules:
  - trigger: spec.size
    policies:
    - target: {apiGroup: appmesh.example.org, resource: meshes}
      verbs: [Update]
`), p); err != nil {
		t.Fatal(err)
	}
	if err := adminC.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adminC.Delete(context.Background(), p) })
	ready := func(reason string) func() (bool, string) {
		return func() (bool, string) {
			got := &v1alpha1.AllowancePolicy{}
			if err := adminC.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Reason != reason {
				return false, fmt.Sprintf("Ready condition %+v", c)
			}
			p = got
			return true, ""
		}
	}
	fixture.Eventually(t, 30*time.Second, "the policy is not Ready: its target is unresolved", ready(policycontroller.ReasonUnresolved))
	if len(p.Status.Targets) != 0 {
		t.Errorf("status.targets = %+v before the CRD exists, want none", p.Status.Targets)
	}

	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "meshes.appmesh.example.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "appmesh.example.org", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Mesh", ListKind: "MeshList", Plural: "meshes", Singular: "mesh",
				Categories: []string{"crossplane", "managed"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta1", Served: true, Schema: schema},
				{Name: "v1beta2", Served: true, Storage: true, Schema: schema},
			},
		},
	}
	start := time.Now()
	if err := adminC.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adminC.Delete(context.Background(), crd) })
	fixture.Eventually(t, 30*time.Second, "the policy is Ready: its target resolved", ready(policycontroller.ReasonCompiled))
	t.Logf("the target resolved %v after its CRD was created", time.Since(start).Round(time.Millisecond))
	want := []v1alpha1.ResolvedTarget{{APIGroup: "appmesh.example.org", Resource: "meshes", Kind: "Mesh", Versions: []string{"v1beta1", "v1beta2"},
		Categories: []string{"crossplane", "managed"}}}
	if diff := cmp.Diff(want, p.Status.Targets); diff != "" {
		t.Errorf("status.targets: -want +got:\n%s", diff)
	}
}
