// Package policycontroller is the controller for AllowancePolicies: it reports on
// each whether its CEL and paths compile and its targets resolve (the Ready
// condition, status.targets) and keeps
// the admission configuration that follows from all of them current: the
// webhook rules for the kinds policies name, and the
// ValidatingAdmissionPolicies that protect them from deletion.
package policycontroller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/provider/kinds"
)

// Reasons of the Ready condition.
const (
	ReasonCompiled   = "Compiled"
	ReasonInvalid    = "InvalidPolicy"
	ReasonUnresolved = "UnresolvedTarget"
	// ReasonNotInForce: the policy compiled but the webhook configurations
	// could not be written for it yet.
	ReasonNotInForce = "NotInForce"
)

// unresolvedRetry is how soon a policy with a target the API server does
// not serve is looked at again, besides every CRD change.
const unresolvedRetry = 30 * time.Second

// Reconciler sets an AllowancePolicy's Ready condition and resolved
// targets, and resynchronises the admission configuration.
type Reconciler struct {
	Kube     client.Client
	Cache    *policy.Cache
	Resolver Resolver
	Webhooks *Webhooks
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.AllowancePolicy{}
	if err := r.Kube.Get(ctx, req.NamespacedName, p); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, errors.Wrapf(err, errFmtGetAllowancePolicy, req.Name)
		}
		return ctrl.Result{}, r.Webhooks.Sync(ctx)
	}
	targets, unresolved, err := r.resolve(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
		Message: "every CEL expression and path compiled and every target resolved", ObservedGeneration: p.GetGeneration()}
	if _, err := r.Cache.Compile(p); err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalid, err.Error()
	} else if len(unresolved) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonUnresolved
		c.Message = fmt.Sprintf("the API server serves no resource %s (no CustomResourceDefinition of that name); every kind of its apiGroup counts as restricted until it does", strings.Join(unresolved, ", "))
	}
	// Ready says the policy is in force: admission sees its kinds, so a
	// platform team that waits for it knows from then on a change needs a
	// cause.
	synced := r.Webhooks.Sync(ctx)
	if synced != nil && c.Status == metav1.ConditionTrue {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNotInForce
		c.Message = "admission is not configured for it yet: " + synced.Error()
	}
	before := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if before == nil || before.Status != c.Status || before.Message != c.Message || p.Status.ObservedGeneration != p.GetGeneration() ||
		!equality.Semantic.DeepEqual(p.Status.Targets, targets) {
		meta.SetStatusCondition(&p.Status.Conditions, c)
		p.Status.ObservedGeneration = p.GetGeneration()
		p.Status.Targets = targets
		if err := r.Kube.Status().Update(ctx, p); err != nil {
			return ctrl.Result{}, errors.Wrapf(err, errFmtUpdateStatusAllowancePolicy, p.GetName())
		}
	}
	var res ctrl.Result
	if len(unresolved) > 0 {
		res.RequeueAfter = unresolvedRetry
	}
	return res, synced
}

// resolve looks up every resource p's targets name; unresolved are those
// the API server does not serve, as resource.group.
func (r *Reconciler) resolve(ctx context.Context, p *v1alpha1.AllowancePolicy) ([]v1alpha1.ResolvedTarget, []string, error) {
	var targets []v1alpha1.ResolvedTarget
	var unresolved []string
	for _, n := range policy.TargetsOf(p) {
		t, ok, err := r.Resolver.Resolve(ctx, n)
		if err != nil {
			return nil, nil, errors.Wrapf(err, errFmtResolveTargetsAllowancePolicy, p.GetName())
		}
		if !ok {
			unresolved = append(unresolved, n.String())
			continue
		}
		targets = append(targets, t)
	}
	return targets, unresolved, nil
}

// Setup adds the controller to mgr. Every CRD change looks at every policy
// again: a target may name the kind it defines.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		l := &v1alpha1.AllowancePolicyList{}
		if err := r.Kube.List(ctx, l); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(l.Items))
		for _, p := range l.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).Named("allowancepolicy").For(&v1alpha1.AllowancePolicy{}).
		Watches(kinds.CRDMetadata(), all, builder.OnlyMetadata).Complete(r)
}
