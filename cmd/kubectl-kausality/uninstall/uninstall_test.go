package uninstall

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const bucketsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: buckets.recorder.m.kausality.io}
spec:
  group: recorder.m.kausality.io
  names: {kind: Bucket, plural: buckets, categories: [crossplane, managed]}
  scope: Namespaced
  versions: [{name: v1alpha1, served: true, storage: true}]`

const gatedBucket = `apiVersion: recorder.m.kausality.io/v1alpha1
kind: Bucket
metadata:
  name: shop-data
  namespace: team-a
  labels: {kausality.io/gated: "true", crossplane.io/composite: shop}
  annotations: {kausality.io/trace: "[]", kausality.io/allowances: "[]", crossplane.io/external-name: shop-data}
spec:
  managementPolicies: [Observe, LateInitialize]
  forProvider: {region: eu}`

const ungatedBucket = `apiVersion: recorder.m.kausality.io/v1alpha1
kind: Bucket
metadata: {name: other, namespace: team-a, labels: {team: a}}
spec:
  managementPolicies: ["*"]`

const composition = `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xstores}
spec:
  pipeline:
  - {step: patch-and-transform, functionRef: {name: function-patch-and-transform}}
  - {step: kausality, functionRef: {name: function-kausality}}`

func TestRelease(t *testing.T) {
	dynamic := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: policycontroller.DynamicName}}
	type want struct {
		err       string
		out       []string
		bucket    map[string]any // shop-data afterwards: labels, annotations, managementPolicies
		untouched bool
	}
	released := map[string]any{"labels": map[string]any{"crossplane.io/composite": "shop"}, "annotations": map[string]any{"crossplane.io/external-name": "shop-data"}, "managementPolicies": []any{"*"}}
	releasedTo := func(mps ...any) map[string]any {
		return map[string]any{"labels": map[string]any{"crossplane.io/composite": "shop"}, "annotations": map[string]any{"crossplane.io/external-name": "shop-data"}, "managementPolicies": mps}
	}
	cases := map[string]struct {
		reason    string
		extra     []client.Object
		requested string // the bucket's kausality.io/requested-policies, "" for none
		opts      Options
		want      want
	}{
		"ObserveOnlyImportStaysObserveOnly": {
			reason:    "An observe-only import gets back [Observe], what its Composition asks for, not the providers' default: released, its provider never creates, updates or deletes the cloud resource.",
			requested: `["Observe"]`, opts: Options{Yes: true},
			want: want{out: []string{"released Bucket team-a/shop-data: managementPolicies [Observe LateInitialize] → [Observe]"}, bucket: releasedTo("Observe")},
		},
		"KeepOnDeleteKeepsNoDelete": {
			reason:    "A resource its Composition keeps on deletion gets back its policies without Delete.",
			requested: `["Create","Update","Observe","LateInitialize"]`, opts: Options{Yes: true},
			want: want{bucket: releasedTo("Create", "Update", "Observe", "LateInitialize")},
		},
		"ChosenPoliciesOnlyNarrow": {
			reason:    "--management-policies narrows what the pipeline asks for, never widens it.",
			requested: `["Observe"]`, opts: Options{Yes: true, ManagementPolicies: []string{"Observe", "Create", "Update", "Delete"}},
			want: want{bucket: releasedTo("Observe")},
		},
		"UnreadableRecordLeftAlone": {
			reason:    "A record that does not read is reported and the resource is left gated as it is.",
			requested: `Observe`, opts: Options{Yes: true},
			want: want{err: "kausality.io/requested-policies", untouched: true},
		},
		"ListsWithoutYes": {
			reason: "Without --yes it only says what it would release, and names the Composition that still runs the function.",
			want:   want{out: []string{"would release Bucket team-a/shop-data: managementPolicies [Observe LateInitialize] → [*]", "1 gated managed resources", "Composition xstores still runs function-kausality (step kausality)"}, untouched: true},
		},
		"Releases": {
			reason: "With --yes the gate, the gated label and every kausality.io annotation go; everything else stays; the ungated Bucket is not touched.",
			opts:   Options{Yes: true},
			want:   want{out: []string{"released Bucket team-a/shop-data"}, bucket: released},
		},
		"ChosenPolicies": {
			reason: "The management policies a released resource gets can be chosen.",
			opts:   Options{Yes: true, ManagementPolicies: []string{"Observe"}},
			want: want{out: []string{"→ [Observe]"}, bucket: map[string]any{"labels": map[string]any{"crossplane.io/composite": "shop"},
				"annotations": map[string]any{"crossplane.io/external-name": "shop-data"}, "managementPolicies": []any{"Observe"}}},
		},
		"ProviderStillInstalled": {
			reason: "While provider-kausality's webhooks exist they would gate each resource again: refused, touching nothing.",
			extra:  []client.Object{dynamic},
			opts:   Options{Yes: true},
			want:   want{err: "provider-kausality is still installed", untouched: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := runtime.NewScheme()
			_ = clientgoscheme.AddToScheme(s)
			gated := object(t, gatedBucket)
			if tc.requested != "" {
				ann := gated.GetAnnotations()
				ann["kausality.io/requested-policies"] = tc.requested
				gated.SetAnnotations(ann)
			}
			objs := append([]client.Object{object(t, bucketsCRD), gated, object(t, ungatedBucket), object(t, composition)}, tc.extra...)
			kube := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
			var out bytes.Buffer
			err := Release(context.Background(), kube, tc.opts, &out)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nRelease(): %v, want an error containing %q", tc.reason, err, tc.want.err)
				}
			} else if err != nil {
				t.Fatalf("%s\nRelease(): %v", tc.reason, err)
			}
			for _, w := range tc.want.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("%s\noutput %q does not contain %q", tc.reason, out.String(), w)
				}
			}
			get := func(name string) *unstructured.Unstructured {
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("recorder.m.kausality.io/v1alpha1")
				u.SetKind("Bucket")
				if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, u); err != nil {
					t.Fatal(err)
				}
				return u
			}
			b := get("shop-data")
			mps, _, _ := unstructured.NestedSlice(b.Object, "spec", "managementPolicies")
			got := map[string]any{"labels": toAny(b.GetLabels()), "annotations": toAny(b.GetAnnotations()), "managementPolicies": mps}
			if tc.want.untouched {
				if diff := cmp.Diff(object(t, gatedBucket).Object["spec"], b.Object["spec"]); diff != "" || b.GetLabels()["kausality.io/gated"] != "true" {
					t.Errorf("%s\nshop-data was changed: %s", tc.reason, diff)
				}
			} else if diff := cmp.Diff(tc.want.bucket, got); diff != "" {
				t.Errorf("%s\nshop-data: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(object(t, ungatedBucket).Object["spec"], get("other").Object["spec"]); diff != "" {
				t.Errorf("%s\nthe ungated Bucket changed: %s", tc.reason, diff)
			}
		})
	}
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
