package policycontroller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

func TestUpgradeReconcile(t *testing.T) {
	bucketGVK := schema.GroupVersionKind{Group: "recorder.kausality.io", Version: "v1alpha1", Kind: "Bucket"}
	ua := func(name, version string) *v1alpha1.UpgradeAllowance {
		return &v1alpha1.UpgradeAllowance{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2}, Spec: v1alpha1.UpgradeAllowanceSpec{
			Functions: []v1alpha1.FunctionVersion{{Name: "function-patch-and-transform", Version: version}},
			Policies:  []v1alpha1.PolicyEntry{{Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}}, Relation: v1alpha1.RelationExternal, Verbs: []string{v1alpha1.VerbUpdate}}},
		}}
	}
	hop := func(kind, name string) allowance.Hop {
		return allowance.Hop{APIVersion: "v1", Kind: kind, Name: name, Generation: 1}
	}
	bucket := func(name string, gated bool, trace allowance.Trace, as ...allowance.Allowance) *unstructured.Unstructured {
		b := &unstructured.Unstructured{}
		b.SetGroupVersionKind(bucketGVK)
		b.SetName(name)
		if gated {
			b.SetLabels(map[string]string{v1alpha1.LabelGated: "true"})
		}
		b.SetAnnotations(map[string]string{v1alpha1.AnnotationTrace: allowance.FormatTrace(trace), v1alpha1.AnnotationAllowances: allowance.Format(as)})
		return b
	}
	upgradeTrace := allowance.Trace{hop(v1alpha1.UpgradeAllowanceKind, "pt"), hop("XDatabase", "x"), hop("Bucket", "a")}
	open := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbUpdate, 2, upgradeTrace)
	consumed := open
	consumed.Consumed = true
	userTrace := allowance.Trace{hop("DatabaseClaim", "c"), hop("XDatabase", "x"), hop("Bucket", "d")}

	type want struct {
		ready              metav1.ConditionStatus
		message            string
		upgraded, waiting  int64
		observedGeneration int64
	}
	cases := map[string]struct {
		reason string
		objs   []client.Object
		want   want
	}{
		"Counts": {
			reason: "Gated resources whose trace starts at it are upgraded; those holding an unconsumed allowance it roots wait; a user's change, another UpgradeAllowance's, a consumed allowance and an ungated resource count for nothing.",
			objs: []client.Object{ua("pt", "v0.10.*"),
				bucket("a", true, upgradeTrace, consumed),
				bucket("b", true, upgradeTrace, open),
				bucket("c", true, userTrace, open),
				bucket("d", true, allowance.Trace{hop(v1alpha1.UpgradeAllowanceKind, "other"), hop("Bucket", "d")}),
				bucket("e", false, upgradeTrace, open),
			},
			want: want{ready: metav1.ConditionTrue, message: "every path, version pattern and propagateWhen compiled", upgraded: 2, waiting: 2, observedGeneration: 2},
		},
		"InvalidRollout": {
			reason: "A rollout whose propagateWhen does not compile makes it not Ready, naming the expression.",
			objs: []client.Object{func() *v1alpha1.UpgradeAllowance {
				u := ua("pt", "v0.10.*")
				u.Spec.Rollout = &v1alpha1.UpgradeRollout{PropagateWhen: []string{"exponentiallyUpdated(xr, clusters)"}}
				return u
			}()},
			want: want{ready: metav1.ConditionFalse, observedGeneration: 2,
				message: "UpgradeAllowance pt: spec.rollout: propagateWhen[0] \"exponentiallyUpdated(xr, clusters)\": ERROR: <input>:1:26: undeclared reference to 'clusters' (in container '')\n | exponentiallyUpdated(xr, clusters)\n | .........................^"},
		},
		"InvalidVersion": {
			reason: "A version pattern that does not compile makes it not Ready, naming the field.",
			objs:   []client.Object{ua("pt", "v0.[")},
			want: want{ready: metav1.ConditionFalse, observedGeneration: 2,
				message: `UpgradeAllowance pt is invalid: spec.functions[0].version: "v0.[" is not a pattern (* stands for any run of characters): syntax error in pattern`},
		},
	}
	t.Run("OnePassForAll", func(t *testing.T) {
		// Every UpgradeAllowance's counts come from one pass over the
		// gated resources, not a pass each.
		lists := 0
		kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithStatusSubresource(&v1alpha1.UpgradeAllowance{}).
			WithObjects(ua("pt", "v0.10.*"), ua("other", "v0.10.*"),
				bucket("a", true, upgradeTrace, consumed),
				bucket("d", true, allowance.Trace{hop(v1alpha1.UpgradeAllowanceKind, "other"), hop("Bucket", "d")})).
			WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
				lists++
				return c.List(ctx, l, opts...)
			}}).Build()
		r := &UpgradeReconciler{Kube: kube, Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{bucketGVK} }}
		for _, name := range []string{"pt", "other"} {
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
				t.Fatal(err)
			}
			u := &v1alpha1.UpgradeAllowance{}
			if err := kube.Get(context.Background(), types.NamespacedName{Name: name}, u); err != nil {
				t.Fatal(err)
			}
			if u.Status.Upgraded != 1 {
				t.Errorf("UpgradeAllowance %s: status.upgraded = %d, want 1", name, u.Status.Upgraded)
			}
		}
		if lists != 1 {
			t.Errorf("two UpgradeAllowances listed the gated Buckets %d times, want once", lists)
		}
	})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(tc.objs...).WithStatusSubresource(&v1alpha1.UpgradeAllowance{}).Build()
			r := &UpgradeReconciler{Kube: kube, Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{bucketGVK} }}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "pt"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != UpgradeRecount {
				t.Errorf("RequeueAfter = %s, want %s: the counts change without an event on the UpgradeAllowance", res.RequeueAfter, UpgradeRecount)
			}
			u := &v1alpha1.UpgradeAllowance{}
			if err := kube.Get(context.Background(), types.NamespacedName{Name: "pt"}, u); err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil {
				t.Fatalf("%s\nno Ready condition", tc.reason)
			}
			got := want{ready: c.Status, message: c.Message, upgraded: u.Status.Upgraded, waiting: u.Status.Waiting, observedGeneration: u.Status.ObservedGeneration}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
