package policycontroller

import (
	"context"
	"sync"
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

	// tally is the last count of every UpgradeAllowance, taken in one pass
	// over the gated managed resources: each reconcile of each
	// UpgradeAllowance reading them all again would cost the provider
	// O(UpgradeAllowances × managed resources) every UpgradeRecount.
	mu    sync.Mutex
	tally *tally
}

// tally is how many gated managed resources each UpgradeAllowance, by
// name, upgraded and how many wait for it, counted at a moment.
type tally struct {
	at                time.Time
	upgraded, waiting map[string]int64
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
	t, err := r.counts(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	upgraded, waiting := t.upgraded[u.GetName()], t.waiting[u.GetName()]
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

// counts is the tally of every UpgradeAllowance, taken again once the
// last is half an UpgradeRecount old: each UpgradeAllowance's counts are
// then at most that old when it is reconciled on its recount.
func (r *UpgradeReconciler) counts(ctx context.Context) (*tally, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tally != nil && time.Since(r.tally.at) < UpgradeRecount/2 {
		return r.tally, nil
	}
	t, err := r.count(ctx)
	if err != nil {
		return nil, err
	}
	r.tally = t
	return t, nil
}

// count reads every gated managed resource once: a resource whose trace
// starts at an UpgradeAllowance is upgraded by it, one holding an
// unconsumed allowance an UpgradeAllowance roots waits for it. A resource
// whose annotations do not parse counts for none (the gate controller
// reports it).
func (r *UpgradeReconciler) count(ctx context.Context) (*tally, error) {
	t := &tally{at: time.Now(), upgraded: map[string]int64{}, waiting: map[string]int64{}}
	for _, gvk := range r.Kinds() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Kube.List(ctx, l, client.MatchingLabels{v1alpha1.LabelGated: "true"}); err != nil {
			return nil, errors.Wrapf(err, errFmtListGated, gvk.Kind)
		}
		for i := range l.Items {
			ann := l.Items[i].GetAnnotations()
			if tr, err := allowance.ParseTrace(ann[v1alpha1.AnnotationTrace]); err == nil && tr.FromUpgrade() {
				t.upgraded[tr[0].Name]++
			}
			as, _ := allowance.Parse(ann[v1alpha1.AnnotationAllowances])
			waits := map[string]bool{}
			for _, a := range as {
				if !a.Consumed && a.Trace.FromUpgrade() && !waits[a.Trace[0].Name] {
					waits[a.Trace[0].Name] = true
					t.waiting[a.Trace[0].Name]++
				}
			}
		}
	}
	return t, nil
}

// Setup adds the controller to mgr.
func (r *UpgradeReconciler) Setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("upgradeallowance").For(&v1alpha1.UpgradeAllowance{}).Complete(r)
}
