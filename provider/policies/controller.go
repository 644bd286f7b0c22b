// Package policies is the controller for AllowancePolicies: it reports on
// each whether its CEL and paths compile (the Ready condition) and keeps
// the admission configuration that follows from all of them current: the
// webhook rules for the kinds policies name, and the
// ValidatingAdmissionPolicies that protect them from deletion.
package policies

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Reasons of the Ready condition.
const (
	ReasonCompiled = "Compiled"
	ReasonInvalid  = "InvalidPolicy"
)

// Reconciler sets an AllowancePolicy's Ready condition and resynchronises
// the admission configuration.
type Reconciler struct {
	Kube     client.Client
	Cache    *policy.Cache
	Webhooks *Webhooks
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.AllowancePolicy{}
	if err := r.Kube.Get(ctx, req.NamespacedName, p); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, errors.Wrapf(err, "cannot get AllowancePolicy %s", req.Name)
		}
		return ctrl.Result{}, r.Webhooks.Sync(ctx)
	}
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
		Message: "every CEL expression and path compiled", ObservedGeneration: p.GetGeneration()}
	if _, err := r.Cache.Compile(p); err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalid, err.Error()
	}
	before := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if before == nil || before.Status != c.Status || before.Message != c.Message || p.Status.ObservedGeneration != p.GetGeneration() {
		meta.SetStatusCondition(&p.Status.Conditions, c)
		p.Status.ObservedGeneration = p.GetGeneration()
		if err := r.Kube.Status().Update(ctx, p); err != nil {
			return ctrl.Result{}, errors.Wrapf(err, "cannot update the status of AllowancePolicy %s", p.GetName())
		}
	}
	return ctrl.Result{}, r.Webhooks.Sync(ctx)
}

// Setup adds the controller to mgr.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("allowancepolicy").For(&v1alpha1.AllowancePolicy{}).Complete(r)
}
