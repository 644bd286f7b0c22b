// Package gatecontroller is the gate controller: it watches managed
// resources labelled kausality.io/gated=true, of any kind, and keeps each
// one's spec.managementPolicies equal to the gate formula of internal/gate
// as allowances arrive, are consumed and expire.
package gatecontroller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/provider/parents"
)

// ConditionGate is the condition the controller sets on every gated
// managed resource: True while the gate is open.
const ConditionGate xpv2.ConditionType = v1alpha1.ConditionGateOpen

// Reasons of the GateOpen condition and of the controller's Events.
const (
	ReasonOpened      xpv2.ConditionReason = "Opened"
	ReasonClosed      xpv2.ConditionReason = "Closed"
	ReasonConsumed    xpv2.ConditionReason = "Consumed"
	ReasonExpired     xpv2.ConditionReason = "Expired"
	ReasonFrozen      xpv2.ConditionReason = "Frozen"
	ReasonUnsupported xpv2.ConditionReason = "Unsupported"
	// ReasonNotRequested: the allowances grant only verbs the resource's
	// Composition does not ask for (an observe-only import, a resource
	// kept on deletion), so the gate stays as the Composition asks.
	ReasonNotRequested xpv2.ConditionReason = "NotRequested"
	// ReasonUncovered: the spec differs from what was last let through to
	// the cloud by fields no open allowance covers, which would ride along.
	ReasonUncovered xpv2.ConditionReason = "UncoveredChange"
	ReasonInvalid   xpv2.ConditionReason = "InvalidAllowances"
	// ReasonDeletionRefused: the deletion a Delete gate was opened for
	// never became final; another admission check refused it.
	ReasonDeletionRefused xpv2.ConditionReason = "DeletionRefused"
)

// DefaultDeletionGrace is how long a Delete gate may wait for the deletion
// it was opened for to become final: longer than any admission request
// takes (the API server gives one a minute at most).
const DefaultDeletionGrace = time.Minute

// frozenRecheck is how often a frozen gate looks whether the freeze lifted.
const frozenRecheck = 15 * time.Second

// conflictRecheck is how soon a reconcile that lost a write race to
// Crossplane or the provider looks again.
const conflictRecheck = 100 * time.Millisecond

// Options configure the gate controller.
type Options struct {
	// Gate is how gates behave; a resource's own closed gate (the one its
	// Composition chose) wins over Gate.ReadOnly.
	Gate gate.Config
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// DeletionGrace is how long after a deletion opened a Delete gate the
	// controller waits for that deletion to be final before it revokes
	// the gate; DefaultDeletionGrace when zero.
	DeletionGrace time.Duration
}

// A Reconciler keeps the gate of the managed resources of one kind.
type Reconciler struct {
	kube    client.Client
	reader  client.Reader
	gvk     schema.GroupVersionKind
	opts    Options
	events  events.EventRecorder
	metrics *Metrics
	log     logging.Logger
}

// NewReconciler returns a Reconciler for managed resources of kind gvk.
// reader reads the parents a freeze may be set on and the deletion above:
// the provider passes parents.Served, answered from the API server's watch
// cache, since admission rereads them on every write that opens a gate.
func NewReconciler(kube client.Client, reader client.Reader, gvk schema.GroupVersionKind, rec events.EventRecorder, m *Metrics, o Options, log logging.Logger) *Reconciler {
	o.Gate = o.Gate.Defaulted()
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DeletionGrace == 0 {
		o.DeletionGrace = DefaultDeletionGrace
	}
	return &Reconciler{kube: kube, reader: reader, gvk: gvk, opts: o, events: rec, metrics: m, log: log.WithValues("kind", gvk.String())}
}

// Reconcile brings one managed resource's gate and consumption marks in
// line with its allowances and observed generation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mr := &unstructured.Unstructured{}
	mr.SetGroupVersionKind(r.gvk)
	if err := r.kube.Get(ctx, req.NamespacedName, mr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(errors.Wrapf(err, errFmtGet, r.gvk.Kind, req.NamespacedName))
	}
	if mr.GetLabels()[v1alpha1.LabelGated] != "true" || mr.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	ref := fmt.Sprintf("%s %s", r.gvk.Kind, client.ObjectKeyFromObject(mr))
	now := r.opts.Now()
	current, _ := fieldpath.Pave(mr.Object).GetStringArray(gate.PathManagementPolicies)
	cfg := r.opts.Gate.For(mr.Object)

	as, err := allowance.Parse(mr.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil {
		// Keep the annotation as it is (nothing is lost) but fail closed.
		msg := errors.Wrapf(err, errFmtParseAnnotation, v1alpha1.AnnotationAllowances, ref).Error()
		return ctrl.Result{}, r.apply(ctx, mr, current, cfg.Closed(), nil, nil, xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonInvalid, Message: msg}, corev1.EventTypeWarning)
	}
	as, revoked, recheck, err := r.revokeRefused(ctx, mr, as, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := cfg.Decide(mr.Object, mr.Object, as, now, r.frozen(ctx, mr, as))

	var marks []allowance.Allowance
	if d.Changed || len(revoked) > 0 {
		marks = d.Allowances
	}
	cond, eventType := r.condition(d, mr)
	var approval map[string]string
	if d.Approves || d.Withdraws {
		approval = d.Approved.Annotations()
	}
	if err := r.apply(ctx, mr, current, d.Policies, marks, approval, cond, eventType); err != nil {
		if kerrors.IsConflict(errors.Cause(err)) {
			// Crossplane or the provider wrote first; look again soon, and
			// quietly: a conflict is the normal race, not an error.
			return ctrl.Result{RequeueAfter: conflictRecheck}, nil
		}
		return ctrl.Result{}, err
	}
	if len(d.Withheld) > 0 {
		// A freeze on a parent lifts without an event on this resource.
		return ctrl.Result{RequeueAfter: frozenRecheck}, nil
	}
	waiting := append(slices.Clone(d.Open), d.Held...)
	if len(waiting) == 0 {
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	// Come back when the oldest open or held allowance expires.
	next := cfg.MaxOpen
	for _, a := range waiting {
		if ts, ok := a.StampedAt(); ok { // without a timestamp it never expires
			next = min(next, max(ts.Add(cfg.MaxOpen).Sub(now), 0)+time.Second)
		}
	}
	if recheck > 0 {
		next = min(next, recheck)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// revokeRefused marks consumed the Delete allowances of as whose deletion
// never became final: stamped longer than the grace ago while the composite
// above mr, and its Claim, still stand. The deletion webhook opens a Delete
// gate before the API server has the last word, and another admission
// check may still refuse the deletion; left open, the gate would let
// anyone's later deletion of mr delete the cloud resource (DESIGN §4a).
// recheck is when to look again at one still within the grace.
func (r *Reconciler) revokeRefused(ctx context.Context, mr *unstructured.Unstructured, as []allowance.Allowance, now time.Time) (out, revoked []allowance.Allowance, recheck time.Duration, err error) {
	out = as
	var final *bool
	for i, a := range as {
		if a.Consumed || !a.OpensDelete() || a.FromUpgrade() {
			// An UpgradeAllowance's Delete gate is for Crossplane deleting
			// a resource new logic dropped, no deletion above it; it
			// closes at the gate's time limit if that never comes.
			continue
		}
		if final == nil {
			f, err := parents.Deleting(ctx, r.reader, mr)
			if err != nil {
				return nil, nil, 0, errors.Wrapf(err, errFmtTellWhetherDeletionAboveFinal, mr.GetKind(), mr.GetName())
			}
			final = &f
		}
		if *final {
			return as, nil, 0, nil
		}
		ts, ok := a.StampedAt()
		if wait := ts.Add(r.opts.DeletionGrace).Sub(now); ok && wait > 0 {
			recheck = wait + time.Second
			continue
		}
		if revoked == nil {
			out = slices.Clone(as)
		}
		out[i].Consumed = true
		revoked = append(revoked, a)
	}
	return out, revoked, recheck, nil
}

// condition is the GateOpen condition for a decision, and the Event type
// announcing it.
func (r *Reconciler) condition(d gate.Decision, current *unstructured.Unstructured) (xpv2.Condition, string) {
	switch {
	case d.Err != nil:
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonUnsupported, Message: d.Err.Error()}, corev1.EventTypeWarning
	case len(d.Held) > 0 && len(d.Uncovered) > 0:
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonUncovered,
			Message: fmt.Sprintf("gate kept closed for %s: %s changed since generation %d was let through to the cloud and no open allowance covers it",
				describe(d.Held), strings.Join(d.Uncovered, ", "), d.Approved.Generation)}, corev1.EventTypeWarning
	case len(d.Open) > 0:
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionTrue, Reason: ReasonOpened,
			Message: fmt.Sprintf("gate open for %s: %s", strings.Join(d.Verbs, ", "), describe(d.Open))}, corev1.EventTypeNormal
	case len(d.Withheld) > 0:
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonFrozen,
			Message: fmt.Sprintf("gate closed by a freeze; withheld: %s", describe(d.Withheld))}, corev1.EventTypeWarning
	case len(d.Moot) > 0:
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonNotRequested,
			Message: fmt.Sprintf("gate kept to %v, what the Composition asks for: %s opens nothing", d.Policies, describe(d.Moot))}, corev1.EventTypeNormal
	case len(d.Expired) > 0:
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonExpired,
			Message: fmt.Sprintf("gate closed after %s: %s", r.opts.Gate.MaxOpen, describe(d.Expired))}, corev1.EventTypeWarning
	}
	// Allowances consumed since the condition was last written closed the
	// gate, whoever marked them (this controller, or admission settling a
	// write).
	prev := gateCondition(current)
	var consumed []allowance.Allowance
	for _, a := range d.Allowances {
		// Consumed since the condition was written: stamped after it, or
		// for the very generation the condition saw open.
		since := a.Generation > prev.ObservedGeneration || (prev.Status == corev1.ConditionTrue && a.Generation == prev.ObservedGeneration)
		if a.Consumed && a.Relation == v1alpha1.RelationExternal && since {
			consumed = append(consumed, a)
		}
	}
	// A Delete allowance is used up only by the deletion, and this
	// controller leaves deleted resources alone: one consumed here was
	// revoked (revokeRefused), whichever reconcile wrote the mark.
	if revoked := slices.DeleteFunc(slices.Clone(consumed), func(a allowance.Allowance) bool { return !a.OpensDelete() }); len(revoked) > 0 {
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonDeletionRefused,
			Message: fmt.Sprintf("Delete gate revoked: the deletion it was opened for did not happen within %s (another admission check refused it): %s", r.opts.DeletionGrace, describe(revoked))}, corev1.EventTypeWarning
	}
	if len(consumed) > 0 {
		return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonConsumed,
			Message: fmt.Sprintf("gate closed: consumed %s", describe(consumed))}, corev1.EventTypeNormal
	}
	if prev.Status == corev1.ConditionFalse {
		// Still closed: keep saying why it closed (Consumed, Expired).
		return prev, corev1.EventTypeNormal
	}
	return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonClosed, Message: "gate closed: no unconsumed External allowance"}, corev1.EventTypeNormal
}

// gateCondition is the managed resource's GateOpen condition.
func gateCondition(mr *unstructured.Unstructured) xpv2.Condition {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(mr.Object).GetValueInto("status", cs) // absent status: no conditions
	return cs.GetCondition(ConditionGate)
}

// describe names allowances by verbs, generation and initiator.
func describe(as []allowance.Allowance) string {
	parts := make([]string, 0, len(as))
	for _, a := range as {
		p := fmt.Sprintf("%s at generation %d", strings.Join(a.Verbs, "+"), a.Generation)
		if a.Initiator != "" {
			p += " initiated by " + a.Initiator
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// apply writes the gate and consumption marks, then the condition, and
// reports a transition as an Event and in the metrics.
func (r *Reconciler) apply(ctx context.Context, mr *unstructured.Unstructured, current, want []string, marks []allowance.Allowance, approval map[string]string, cond xpv2.Condition, eventType string) error {
	changedGate := !slices.Equal(current, want)
	if changedGate || marks != nil {
		// The approval rides on a write the gate needs anyway: an open
		// gate's is already recorded by the write that opened it.
		ann := mr.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		maps.Copy(ann, approval)
		if err := fieldpath.Pave(mr.Object).SetValue(gate.PathManagementPolicies, want); err != nil {
			return errors.Wrapf(err, errFmtSet, gate.PathManagementPolicies)
		}
		if marks != nil {
			ann[v1alpha1.AnnotationAllowances] = allowance.Format(marks)
		}
		mr.SetAnnotations(ann)
		// Update, not patch: the resourceVersion makes a concurrent writer
		// (Crossplane, the provider) win and this reconcile start over.
		if err := r.kube.Update(ctx, mr); err != nil {
			return errors.Wrapf(err, errFmtUpdateGate, mr.GetKind(), mr.GetName())
		}
	}

	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(mr.Object).GetValueInto("status", cs) // absent status: no conditions
	prev := cs.GetCondition(ConditionGate)
	cond.LastTransitionTime = metav1.NewTime(r.opts.Now())
	if prev.Status == cond.Status {
		cond.LastTransitionTime = prev.LastTransitionTime
	}
	cond.ObservedGeneration = mr.GetGeneration()
	if prev.Equal(cond) {
		return nil
	}
	cs.SetConditions(cond)
	conds, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cs)
	if err != nil {
		return errors.Wrap(err, errConvertConditions)
	}
	if err := fieldpath.Pave(mr.Object).SetValue("status.conditions", conds["conditions"]); err != nil {
		return errors.Wrap(err, errSetStatusConditions)
	}
	if err := r.kube.Status().Update(ctx, mr); err != nil {
		return errors.Wrapf(err, errFmtUpdateCondition, ConditionGate, mr.GetKind(), mr.GetName())
	}
	if prev.Reason != cond.Reason || prev.Status != cond.Status || prev.Message != cond.Message {
		r.events.Eventf(mr, nil, eventType, string(cond.Reason), "Gate", "%s", cond.Message)
		r.metrics.transition(r.gvk, prev, cond, r.opts.Now())
		r.log.Debug("gate transition", "name", mr.GetName(), "reason", cond.Reason, "policies", want)
	}
	return nil
}

// frozen names who froze the managed resource or a parent, as far as a
// freeze can change the decision over as (parents.FrozenFor). A parent
// that cannot be read freezes: a gate never opens on a guess.
func (r *Reconciler) frozen(ctx context.Context, mr *unstructured.Unstructured, as []allowance.Allowance) string {
	by, err := parents.FrozenFor(ctx, r.reader, mr, as)
	if err != nil {
		return "an unreadable parent (" + err.Error() + ")"
	}
	return by
}
