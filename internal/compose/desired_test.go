package compose

import (
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// TestSetDesired checks that answering with the request's own Struct values
// gives exactly the response that encoding every resource whole gives, and
// leaves the request untouched.
func TestSetDesired(t *testing.T) {
	cases := map[string]struct {
		in    string // desired resource as the request has it; "" for none
		out   string // desired resource as the function leaves it
		stamp *stamp // what the function stamps on it, if anything
	}{
		"Stamped": {
			in:    rds("db.t3.large", ""),
			out:   rds("db.t3.large", "  labels: {team: a}") + "  managementPolicies: [Observe, Update, LateInitialize]\n",
			stamp: &stamp{annotations: map[string]string{"kausality.io/trace": "[]", "x": "y"}, gated: true},
		},
		"StampedNotGated": {
			in:    rds("db.t3.large", "  labels: {team: a}\n  annotations: {old: z}"),
			out:   rds("db.t3.large", "  labels: {team: a}\n  annotations: {old: z}"),
			stamp: &stamp{annotations: map[string]string{"kausality.io/applied": "{}"}},
		},
		"StampedWithoutMetadata": {
			in:    "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			out:   "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			stamp: &stamp{annotations: map[string]string{"x": "y"}, gated: true},
		},
		"GateOpened": {
			in:  rds("db.t3.large", ""),
			out: rds("db.t3.large", "") + "  managementPolicies: [Observe, Update, LateInitialize]\n",
		},
		"AnnotationsAndLabelsStamped": {
			in: rds("db.t3.large", ""),
			out: rds("db.t3.large", "  annotations: {kausality.io/trace: \"[]\"}\n  labels: {kausality.io/gated: \"true\"}") +
				"  managementPolicies: [Observe, LateInitialize]\n",
		},
		"NoSpecGetsManagementPolicies": {
			in:  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			out: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nspec:\n  managementPolicies: [Observe]\n",
		},
		"NoSpecAtAll": {
			in:  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n",
			out: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, annotations: {x: y}}\ndata: {a: b}\n",
		},
		"NoMetadataInRequest": {
			in:  "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			out: "apiVersion: v1\nkind: ConfigMap\nmetadata: {annotations: {x: y}}\ndata: {a: b}\n",
		},
		"CreatedHere": {
			out: rds("db.t3.large", ""),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := &fnv1.RunFunctionRequest{Desired: &fnv1.State{Resources: map[string]*fnv1.Resource{}}}
			if tc.in != "" {
				req.Desired.Resources["r"] = &fnv1.Resource{
					Resource: obj(t, tc.in), Ready: fnv1.Ready_READY_TRUE,
					ConnectionDetails: map[string][]byte{"password": []byte("p")},
				}
			}
			before := proto.Clone(req)
			o := obj(t, tc.out).AsMap()
			integers(o)
			// The resource as the SDK would encode it: with the stamp applied.
			stamped := runtimeCopy(o)
			if tc.stamp != nil {
				tc.stamp.apply(stamped)
			}
			a := answer{DesiredComposed: &resource.DesiredComposed{Resource: &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: o}}}, stamp: tc.stamp}

			got := response.To(req, 0)
			if err := setDesired(got, req, map[resource.Name]answer{"r": a}); err != nil {
				t.Fatalf("setDesired(): %v", err)
			}
			want := response.To(proto.Clone(before).(*fnv1.RunFunctionRequest), 0)
			a.rewritten = true
			if err := setDesired(want, req, map[resource.Name]answer{"r": a}); err != nil {
				t.Fatalf("setDesired(rewritten): %v", err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("setDesired(): -whole, +patched:\n%s", diff)
			}
			if diff := cmp.Diff(before, req, protocmp.Transform()); diff != "" {
				t.Errorf("setDesired() changed the request: -before, +after:\n%s", diff)
			}
			// The whole encoding is the SDK's own.
			s, err := structpb.NewStruct(stamped)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s, got.GetDesired().GetResources()["r"].GetResource(), protocmp.Transform()); diff != "" {
				t.Errorf("setDesired(): -want resource, +got:\n%s", diff)
			}
		})
	}
}
