package policies

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// UpgradeRecount is how often an UpgradeAllowance's counts are brought up to
// date: what it reaches changes with managed resources of every kind, which
// the controller does not watch one by one.
const UpgradeRecount = 30 * time.Second

// UpgradeReconciler reports on each UpgradeAllowance whether it compiles
// (Ready) and how many gated managed resources it upgraded and how many
// wait for it.
type UpgradeReconciler struct {
	// Kube reads gated managed resources from the gate controller's cache.
	Kube client.Client
	// Kinds are the managed resource kinds the gate controller watches.
	Kinds func() []schema.GroupVersionKind
}

// Reconcile implements reconcile.Reconciler.
func (r *UpgradeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := &v1alpha1.UpgradeAllowance{}
	if err := r.Kube.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(errors.Wrapf(err, errFmtGetUpgradeAllowance, req.Name))
	}
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
		Message: "every path, version pattern and propagateWhen compiled", ObservedGeneration: u.GetGeneration()}
	err := policy.CompileUpgrade(u)
	if err == nil {
		_, _, err = rollout.CompileUpgrade(u)
	}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalid, err.Error()
	}
	upgraded, waiting, err := r.count(ctx, u.GetName())
	if err != nil {
		return ctrl.Result{}, err
	}
	before := meta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionReady)
	if before == nil || before.Status != c.Status || before.Message != c.Message || u.Status.ObservedGeneration != u.GetGeneration() ||
		u.Status.Upgraded != upgraded || u.Status.Waiting != waiting {
		meta.SetStatusCondition(&u.Status.Conditions, c)
		u.Status.ObservedGeneration = u.GetGeneration()
		u.Status.Upgraded, u.Status.Waiting = upgraded, waiting
		if err := r.Kube.Status().Update(ctx, u); err != nil {
			return ctrl.Result{}, errors.Wrapf(err, errFmtUpdateStatusUpgradeAllowance, u.GetName())
		}
	}
	return ctrl.Result{RequeueAfter: UpgradeRecount}, nil
}

// count reads every gated managed resource: upgraded are those whose trace
// starts at the UpgradeAllowance name, waiting those holding an unconsumed
// allowance it roots. A resource whose annotations do not parse counts for
// neither (the gate controller reports it).
func (r *UpgradeReconciler) count(ctx context.Context, name string) (upgraded, waiting int64, err error) {
	from := func(t allowance.Trace) bool {
		return t.FromUpgrade() && t[0].Name == name
	}
	for _, gvk := range r.Kinds() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Kube.List(ctx, l, client.MatchingLabels{v1alpha1.LabelGated: "true"}); err != nil {
			return 0, 0, errors.Wrapf(err, errFmtListGated, gvk.Kind)
		}
		for i := range l.Items {
			ann := l.Items[i].GetAnnotations()
			if t, err := allowance.ParseTrace(ann[v1alpha1.AnnotationTrace]); err == nil && from(t) {
				upgraded++
			}
			as, _ := allowance.Parse(ann[v1alpha1.AnnotationAllowances])
			for _, a := range as {
				if !a.Consumed && from(a.Trace) {
					waiting++
					break
				}
			}
		}
	}
	return upgraded, waiting, nil
}

// Setup adds the controller to mgr.
func (r *UpgradeReconciler) Setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("upgradeallowance").For(&v1alpha1.UpgradeAllowance{}).Complete(r)
}
