package parents

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestServed: every read through Served asks for resourceVersion "0", and
// returns what the reader holds.
func TestServed(t *testing.T) {
	var asked []string
	k := reader([]client.Object{xnop()}, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		o := &client.GetOptions{}
		o.ApplyOptions(opts)
		rv := "<none>"
		if o.Raw != nil {
			rv = o.Raw.ResourceVersion
		}
		asked = append(asked, rv)
		return c.Get(ctx, key, obj, opts...)
	}})

	got, err := Composite(context.Background(), Served{Reader: k}, nop(ownedBy("example.org/v1alpha1", "XNop", "xnop", true)))
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.GetName() != "xnop" {
		t.Fatalf("Composite(...) = %v, want xnop", got)
	}
	if diff := cmp.Diff([]string{"0"}, asked); diff != "" {
		t.Errorf("resourceVersions asked for: -want +got:\n%s", diff)
	}
}
