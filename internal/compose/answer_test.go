package compose

import (
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// TestSetDesired checks that answering with the request's own Struct values
// gives exactly the response that encoding every resource whole gives, that
// both are the resource the stamp describes, and that neither the request
// nor the pipeline's decoded resource is written.
func TestSetDesired(t *testing.T) {
	const gatedLabel = "kausality.io/gated: \"true\""
	cases := map[string]struct {
		in    string // desired resource as the request has it; "" for none
		obj   string // the pipeline's resource as decoded; "": in
		spec  string // the spec this run rewrote, if any
		stamp *stamp // what the function stamps on it, if anything
		want  string // the resource as answered
	}{
		"Stamped": {
			in:    rds("db.t3.large", "  labels: {team: a}"),
			stamp: &stamp{annotations: map[string]string{"kausality.io/trace": "[]", "x": "v"}, gated: true, policies: []string{"Observe", "Update", "LateInitialize"}},
			want: rds("db.t3.large", "  labels: {team: a, "+gatedLabel+"}\n  annotations: {kausality.io/trace: \"[]\", x: v}") +
				"  managementPolicies: [Observe, Update, LateInitialize]\n",
		},
		"StampedNotGated": {
			in:    rds("db.t3.large", "  labels: {team: a}\n  annotations: {old: z}"),
			stamp: &stamp{annotations: map[string]string{"kausality.io/applied": "{}"}},
			want:  rds("db.t3.large", "  labels: {team: a}\n  annotations: {kausality.io/applied: \"{}\"}"),
		},
		"StampedWithoutMetadata": {
			in:    "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			stamp: &stamp{annotations: map[string]string{"x": "v"}, gated: true},
			want:  "apiVersion: v1\nkind: ConfigMap\nmetadata: {annotations: {x: v}, labels: {" + gatedLabel + "}}\ndata: {a: b}\n",
		},
		"PipelinePoliciesReplaced": {
			in:    rds("db.t3.large", "") + "  managementPolicies: ['*']\n",
			stamp: &stamp{policies: []string{"Observe", "LateInitialize"}},
			want:  rds("db.t3.large", "") + "  managementPolicies: [Observe, LateInitialize]\n",
		},
		"PipelinePoliciesKept": {
			in:    rds("db.t3.large", "") + "  managementPolicies: ['*']\n",
			stamp: &stamp{annotations: map[string]string{"x": "v"}},
			want:  rds("db.t3.large", "  annotations: {x: v}") + "  managementPolicies: ['*']\n",
		},
		"NoSpecGetsManagementPolicies": {
			in:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			stamp: &stamp{policies: []string{"Observe"}},
			want:  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nspec:\n  managementPolicies: [Observe]\n",
		},
		"Unstamped": {
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n",
			want: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n",
		},
		"RewrittenSpec": {
			in:    rds("db.t3.large", ""),
			spec:  "forProvider: {region: eu-central-1, instanceClass: db.t3.small}",
			stamp: &stamp{policies: []string{"Observe"}},
			want:  rds("db.t3.small", "") + "  managementPolicies: [Observe]\n",
		},
		"CreatedHere": {
			obj:   rds("db.t3.large", ""),
			stamp: &stamp{annotations: map[string]string{"x": "v"}},
			want:  rds("db.t3.large", "  annotations: {x: v}"),
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
			pipeline := tc.obj
			if pipeline == "" {
				pipeline = tc.in
			}
			o := obj(t, pipeline).AsMap()
			integers(o)
			decoded := runtimeCopy(o)
			a := answer{DesiredComposed: &resource.DesiredComposed{Resource: &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: o}}}, stamp: tc.stamp}
			if tc.spec != "" {
				a.body.rewritten, a.body.spec = true, obj(t, tc.spec).AsMap()
			}

			got := response.To(req, 0)
			if err := setDesired(got, req, map[resource.Name]answer{"r": a}); err != nil {
				t.Fatalf("setDesired(): %v", err)
			}
			whole := a
			if !whole.body.rewritten {
				whole.body.rewritten, whole.body.spec = true, o["spec"]
			}
			want := response.To(proto.Clone(before).(*fnv1.RunFunctionRequest), 0)
			if err := setDesired(want, req, map[resource.Name]answer{"r": whole}); err != nil {
				t.Fatalf("setDesired(rewritten): %v", err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("setDesired(): -whole, +patched:\n%s", diff)
			}
			if diff := cmp.Diff(before, req, protocmp.Transform()); diff != "" {
				t.Errorf("setDesired() changed the request: -before, +after:\n%s", diff)
			}
			if diff := cmp.Diff(decoded, o); diff != "" {
				t.Errorf("setDesired() changed the pipeline's resource: -before, +after:\n%s", diff)
			}
			if diff := cmp.Diff(obj(t, tc.want), got.GetDesired().GetResources()["r"].GetResource(), protocmp.Transform()); diff != "" {
				t.Errorf("setDesired(): -want resource, +got:\n%s", diff)
			}
		})
	}
}
