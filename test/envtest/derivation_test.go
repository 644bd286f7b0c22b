package envtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/derivation"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// The XR kind of the derivation test: one no other test's policies name,
// so the derived policy bounds nothing they do.
const xstoreCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: xstores.example.com}
spec:
  group: example.com
  names: {kind: XStore, listKind: XStoreList, plural: xstores, singular: xstore, categories: [composite]}
  scope: Cluster
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// Its XRD: spec.size is required, so the derived rule for it only lets the
// size mutate (the derivation read the XRD), spec.region and spec.tier
// are optional.
const xstoreXRD = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xstores.example.com}
spec:
  group: example.com
  names: {kind: XStore, plural: xstores}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer}
              region: {type: string}
              tier: {type: string}
`

// storePipeline is the Composition's pipeline patching the given XR
// fields into the same fields of a recorder Bucket's forProvider.
func storePipeline(t *testing.T, fields ...string) []xpv1.PipelineStep {
	t.Helper()
	var patches []map[string]string
	for _, f := range fields {
		patches = append(patches, map[string]string{"fromFieldPath": "spec." + f, "toFieldPath": "spec.forProvider." + f})
	}
	in := map[string]any{
		"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
		"resources": []any{map[string]any{
			"name":    "bucket",
			"base":    map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket"},
			"patches": patches,
		}},
	}
	b, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return []xpv1.PipelineStep{{Step: "resources", FunctionRef: xpv1.FunctionReference{Name: "function-patch-and-transform"}, Input: &runtime.RawExtension{Raw: j}}}
}

// TestDerivedPolicyKeptInSync: with --derive-policies, an annotated
// Composition gets its derived policy naming the revision it came from; a
// new revision (made here, as Crossplane makes them) updates it; an
// administrator's edit is never overwritten: the next revision's
// derivation is reported on the policy's Derived condition instead.
func TestDerivedPolicyKeptInSync(t *testing.T) {
	ctx := context.Background()
	adminC := as(t, "admin")

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(xstoreCRD), crd); err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(admin, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
		t.Fatal(err)
	}
	xrd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(xstoreXRD), &xrd.Object); err != nil {
		t.Fatal(err)
	}
	if err := adminC.Create(ctx, xrd); err != nil {
		t.Fatal(err)
	}
	c := &xpv1.Composition{
		ObjectMeta: metav1.ObjectMeta{Name: "xstores", Annotations: map[string]string{
			derivation.AnnotationDerivePolicy:   "true",
			derivation.AnnotationDeriveSubjects: "group=platform-team, propagator=crossplane-system/crossplane",
		}},
		Spec: xpv1.CompositionSpec{
			CompositeTypeRef: xpv1.TypeReference{APIVersion: "example.com/v1alpha1", Kind: "XStore"},
			Mode:             xpv1.CompositionModePipeline,
			Pipeline:         storePipeline(t, "size"),
		},
	}
	if err := adminC.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.AllowancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "xstores"}}
	var revs []*xpv1.CompositionRevision
	t.Cleanup(func() {
		ctx := context.Background()
		// The Composition first: deleting the policy while it is still
		// annotated would have the provider derive it again.
		objs := append(append([]client.Object{c}, asObjects(revs)...), p, xrd, crd)
		for _, o := range objs {
			_ = adminC.Delete(ctx, o)
		}
		// The provider's cache may not have seen the Composition go when
		// the policy's deletion reaches it: delete until it stays gone.
		fixture.Eventually(t, 30*time.Second, "the derived policy is deleted", func() (bool, string) {
			_ = adminC.Delete(ctx, &v1alpha1.AllowancePolicy{ObjectMeta: metav1.ObjectMeta{Name: p.GetName()}})
			err := adminC.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.AllowancePolicy{})
			return kerrors.IsNotFound(err), fmt.Sprint(err)
		})
		// A CRD goes away only once its instances are gone; wait, so a
		// repeated run (-count) can install it again.
		fixture.Eventually(t, 30*time.Second, "the XStore CRD is deleted", func() (bool, string) {
			err := adminC.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
			return kerrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
	// revise makes revision n of the Composition as Crossplane would:
	// named after the Composition, labelled with its name, its spec
	// copied.
	revise := func(n int64) {
		t.Helper()
		if err := adminC.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			t.Fatal(err)
		}
		r := &xpv1.CompositionRevision{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("xstores-%07x", n*0x1f2e3d), Labels: map[string]string{xpv1.LabelCompositionName: c.GetName()}},
			Spec: xpv1.CompositionRevisionSpec{
				CompositeTypeRef: c.Spec.CompositeTypeRef, Mode: c.Spec.Mode, Pipeline: c.Spec.Pipeline, Revision: n,
			},
		}
		if err := adminC.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, r)
	}
	// editComposition patches fields as the Composition's pipeline and
	// makes the revision Crossplane would.
	editComposition := func(n int64, fields ...string) {
		t.Helper()
		if err := controlplane.Update(adminC, c, func() { c.Spec.Pipeline = storePipeline(t, fields...) }); err != nil {
			t.Fatal(err)
		}
		revise(n)
	}
	// waitFor waits until the policy is derived from ref with the
	// condition's status, and returns it.
	waitFor := func(what, ref string, status metav1.ConditionStatus, reason string) *v1alpha1.AllowancePolicy {
		t.Helper()
		got := &v1alpha1.AllowancePolicy{}
		fixture.Eventually(t, 30*time.Second, what, func() (bool, string) {
			if err := adminC.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return false, err.Error()
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, derivation.ConditionDerived)
			if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, ref) {
				return false, fmt.Sprintf("derived-from %q, condition %+v", got.Annotations[derivation.AnnotationDerivedFrom], cond)
			}
			return true, ""
		})
		return got
	}

	revise(1)
	got := waitFor("the derived policy of revision 1", "xstores/1", metav1.ConditionTrue, derivation.ReasonSynced)
	if from := got.Annotations[derivation.AnnotationDerivedFrom]; from != "xstores/1" {
		t.Errorf("derived-from = %q, want xstores/1", from)
	}
	if rs := ruleVerbs(got); !slices.Equal(rs["spec.size"], []v1alpha1.MutationVerb{v1alpha1.MutationMutate}) || len(rs) != 1 {
		t.Errorf("rules %v: want spec.size only, with [Mutate] (the XRD requires it)", rs)
	}

	editComposition(2, "size", "region")
	got = waitFor("the policy derived from revision 2", "xstores/2", metav1.ConditionTrue, derivation.ReasonSynced)
	if from := got.Annotations[derivation.AnnotationDerivedFrom]; from != "xstores/2" {
		t.Errorf("derived-from = %q, want xstores/2", from)
	}
	if rs := ruleVerbs(got); len(rs["spec.region"]) != 3 {
		t.Errorf("rules %v: want spec.region with [Insert, Mutate, Delete] (optional in the XRD), which revision 2 patches", rs)
	}

	// Alice's team withholds region changes by hand.
	if err := controlplane.Update(adminC, p, func() {
		p.Spec.Rules = slices.DeleteFunc(p.Spec.Rules, func(r v1alpha1.Rule) bool { return r.Trigger == "spec.region" })
	}); err != nil {
		t.Fatal(err)
	}
	got = waitFor("the conflict with the edit", "xstores/2", metav1.ConditionFalse, derivation.ReasonConflict)
	if m := meta.FindStatusCondition(got.Status.Conditions, derivation.ConditionDerived).Message; !strings.Contains(m, "add: spec.region") {
		t.Errorf("Derived condition %q does not say the derivation would add spec.region back", m)
	}

	editComposition(3, "size", "region", "tier")
	got = waitFor("the conflict with revision 3", "xstores/3", metav1.ConditionFalse, derivation.ReasonConflict)
	m := meta.FindStatusCondition(got.Status.Conditions, derivation.ConditionDerived).Message
	for _, s := range []string{"spec.region", "spec.tier", "edited since the provider derived it from xstores/2"} {
		if !strings.Contains(m, s) {
			t.Errorf("Derived condition %q does not mention %q", m, s)
		}
	}
	rs := ruleVerbs(got)
	if _, ok := rs["spec.region"]; ok {
		t.Errorf("rules %v: the administrator's narrowing (no spec.region) was widened again", rs)
	}
	if _, ok := rs["spec.tier"]; ok {
		t.Errorf("rules %v: revision 3's spec.tier was written over the administrator's edit", rs)
	}
	if from := got.Annotations[derivation.AnnotationDerivedFrom]; from != "xstores/2" {
		t.Errorf("derived-from = %q, want xstores/2: the spec is still what was derived from it, as edited", from)
	}
}

// ruleVerbs are the mutation verbs of each rule's ControllerChild entry,
// by trigger.
func ruleVerbs(p *v1alpha1.AllowancePolicy) map[string][]v1alpha1.MutationVerb {
	out := map[string][]v1alpha1.MutationVerb{}
	for _, r := range p.Spec.Rules {
		out[r.Trigger] = nil
		for _, e := range r.Policies {
			for _, b := range e.Mutations {
				out[r.Trigger] = append(out[r.Trigger], b.Verbs...)
			}
		}
	}
	return out
}

func asObjects(revs []*xpv1.CompositionRevision) []client.Object {
	out := make([]client.Object, 0, len(revs))
	for _, r := range revs {
		out = append(out, r)
	}
	return out
}
