package status

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/trace"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree/treetest"
)

func TestListed(t *testing.T) {
	claimKind := schema.GroupKind{Group: "example.org", Kind: "DatabaseClaim"}
	legacy := func(ns string) *unstructured.Unstructured {
		return treetest.Obj("example.org/v1alpha1", "XDatabase", "", "orders-x7", map[string]any{"spec": map[string]any{
			"claimRef": map[string]any{"apiVersion": "example.org/v1alpha1", "kind": "DatabaseClaim", "namespace": ns, "name": "orders"},
		}})
	}
	cases := map[string]struct {
		reason    string
		o         *unstructured.Unstructured
		namespace string
		kinds     map[schema.GroupKind]bool
		want      bool
	}{
		"Namespaced":        {reason: "A namespaced object was listed in its namespace.", o: treetest.Bucket("b", "data"), namespace: "team-a", want: true},
		"ClaimListed":       {reason: "A legacy XR whose Claim's kind a policy names is listed under its Claim.", o: legacy("team-a"), namespace: "team-a", kinds: map[schema.GroupKind]bool{claimKind: true}, want: false},
		"ClaimNotListed":    {reason: "A legacy XR whose Claim's kind no policy names is listed itself.", o: legacy("team-a"), namespace: "team-a", want: true},
		"OtherNamespace":    {reason: "A legacy XR of a Claim in another namespace is not listed.", o: legacy("team-b"), namespace: "team-a", want: false},
		"AllNamespaces":     {reason: "Across all namespaces a legacy XR is listed by its Claim's namespace rule alone.", o: legacy("team-b"), want: true},
		"NoClaimNamespaced": {reason: "A cluster-scoped XR without a Claim is in no namespace.", o: treetest.Obj("example.org/v1alpha1", "XDatabase", "", "lone", map[string]any{}), namespace: "team-a", want: false},
		"NoClaimAll":        {reason: "It is listed across all namespaces.", o: treetest.Obj("example.org/v1alpha1", "XDatabase", "", "lone", map[string]any{}), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := listed(tc.o, tc.namespace, tc.kinds); got != tc.want {
				t.Errorf("%s\nlisted(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// withheldCreate is a cluster with one XR whose composed instance is
// kept shut at creation (its gate never opened Create), and the line its
// KausalityAllowed condition says it with.
func withheldCreate(t *testing.T) (client.Reader, string) {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	const line = "resource rds (RDSInstance db-rds): withheld Create: its gate stays closed: no unconsumed External allowance grants Create of rds.aws.crossplane.io RDSInstance, so it is not created in the cloud"
	xr := treetest.Obj("example.org/v1alpha1", "XPlatform", "team-a", "shop", map[string]any{
		"spec": map[string]any{"crossplane": map[string]any{"resourceRefs": []any{treetest.Ref("s3.aws.m.upbound.io/v1beta1", "Bucket", "shop-logs")}}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True"}, map[string]any{"type": "Ready", "status": "True"},
			map[string]any{"type": v1alpha1.ConditionAllowed, "status": "False", "message": line},
		}},
	})
	p := &v1alpha1.AllowancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "xplatforms"}, Spec: v1alpha1.AllowancePolicySpec{For: v1alpha1.ObjectKind{APIGroup: "example.org", APIVersion: "v1alpha1", Kind: "XPlatform"}}}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(p, xr, treetest.Bucket("shop-logs", "logs")).Build(), line
}

// TestStatusWithheldCreate: an XR whose composed instance is kept shut at
// creation is listed with the withheld Create and as still being
// created, and trace says the same on its line.
func TestStatusWithheldCreate(t *testing.T) {
	r, line := withheldCreate(t)
	var out bytes.Buffer
	if err := Status(context.Background(), r, "team-a", printer.FormatDefault, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"XPlatform/shop", "withheld: " + line, "being created"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := trace.Trace(context.Background(), r, treetest.Mapper(), "team-a", "xplatforms/shop", "", printer.FormatDefault, &out); err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(out.String(), "\n", 3)[1]; !strings.Contains(first, "withheld Create") || !strings.Contains(first, "being created") {
		t.Errorf("trace's XR line does not name the withheld Create and the creation going on: %q", first)
	}
}

// TestStatusFormats: status prints its List in the formats it takes, and
// refuses the ones that make no sense for a list (no columns to add, no
// tree to draw) by naming the ones it takes.
func TestStatusFormats(t *testing.T) {
	r, line := withheldCreate(t)
	item := Item{APIVersion: "example.org/v1alpha1", Kind: "XPlatform", Namespace: "team-a", Name: "shop", Holds: []Hold{
		{Kind: "XPlatform", Name: "shop", Summary: "withheld: " + line + "; being created"},
	}}
	type args struct {
		namespace string
		format    printer.Format
	}
	type want struct {
		list List
		err  string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"JSON": {
			reason: "JSON is the List.",
			args:   args{namespace: "team-a", format: printer.FormatJSON},
			want:   want{list: List{Items: []Item{item}}},
		},
		"YAML": {
			reason: "YAML is the List too.",
			args:   args{namespace: "team-a", format: printer.FormatYAML},
			want:   want{list: List{Items: []Item{item}}},
		},
		"Empty": {
			reason: "Nothing held is an empty list, not null.",
			args:   args{namespace: "team-b", format: printer.FormatJSON},
			want:   want{list: List{Items: []Item{}}},
		},
		"Wide": {
			reason: "Status has no columns to add.",
			args:   args{namespace: "team-a", format: printer.FormatWide},
			want:   want{err: `output format "wide" does not apply to this command: use one of default, json, yaml`},
		},
		"Dot": {
			reason: "Status lists roots, no tree to draw.",
			args:   args{namespace: "team-a", format: printer.FormatDot},
			want:   want{err: `output format "dot" does not apply to this command: use one of default, json, yaml`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := Status(context.Background(), r, tc.args.namespace, tc.args.format, &out)
			if tc.want.err != "" {
				if err == nil || err.Error() != tc.want.err {
					t.Errorf("%s\nStatus(...) = %v, want %q", tc.reason, err, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nStatus(...): %v", tc.reason, err)
			}
			var got List
			if err := yaml.UnmarshalStrict(out.Bytes(), &got); err != nil {
				t.Fatalf("%s\noutput is not a List: %v\n%s", tc.reason, err, out.String())
			}
			if diff := cmp.Diff(tc.want.list, got); diff != "" {
				t.Errorf("%s\nStatus(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
