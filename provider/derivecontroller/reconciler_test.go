package derivecontroller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/derivation"
)

const comp = "xdatabases"

// revision is revision n of the Composition: 1 patches the bucket's size,
// 2 also its region.
func revision(t *testing.T, n int) *xpv1.CompositionRevision {
	t.Helper()
	patches := "\n          - {fromFieldPath: spec.size, toFieldPath: spec.forProvider.size}"
	if n >= 2 {
		patches += "\n          - {fromFieldPath: spec.region, toFieldPath: spec.forProvider.region}"
	}
	y := fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: CompositionRevision
metadata:
  name: %s-%d
  labels: {crossplane.io/composition-name: %s}
spec:
  revision: %d
  compositeTypeRef: {apiVersion: example.com/v1alpha1, kind: XDatabase}
  mode: Pipeline
  pipeline:
  - step: resources
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: bucket
        base: {apiVersion: recorder.kausality.io/v1alpha1, kind: Bucket}
        patches:%s
`, comp, n, comp, n, patches)
	r := &xpv1.CompositionRevision{}
	if err := yaml.Unmarshal([]byte(y), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func composition(ann map[string]string) *xpv1.Composition {
	return &xpv1.Composition{ObjectMeta: metav1.ObjectMeta{Name: comp, Annotations: ann}}
}

var annotated = map[string]string{
	derivation.AnnotationDerivePolicy:   "true",
	derivation.AnnotationDeriveSubjects: "group=platform-team",
}

// written is the policy the provider writes for revision n.
func written(t *testing.T, n int) *v1alpha1.AllowancePolicy {
	t.Helper()
	c := composition(annotated)
	o, err := derivation.OptionsFrom(c)
	if err != nil {
		t.Fatal(err)
	}
	rev := revision(t, n)
	m, err := derivation.ReadRevision(comp, rev)
	if err != nil {
		t.Fatal(err)
	}
	p, err := derivation.Desired(m, derivation.RevisionRef(comp, rev), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// defs knows no kind (the derivation guesses buckets) and no XRD.
type defs struct{}

func (defs) Resolve(schema.GroupVersionKind) (derivation.Kind, bool, error) {
	return derivation.Kind{}, false, nil
}

func (defs) Schema(context.Context, schema.GroupVersionKind) (*derivation.Schema, error) {
	return nil, nil
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, xpv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestReconcile(t *testing.T) {
	edited := written(t, 1)
	edited.Spec.Subjects = nil
	handWritten := written(t, 1)
	handWritten.Annotations = nil
	errBoom := errors.New("boom")

	cases := map[string]struct {
		reason  string
		objs    []client.Object
		intr    *interceptor.Funcs
		wantErr string
		// want is the policy's spec afterwards (nil: no policy), from its
		// derived-from, and condition its Derived condition's reason.
		want      *v1alpha1.AllowancePolicySpec
		from      string
		condition string
		event     string
	}{
		"NotAnnotated": {
			reason: "A Composition that does not ask for a derived policy gets none: the feature is opt-in per Composition.",
			objs:   []client.Object{composition(nil), revision(t, 1)},
		},
		"NoRevisionYet": {
			reason: "Until Crossplane made a revision there is nothing to name in derived-from.",
			objs:   []client.Object{composition(annotated)},
		},
		"Creates": {
			reason: "The derived policy is created when absent, naming the revision it comes from.",
			objs:   []client.Object{composition(annotated), revision(t, 1)},
			want:   &written(t, 1).Spec, from: "xdatabases/1", condition: derivation.ReasonSynced, event: derivation.ReasonSynced,
		},
		"NewRevisionUpdates": {
			reason: "A new revision updates the policy the provider wrote.",
			objs:   []client.Object{composition(annotated), revision(t, 1), revision(t, 2), written(t, 1)},
			want:   &written(t, 2).Spec, from: "xdatabases/2", condition: derivation.ReasonSynced, event: derivation.ReasonSynced,
		},
		"EditedIsReported": {
			reason: "An administrator's edit is never overwritten: the new revision's derivation is reported on the Derived condition.",
			objs:   []client.Object{composition(annotated), revision(t, 1), revision(t, 2), edited},
			want:   &edited.Spec, from: "xdatabases/1", condition: derivation.ReasonConflict, event: derivation.ReasonConflict,
		},
		"HandWrittenLeftAlone": {
			reason: "A policy of the same name the provider did not derive is left alone, and the Composition says so.",
			objs:   []client.Object{composition(annotated), revision(t, 1), handWritten},
			want:   &handWritten.Spec, event: ReasonNotDerived,
		},
		"BadAnnotation": {
			reason: "An annotation that does not parse is reported on the Composition, not retried until it changes.",
			objs: []client.Object{composition(map[string]string{derivation.AnnotationDerivePolicy: "true", derivation.AnnotationDeriveDeleting: "cascade"}),
				revision(t, 1)},
			event: ReasonCannotDerive,
		},
		"GetPolicyFails": {
			reason: "A failed read of the policy is an error naming it, retried.",
			objs:   []client.Object{composition(annotated), revision(t, 1)},
			intr: &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*v1alpha1.AllowancePolicy); ok {
					return errBoom
				}
				return c.Get(ctx, key, obj, opts...)
			}},
			wantErr: "cannot get AllowancePolicy xdatabases: boom",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(tc.objs...).WithStatusSubresource(&v1alpha1.AllowancePolicy{})
			if tc.intr != nil {
				b = b.WithInterceptorFuncs(*tc.intr)
			}
			kube := b.Build()
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{Kube: kube, Definitions: defs{}, Events: rec, Log: logging.NewNopLogger()}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: comp}})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nReconcile() error = %v, want %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nReconcile(): %v", tc.reason, err)
			}
			p := &v1alpha1.AllowancePolicy{}
			err = kube.Get(context.Background(), client.ObjectKey{Name: comp}, p)
			if tc.want == nil {
				if err == nil {
					t.Errorf("%s\nAllowancePolicy %s exists, want none", tc.reason, comp)
				}
			} else {
				if err != nil {
					t.Fatalf("%s\n%v", tc.reason, err)
				}
				if diff := cmp.Diff(derivation.Normalized(*tc.want), derivation.Normalized(p.Spec)); diff != "" {
					t.Errorf("%s\nspec: -want, +got:\n%s", tc.reason, diff)
				}
				if got := p.Annotations[derivation.AnnotationDerivedFrom]; got != tc.from {
					t.Errorf("%s\nderived-from = %q, want %q", tc.reason, got, tc.from)
				}
				c := meta.FindStatusCondition(p.Status.Conditions, derivation.ConditionDerived)
				switch {
				case tc.condition == "" && c != nil:
					t.Errorf("%s\ncondition %s = %+v, want none", tc.reason, derivation.ConditionDerived, c)
				case tc.condition != "" && (c == nil || c.Reason != tc.condition):
					t.Errorf("%s\ncondition %s = %+v, want reason %s", tc.reason, derivation.ConditionDerived, c, tc.condition)
				}
			}
			var got []string
			for len(rec.Events) > 0 {
				got = append(got, <-rec.Events)
			}
			if tc.event == "" && len(got) > 0 || tc.event != "" && (len(got) != 1 || !strings.Contains(got[0], " "+tc.event+" ")) {
				t.Errorf("%s\nevents %q, want one with reason %q", tc.reason, got, tc.event)
			}
		})
	}
}

// TestReconcileIsIdempotent: a second pass over a synced policy writes
// nothing, so the watch on policies does not loop.
func TestReconcileIsIdempotent(t *testing.T) {
	writes := 0
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(composition(annotated), revision(t, 1)).
		WithStatusSubresource(&v1alpha1.AllowancePolicy{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				writes++
				return c.Update(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes++
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	r := &Reconciler{Kube: kube, Definitions: defs{}, Events: events.NewFakeRecorder(10), Log: logging.NewNopLogger()}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: comp}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	writes = 0
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if writes != 0 {
		t.Errorf("the second Reconcile wrote %d times, want 0", writes)
	}
}
