package show

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

func obj(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func ref(apiVersion, kind, name string) map[string]any {
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "name": name}
}

func ready() map[string]any {
	return map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True"}, map[string]any{"type": "Ready", "status": "True"}}}
}

func bucket(name, resource string) *unstructured.Unstructured {
	u := obj("s3.aws.m.upbound.io/v1beta1", "Bucket", "team-a", name, map[string]any{
		"spec":   map[string]any{"managementPolicies": []any{"Observe", "LateInitialize"}},
		"status": ready(),
	})
	u.SetLabels(map[string]string{v1alpha1.LabelGated: "true"})
	u.SetAnnotations(map[string]string{"crossplane.io/composition-resource-name": resource})
	return u
}

// The tree: an XPlatform composes an XStorage (nested) and a logs bucket;
// the XStorage composes a data bucket and references one that is gone.
func objects() []client.Object {
	platform := obj("example.org/v1alpha1", "XPlatform", "team-a", "shop", map[string]any{
		"spec": map[string]any{"crossplane": map[string]any{"resourceRefs": []any{
			ref("s3.aws.m.upbound.io/v1beta1", "Bucket", "shop-logs"),
			ref("example.org/v1alpha1", "XStorage", "shop-storage"),
		}}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True"}, map[string]any{"type": "Ready", "status": "True"},
			map[string]any{"type": v1alpha1.ConditionCreated, "status": "True"},
			map[string]any{"type": v1alpha1.ConditionAllowed, "status": "False", "message": "resource logs: withheld Mutate spec.forProvider.tags"},
		}},
	})
	storage := obj("example.org/v1alpha1", "XStorage", "team-a", "shop-storage", map[string]any{
		"spec": map[string]any{"crossplane": map[string]any{"resourceRefs": []any{
			ref("s3.aws.m.upbound.io/v1beta1", "Bucket", "shop-data"),
			ref("s3.aws.m.upbound.io/v1beta1", "Bucket", "shop-gone"),
		}}},
		"status": ready(),
	})
	storage.SetAnnotations(map[string]string{"crossplane.io/composition-resource-name": "storage"})
	return []client.Object{platform, storage, bucket("shop-logs", "logs"), bucket("shop-data", "data")}
}

func reader(t *testing.T) client.WithWatch {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(objects()...).Build()
}

// readShop reads the tree of XPlatform team-a/shop through r.
func readShop(t *testing.T, r client.Reader) *Node {
	t.Helper()
	root := &unstructured.Unstructured{}
	root.SetAPIVersion("example.org/v1alpha1")
	root.SetKind("XPlatform")
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "shop"}, root); err != nil {
		t.Fatal(err)
	}
	n, err := Read(context.Background(), r, root)
	if err != nil {
		t.Fatalf("Read(...): %v", err)
	}
	return n
}

func TestRead(t *testing.T) {
	n := readShop(t, reader(t))
	var got []string
	n.Walk(func(n *Node) {
		got = append(got, strings.Join([]string{string(n.Role), n.Kind + "/" + n.Name, n.Path, n.summary()}, " | "))
	})
	want := []string{
		"Composite | XPlatform/shop |  | withheld: resource logs: withheld Mutate spec.forProvider.tags",
		"Managed | Bucket/shop-logs | logs | gate closed",
		"Composite | XStorage/shop-storage | storage | being created",
		" | Bucket/shop-gone |  | gone",
		"Managed | Bucket/shop-data | storage/data | gate closed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read(...): -want, +got:\n%s", diff)
	}
}

// TestReadUnreadable: a reference the user may not read (a legacy
// Claim's cluster-scoped XR, for its namespaced owner) is shown as such,
// and the rest of the tree still is.
func TestReadUnreadable(t *testing.T) {
	r := interceptor.NewClient(reader(t), interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
		if key.Name == "shop-storage" {
			return kerrors.NewForbidden(schema.GroupResource{Group: "example.org", Resource: "xstorages"}, key.Name, errors.New("no"))
		}
		return c.Get(ctx, key, o, opts...)
	}})
	n := readShop(t, r)
	var got []string
	n.Walk(func(n *Node) { got = append(got, n.Kind+"/"+n.Name+" | "+n.summary()) })
	want := []string{
		"XPlatform/shop | withheld: resource logs: withheld Mutate spec.forProvider.tags",
		"XStorage/shop-storage | not readable with your permissions",
		"Bucket/shop-logs | gate closed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read(...): -want, +got:\n%s", diff)
	}
}

func TestPrint(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XPlatform"}, meta.RESTScopeNamespace)
	cases := map[string]struct {
		reason   string
		resource string
		name     string
		format   string
		want     []string // lines or parts of the output, in order
		err      string
	}{
		"Default": {
			reason: "The tree drawn in the first column, what Kausality holds in the last.", resource: "xplatforms/shop", format: FormatDefault,
			want: []string{"NAME", "KAUSALITY", "XPlatform/shop", "withheld: resource logs", "├─ Bucket/shop-logs", "gate closed", "└─ XStorage/shop-storage", "being created", "   ├─ Bucket/shop-gone", "gone", "   └─ Bucket/shop-data"},
		},
		"Wide": {
			reason: "Wide adds the initiator and the trace.", resource: "xplatforms", name: "shop", format: FormatWide,
			want: []string{"INITIATOR", "TRACE"},
		},
		"BothNames": {reason: "TYPE/NAME and NAME together are ambiguous.", resource: "xplatforms/shop", name: "other", format: FormatDefault, err: "not both"},
		"NoName":    {reason: "A TYPE alone names nothing.", resource: "xplatforms", format: FormatDefault, err: "names no object"},
		"UnknownKind": {reason: "A TYPE the API server does not serve is named.", resource: "xwidgets/shop", format: FormatDefault,
			err: `cannot find the kind of "xwidgets"`},
		"UnknownFormat": {reason: "An unknown output format is named.", resource: "xplatforms/shop", format: "table", err: `unknown output format "table"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := Trace(context.Background(), reader(t), mapper, "team-a", tc.resource, tc.name, tc.format, &out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s\nTrace(...) = %v, want an error containing %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nTrace(...): %v", tc.reason, err)
			}
			rest := out.String()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%s\noutput lacks %q after what came before:\n%s", tc.reason, w, out.String())
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestPrintJSON(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XPlatform"}, meta.RESTScopeNamespace)
	var out bytes.Buffer
	if err := Trace(context.Background(), reader(t), mapper, "team-a", "xplatforms/shop", "", FormatJSON, &out); err != nil {
		t.Fatal(err)
	}
	var n Node
	if err := json.Unmarshal(out.Bytes(), &n); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if n.Role != report.RoleComposite || len(n.Children) != 2 || n.Children[1].Children[1].Path != "storage/data" || n.Withheld == "" {
		t.Errorf("decoded tree %+v: want the XPlatform, its two children, the nested data bucket and the withheld change", n)
	}
}

func TestRoleOf(t *testing.T) {
	cases := map[string]struct {
		spec map[string]any
		want report.Role
	}{
		"LegacyClaim":     {spec: map[string]any{"compositionRef": map[string]any{"name": "c"}, "resourceRef": map[string]any{"kind": "XDatabase", "name": "x"}}, want: report.RoleClaim},
		"LegacyComposite": {spec: map[string]any{"compositionRef": map[string]any{"name": "c"}, "resourceRefs": []any{}}, want: report.RoleComposite},
		"ModernComposite": {spec: map[string]any{"crossplane": map[string]any{}}, want: report.RoleComposite},
		"Managed":         {spec: map[string]any{"forProvider": map[string]any{}}, want: report.RoleManaged},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RoleOf(&unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}); got != tc.want {
				t.Errorf("RoleOf(spec %v) = %s, want %s", tc.spec, got, tc.want)
			}
		})
	}
}

func TestListed(t *testing.T) {
	claimKind := schema.GroupKind{Group: "example.org", Kind: "DatabaseClaim"}
	legacy := func(ns string) *unstructured.Unstructured {
		return obj("example.org/v1alpha1", "XDatabase", "", "orders-x7", map[string]any{"spec": map[string]any{
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
		"Namespaced":        {reason: "A namespaced object was listed in its namespace.", o: bucket("b", "data"), namespace: "team-a", want: true},
		"ClaimListed":       {reason: "A legacy XR whose Claim's kind a policy names is listed under its Claim.", o: legacy("team-a"), namespace: "team-a", kinds: map[schema.GroupKind]bool{claimKind: true}, want: false},
		"ClaimNotListed":    {reason: "A legacy XR whose Claim's kind no policy names is listed itself.", o: legacy("team-a"), namespace: "team-a", want: true},
		"OtherNamespace":    {reason: "A legacy XR of a Claim in another namespace is not listed.", o: legacy("team-b"), namespace: "team-a", want: false},
		"AllNamespaces":     {reason: "Across all namespaces a legacy XR is listed by its Claim's namespace rule alone.", o: legacy("team-b"), want: true},
		"NoClaimNamespaced": {reason: "A cluster-scoped XR without a Claim is in no namespace.", o: obj("example.org/v1alpha1", "XDatabase", "", "lone", map[string]any{}), namespace: "team-a", want: false},
		"NoClaimAll":        {reason: "It is listed across all namespaces.", o: obj("example.org/v1alpha1", "XDatabase", "", "lone", map[string]any{}), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := listed(tc.o, tc.namespace, tc.kinds); got != tc.want {
				t.Errorf("%s\nlisted(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
