package kinds

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// scripted is a Watcher whose discovery finds what it is told to.
type scripted struct {
	kinds     []Kind
	finds     []Kind // what the next Discover finds
	discovers int
}

func (s *scripted) Discover() error { s.discovers++; s.kinds = append(s.kinds, s.finds...); return nil }
func (s *scripted) Kinds() []Kind   { return s.kinds }

func crd(categories []string, established bool) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "buckets.recorder.kausality.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "recorder.kausality.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Bucket", Plural: "buckets", Categories: categories}},
	}
	if established {
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	}
	return c
}

func TestCRDsReconcile(t *testing.T) {
	buckets := Kind{GVK: bucket, Resource: "buckets"}
	type want struct {
		result    reconcile.Result
		discovers int
	}
	cases := map[string]struct {
		reason  string
		objs    []client.Object
		watcher *scripted
		want    want
	}{
		"NewManagedKindDiscovered": {
			reason:  "An established CRD of the managed category starts discovery at once.",
			objs:    []client.Object{crd([]string{"crossplane", "managed"}, true)},
			watcher: &scripted{finds: []Kind{buckets}},
			want:    want{discovers: 1},
		},
		"DiscoveryLags": {
			reason:  "Discovery does not serve the kind yet: look again shortly.",
			objs:    []client.Object{crd([]string{"managed"}, true)},
			watcher: &scripted{},
			want:    want{result: reconcile.Result{RequeueAfter: discoveryLag}, discovers: 1},
		},
		"AlreadyWatched": {
			reason:  "A kind already watched needs no discovery.",
			objs:    []client.Object{crd([]string{"managed"}, true)},
			watcher: &scripted{kinds: []Kind{buckets}},
			want:    want{},
		},
		"NotEstablished": {
			reason:  "A CRD not established yet serves nothing to discover; its Established update comes as an event.",
			objs:    []client.Object{crd([]string{"managed"}, false)},
			watcher: &scripted{finds: []Kind{buckets}},
			want:    want{},
		},
		"NotManaged": {
			reason:  "Other CRDs (composites, provider configs) are not managed kinds.",
			objs:    []client.Object{crd([]string{"composite"}, true)},
			watcher: &scripted{finds: []Kind{buckets}},
			want:    want{},
		},
		"Gone": {
			reason:  "A deleted CRD is nothing to do.",
			watcher: &scripted{finds: []Kind{buckets}},
			want:    want{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := runtime.NewScheme()
			if err := apiextensionsv1.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			c := &CRDs{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(tc.objs...).Build(), Watcher: tc.watcher}
			r, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "buckets.recorder.kausality.io"}})
			if err != nil {
				t.Fatalf("%s\nReconcile: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, want{result: r, discovers: tc.watcher.discovers}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nReconcile: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
