package compose

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// policyService restricts the Service an App composes; a rule lets the
// platform team expose it (spec.exposed), naming the metadata it sets.
var policyService = xdatabasePolicy(`  rules:
  - trigger: spec.exposed
    policies:
    - target: {apiGroup: "", apiVersion: v1, resource: services}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: "metadata.annotations[service.beta.kubernetes.io/aws-load-balancer-scheme]", verbs: [Insert, Mutate]}
      - {jsonPath: "metadata.annotations[external-dns.alpha.kubernetes.io/hostname]", verbs: [Insert, Mutate]}
      - {jsonPath: "metadata.labels[exposure]", verbs: [Insert, Mutate]}
`)

// service is the App's Service with the labels and annotations given, as
// a pipeline composes it (Crossplane's own keys come with the observed
// one).
func service(labels, annotations map[string]any) map[string]any {
	md := map[string]any{"name": "app", "namespace": "default"}
	if labels != nil {
		md["labels"] = labels
	}
	if annotations != nil {
		md["annotations"] = annotations
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": md,
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}, "selector": map[string]any{"app": "app"}},
	}
}

// TestComposedKindMetadata: for a composed Kubernetes kind, labels and
// annotations are the change (a load balancer's scheme, a DNS name): a
// Composition edit that exposes the App's Service without a cause is
// withheld like a change of its body, Crossplane's and Kausality's own
// keys pass, and a permitted change that names them goes through.
func TestComposedKindMetadata(t *testing.T) {
	exposed := map[string]any{
		"service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
		"external-dns.alpha.kubernetes.io/hostname":           "app.example.com",
	}
	observedLabels := map[string]any{"app": "app", "crossplane.io/composite": "db"}
	observedAnn := map[string]any{"crossplane.io/composition-resource-name": "svc"}
	exposeAllowance := allowance.Allowance{
		Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "", APIVersion: "v1", Resource: "services"},
		Verbs: []string{v1alpha1.VerbUpdate}, Generation: 2, Initiator: "alice",
		Mutations: []v1alpha1.MutationBound{
			{JSONPath: "metadata.annotations[service.beta.kubernetes.io/aws-load-balancer-scheme]", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert}},
			{JSONPath: "metadata.annotations[external-dns.alpha.kubernetes.io/hostname]", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert}},
			{JSONPath: "metadata.labels[exposure]", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert}},
		},
		Trace: allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 2, Field: "spec.exposed", User: "alice", Timestamp: "2026-11-22T11:59:01Z"}},
	}
	cases := map[string]struct {
		reason          string
		xrAnn           map[string]string
		observed        map[string]any // service(observedLabels, observedAnn) when nil
		desired         map[string]any
		wantLabels      map[string]any
		wantAnnotations []string // keys the answer has besides Kausality's
		withheld        bool
	}{
		"ExposureWithheld": {
			reason:     "The Composition edit adds the internet-facing scheme, an external-dns hostname and a label with no cause: all three are withheld, the Service keeps its observed metadata, and the XR says so.",
			desired:    service(map[string]any{"app": "app", "exposure": "public"}, exposed),
			wantLabels: map[string]any{"app": "app"}, withheld: true,
		},
		"ExposurePermitted": {
			reason:     "Alice's permitted exposure names the keys: they go through.",
			xrAnn:      map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{exposeAllowance})},
			desired:    service(map[string]any{"app": "app", "exposure": "public"}, exposed),
			wantLabels: map[string]any{"app": "app", "exposure": "public"}, wantAnnotations: []string{"external-dns.alpha.kubernetes.io/hostname", "service.beta.kubernetes.io/aws-load-balancer-scheme"},
		},
		"UnexposureWithheld": {
			reason:     "Dropping the label the pipeline set before, with no cause, is withheld too: the Service keeps it.",
			observed:   service(map[string]any{"app": "app", "exposure": "public", "crossplane.io/composite": "db"}, observedAnn),
			desired:    service(map[string]any{"app": "app"}, nil),
			wantLabels: map[string]any{"app": "app", "exposure": "public"}, withheld: true,
		},
		"CrossplaneKeysPass": {
			reason:     "Crossplane's own keys on the observed Service are not the pipeline's: the pipeline not repeating them changes nothing.",
			desired:    service(map[string]any{"app": "app"}, nil),
			wantLabels: map[string]any{"app": "app"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// An XR whose creation is over: an insert is a change like any
			// other, not part of the creation.
			x := xrWithConditions(t,
				map[string]any{"type": v1alpha1.ConditionCreated, "status": "True", "reason": ReasonCreated},
				map[string]any{"type": "Ready", "status": "True", "reason": "Available"})
			if tc.xrAnn != nil {
				m := x.AsMap()
				m["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.AnnotationAllowances: tc.xrAnn[v1alpha1.AnnotationAllowances]}
				x = mustStruct(t, m)
			}
			req := newRequest(t, x, nil, nil, policyService)
			obs := tc.observed
			if obs == nil {
				obs = service(observedLabels, observedAnn)
			}
			// What the pipeline set last time: the observed Service's own
			// content.
			obs = runtime.DeepCopyJSON(obs)
			obs["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.AnnotationApplied] = mutation.Record("", policy.Content(obs), skipManaged).String()
			req.Observed.Resources = map[string]*fnv1.Resource{"svc": {Resource: mustStruct(t, obs)}}
			req.Desired.Resources["svc"] = &fnv1.Resource{Resource: mustStruct(t, tc.desired), Ready: fnv1.Ready_READY_TRUE}
			rsp, err := newTestFunction().RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := rsp.GetDesired().GetResources()["svc"].GetResource().AsMap()
			labels, _, _ := unstructured.NestedMap(got, "metadata", "labels")
			if diff := cmp.Diff(tc.wantLabels, labels); diff != "" {
				t.Errorf("%s\nlabels: -want +got:\n%s", tc.reason, diff)
			}
			ann, _, _ := unstructured.NestedStringMap(got, "metadata", "annotations")
			var keys []string
			for k := range ann {
				if k != "crossplane.io/composition-resource-name" && !strings.HasPrefix(k, "kausality.io/") {
					keys = append(keys, k)
				}
			}
			if diff := cmp.Diff(tc.wantAnnotations, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nannotations: -want +got:\n%s", tc.reason, diff)
			}
			if w := hasWarning(rsp); w != tc.withheld {
				t.Errorf("%s\na Warning result: %t, want %t (%v)", tc.reason, w, tc.withheld, rsp.GetResults())
			}
		})
	}
}
