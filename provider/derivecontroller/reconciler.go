// Package derivecontroller keeps AllowancePolicies derived from Compositions in
// sync with the Compositions' revisions: the controller the provider runs
// with --derive-policies. It is a thin shell around internal/derivation, which
// decides what to write; this package reads the Composition, its newest
// CompositionRevision, the XRD and the live policy, and writes what that
// decision says.
//
// A derived policy is an administrator's object like any other: the
// controller never deletes it, gives it no owner (deleting a Composition
// must not lift the restrictions on XRs that still exist), and never
// overwrites a spec someone else edited. It reports that conflict on the
// policy's Derived condition instead.
package derivecontroller

import (
	"context"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/derivation"
)

// Event reasons.
const (
	// ReasonCannotDerive: the Composition's annotations or pipeline do not
	// derive a policy; nothing is written until the Composition changes.
	ReasonCannotDerive = "CannotDerive"
	// ReasonNotDerived: a policy of the derived policy's name exists and
	// is not derived from this Composition; it is left alone.
	ReasonNotDerived = "PolicyNotDerived"
)

// Reconciler keeps the derived AllowancePolicy of each Composition
// annotated kausality.io/derive-policy: "true".
type Reconciler struct {
	// Kube reads Compositions, revisions and policies (cached) and writes
	// policies.
	Kube client.Client
	// Definitions resolve composed kinds and the XR's schema.
	Definitions Definitions
	// Events are recorded on the Composition when nothing can be derived,
	// and on the policy when it is written or a conflict is found.
	Events events.EventRecorder
	Log    logging.Logger
}

// Reconcile implements reconcile.Reconciler for one Composition.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &xpv1.Composition{}
	if err := r.Kube.Get(ctx, req.NamespacedName, c); err != nil {
		// A deleted Composition leaves its policy in place: XRs composed
		// by its revisions may still exist, and the policy bounds them.
		return ctrl.Result{}, errors.Wrapf(client.IgnoreNotFound(err), "cannot get Composition %s", req.Name)
	}
	if !derivation.Wants(c.GetAnnotations()) {
		return ctrl.Result{}, nil
	}
	revs := &xpv1.CompositionRevisionList{}
	if err := r.Kube.List(ctx, revs, client.MatchingLabels{xpv1.LabelCompositionName: c.GetName()}); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, errFmtListCompositionRevisionsComposition, c.GetName())
	}
	rev := derivation.Latest(c.GetName(), revs.Items)
	if rev == nil {
		// Crossplane has not made the first revision yet; its creation
		// triggers this again.
		return ctrl.Result{}, nil
	}
	ref := derivation.RevisionRef(c.GetName(), rev)
	o, err := derivation.OptionsFrom(c)
	if err != nil {
		r.cannot(c, err)
		return ctrl.Result{}, nil
	}
	m, err := derivation.ReadRevision(c.GetName(), rev)
	if err != nil {
		r.cannot(c, err)
		return ctrl.Result{}, nil
	}
	if o.XRSchema, err = r.Definitions.Schema(ctx, m.XR); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, errFmtReadXRDComposition, m.XR, c.GetName())
	}
	o.Resolver = r.Definitions
	desired, err := derivation.Desired(m, ref, o)
	if err != nil {
		return ctrl.Result{}, errors.Wrapf(err, errFmtComposition, c.GetName())
	}
	var live *v1alpha1.AllowancePolicy
	p := &v1alpha1.AllowancePolicy{}
	switch err := r.Kube.Get(ctx, client.ObjectKey{Name: desired.GetName()}, p); {
	case err == nil:
		live = p
	case !kerrors.IsNotFound(err):
		return ctrl.Result{}, errors.Wrapf(err, errFmtGetAllowancePolicy, desired.GetName())
	}
	d := derivation.Decide(m, desired, live, r.Definitions)
	log := r.Log.WithValues("composition", c.GetName(), "revision", ref, "policy", desired.GetName(), "action", d.Action)
	switch d.Action {
	case derivation.ActionForeign:
		r.Events.Eventf(c, live, corev1.EventTypeWarning, ReasonNotDerived, "Derive",
			"AllowancePolicy %s exists and is not derived from this Composition (annotation %s), so it is left alone; name another with %s",
			desired.GetName(), derivation.AnnotationDerivedFrom, derivation.AnnotationDerivedPolicyName)
		return ctrl.Result{}, nil
	case derivation.ActionCreate:
		if err := r.Kube.Create(ctx, d.Policy); err != nil {
			return ctrl.Result{}, errors.Wrapf(err, errFmtCreateAllowancePolicyDerivedFrom, d.Policy.GetName(), ref)
		}
		live = d.Policy
		log.Info("created the derived policy")
	case derivation.ActionUpdate:
		if err := r.Kube.Update(ctx, d.Policy); err != nil {
			return ctrl.Result{}, errors.Wrapf(err, errFmtUpdateAllowancePolicyDerivedFrom, d.Policy.GetName(), ref)
		}
		live = d.Policy
		log.Info("updated the derived policy", "changes", d.Changes)
	}
	return ctrl.Result{}, r.setCondition(ctx, live, d)
}

// setCondition sets the Derived condition on p, once per change of it, and
// records an Event with it.
func (r *Reconciler) setCondition(ctx context.Context, p *v1alpha1.AllowancePolicy, d *derivation.Decision) error {
	before := meta.FindStatusCondition(p.Status.Conditions, derivation.ConditionDerived)
	if before != nil && before.Status == d.Condition.Status && before.Reason == d.Condition.Reason && before.Message == d.Condition.Message &&
		before.ObservedGeneration == p.GetGeneration() {
		return nil
	}
	c := d.Condition
	c.ObservedGeneration = p.GetGeneration()
	meta.SetStatusCondition(&p.Status.Conditions, c)
	if err := r.Kube.Status().Update(ctx, p); err != nil {
		return errors.Wrapf(err, errFmtSetConditionAllowancePolicy, derivation.ConditionDerived, p.GetName())
	}
	typ := corev1.EventTypeNormal
	if c.Status != metav1.ConditionTrue {
		typ = corev1.EventTypeWarning
	}
	r.Events.Eventf(p, nil, typ, c.Reason, "Derive", "%s", c.Message)
	return nil
}

// cannot records why nothing can be derived from c. The Composition's next
// change triggers another attempt, so the error is not retried.
func (r *Reconciler) cannot(c *xpv1.Composition, err error) {
	r.Log.Info("cannot derive a policy", "composition", c.GetName(), "error", err.Error())
	r.Events.Eventf(c, nil, corev1.EventTypeWarning, ReasonCannotDerive, "Derive", "%s", err.Error())
}

// Setup adds the controller to mgr. A new CompositionRevision and any
// change of a derived policy (an edit, a deletion) look at its Composition
// again: the first is the update to derive, the second may be a conflict to
// report or a policy to create afresh.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	byRevision := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if n := o.GetLabels()[xpv1.LabelCompositionName]; n != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: n}}}
		}
		return nil
	})
	byPolicy := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if n, _, _ := strings.Cut(o.GetAnnotations()[derivation.AnnotationDerivedFrom], "/"); n != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: n}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named("derivation").For(&xpv1.Composition{}).
		Watches(&xpv1.CompositionRevision{}, byRevision).
		Watches(&v1alpha1.AllowancePolicy{}, byPolicy).
		Complete(r)
}
