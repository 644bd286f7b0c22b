package tree

import (
	"context"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree/treetest"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

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
	n := readShop(t, treetest.Reader(t))
	var got []string
	n.Walk(func(n *Node) {
		got = append(got, strings.Join([]string{string(n.Role), n.Kind + "/" + n.Name, n.Path, n.Holds()}, " | "))
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
	r := interceptor.NewClient(treetest.Reader(t), interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
		if key.Name == "shop-storage" {
			return kerrors.NewForbidden(schema.GroupResource{Group: "example.org", Resource: "xstorages"}, key.Name, errors.New("no"))
		}
		return c.Get(ctx, key, o, opts...)
	}})
	n := readShop(t, r)
	var got []string
	n.Walk(func(n *Node) { got = append(got, n.Kind+"/"+n.Name+" | "+n.Holds()) })
	want := []string{
		"XPlatform/shop | withheld: resource logs: withheld Mutate spec.forProvider.tags",
		"XStorage/shop-storage | not readable with your permissions",
		"Bucket/shop-logs | gate closed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read(...): -want, +got:\n%s", diff)
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
