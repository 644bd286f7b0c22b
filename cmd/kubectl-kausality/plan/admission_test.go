package plan

import (
	"context"
	"strings"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestDryRunConflicts: a write between the plan's read and its dry run
// (Crossplane syncing the Claim right after a Composition changed) is no
// verdict on the change; it was reported as a denial, and the plan of a
// permitted resize rendered nothing.
func TestDryRunConflicts(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "DatabaseClaim"}
	gr := schema.GroupResource{Group: gvk.Group, Resource: "databaseclaims"}
	claim := func(size string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace("team-a")
		u.SetName("orders")
		return u
	}
	cases := map[string]struct {
		reason      string
		conflicts   int   // dry runs answered 409 before the answer
		answer      error // the dry run's answer after them
		wantAllowed bool
		wantMessage string
		wantTries   int
	}{
		"NoConflict": {reason: "A dry run admission allows is allowed.",
			wantAllowed: true, wantTries: 1},
		"ConflictOnce": {reason: "A conflict is read again and tried again.",
			conflicts: 1, wantAllowed: true, wantTries: 2},
		"Denied": {reason: "Admission's denial is the plan's.",
			answer: kerrors.NewForbidden(gr, "orders", nil), wantMessage: "forbidden", wantTries: 1},
		"AlwaysConflicting": {reason: "An object that never holds still is reported as the API server answered, after a bounded number of tries.",
			conflicts: 100, wantMessage: "Operation cannot be fulfilled", wantTries: maxConflicts},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := meta.NewDefaultRESTMapper(nil)
			m.Add(gvk, meta.RESTScopeNamespace)
			tries := 0
			cl := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithRESTMapper(m).WithObjects(claim("small")).
				WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					tries++
					switch {
					case tries <= tc.conflicts:
						return kerrors.NewConflict(gr, "orders", nil)
					case tc.answer != nil:
						return tc.answer
					}
					return c.Update(ctx, obj, opts...)
				}}).Build()
			res, err := dryRun(context.Background(), Options{Client: cl, Mapper: m, Warnings: &Warnings{}}, claim("large"))
			if err != nil {
				t.Fatal(err)
			}
			if res.admission.Allowed != tc.wantAllowed || !strings.Contains(res.admission.Message, tc.wantMessage) || tries != tc.wantTries {
				t.Errorf("%s\ndryRun: allowed %t message %q after %d tries; want allowed %t, a message with %q, %d tries",
					tc.reason, res.admission.Allowed, res.admission.Message, tries, tc.wantAllowed, tc.wantMessage, tc.wantTries)
			}
		})
	}
}
