package gatecontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
)

// notice is the GateOpen condition a decision calls for, and the type of
// the Event announcing it; nil when the gate does what its allowances say.
// The condition is written only while the gate is kept shut against an
// allowance, or after a Delete gate was revoked (DeletionRefused, until a
// later allowance opens the gate or is used up): a gate that opens and
// closes as its allowances say is told by spec.managementPolicies, the
// allowances annotation and an Event, since every status write is a watch
// event Crossplane charges to the composite's circuit breaker
// (docs/PERFORMANCE.md).
func (r *Reconciler) notice(d gate.Decision) (*xpv2.Condition, string) {
	closed := func(reason xpv2.ConditionReason, msg string) *xpv2.Condition {
		return &xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
	}
	switch {
	case d.Err != nil:
		return closed(ReasonUnsupported, d.Err.Error()), corev1.EventTypeWarning
	case len(d.Held) > 0 && len(d.Uncovered) > 0:
		return closed(ReasonUncovered, fmt.Sprintf("gate kept closed for %s: %s changed since generation %d was let through to the cloud and no open allowance covers it",
			describe(d.Held), strings.Join(d.Uncovered, ", "), d.Approved.Generation)), corev1.EventTypeWarning
	case len(d.Open) > 0:
		return nil, ""
	case len(d.Withheld) > 0:
		return closed(ReasonFrozen, fmt.Sprintf("gate closed by a freeze; withheld: %s", describe(d.Withheld))), corev1.EventTypeWarning
	case len(d.Moot) > 0:
		return closed(ReasonNotRequested, fmt.Sprintf("gate kept to %v, what the Composition asks for: %s opens nothing", d.Policies, describe(d.Moot))), corev1.EventTypeNormal
	case len(d.Expired) > 0:
		return closed(ReasonExpired, fmt.Sprintf("gate closed after %s: %s", r.opts.Gate.MaxOpen, describe(d.Expired))), corev1.EventTypeWarning
	}
	// A Delete allowance is used up only by the deletion, and this
	// controller leaves deleted resources alone: the last one used up here
	// was revoked (revokeRefused), whichever reconcile wrote the mark.
	if last := lastConsumed(d.Allowances); slices.ContainsFunc(last, refused) {
		return closed(ReasonDeletionRefused, fmt.Sprintf("Delete gate revoked: the deletion it was opened for did not happen within %s (another admission check refused it): %s",
			r.opts.DeletionGrace, describe(slices.DeleteFunc(last, func(a allowance.Allowance) bool { return !refused(a) })))), corev1.EventTypeWarning
	}
	return nil, ""
}

// refused reports whether a used-up allowance opened a Delete gate for a
// deletion above the resource, which revokeRefused revokes.
func refused(a allowance.Allowance) bool { return a.OpensDelete() && !a.FromUpgrade() }

// lastConsumed are the External allowances of as used up last: those of
// the highest generation among the consumed.
func lastConsumed(as []allowance.Allowance) []allowance.Allowance {
	var last []allowance.Allowance
	for _, a := range as {
		switch {
		case !a.Consumed || a.Relation != v1alpha1.RelationExternal:
		case len(last) == 0 || a.Generation > last[0].Generation:
			last = []allowance.Allowance{a}
		case a.Generation == last[0].Generation:
			last = append(last, a)
		}
	}
	return last
}

// transition is the Event of a gate that opens or closes as its
// allowances say: opened for d.Open, or closed by the External allowances
// used up last (consumed here, or by admission settling a write).
func transition(d gate.Decision, opened bool) (xpv2.ConditionReason, string) {
	if opened {
		return ReasonOpened, fmt.Sprintf("gate open for %s: %s", strings.Join(d.Verbs, ", "), describe(d.Open))
	}
	last := lastConsumed(d.Allowances)
	if len(last) == 0 {
		return ReasonClosed, "gate closed: no unconsumed External allowance"
	}
	return ReasonConsumed, "gate closed: consumed " + describe(last)
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

// writeNote brings the GateOpen condition in line with note, removing it
// when note is nil, and reports whether note is new.
func (r *Reconciler) writeNote(ctx context.Context, mr *unstructured.Unstructured, note *xpv2.Condition) (bool, error) {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(mr.Object).GetValueInto("status", cs) // absent status: no conditions
	prev := cs.GetCondition(ConditionGate)
	present := slices.ContainsFunc(cs.Conditions, func(c xpv2.Condition) bool { return c.Type == ConditionGate })
	switch {
	case note == nil && !present:
		return false, nil
	case note == nil:
		cs.Conditions = slices.DeleteFunc(cs.Conditions, func(c xpv2.Condition) bool { return c.Type == ConditionGate })
	case present && prev.Status == note.Status && prev.Reason == note.Reason && prev.Message == note.Message:
		// Said already: a new generation alone is no news worth a write.
		return false, nil
	default:
		n := *note
		n.LastTransitionTime = metav1.NewTime(r.opts.Now())
		if present && prev.Status == n.Status {
			n.LastTransitionTime = prev.LastTransitionTime
		}
		n.ObservedGeneration = mr.GetGeneration()
		cs.SetConditions(n)
	}
	conds, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cs)
	if err != nil {
		return false, errors.Wrap(err, errConvertConditions)
	}
	if err := fieldpath.Pave(mr.Object).SetValue("status.conditions", conds["conditions"]); err != nil {
		return false, errors.Wrap(err, errSetStatusConditions)
	}
	if err := r.kube.Status().Update(ctx, mr); err != nil {
		return false, errors.Wrapf(err, errFmtUpdateCondition, ConditionGate, mr.GetKind(), mr.GetName())
	}
	return note != nil, nil
}

// tell announces what this reconcile saw happen to the gate: a new
// GateOpen condition (noted), or else the gate opening for a new set of
// allowances or closing; the metrics count the gate seen open and seen
// closed, whoever wrote it. What was seen open is remembered in the process:
// after a restart a gate still open is announced again, once.
func (r *Reconciler) tell(mr *unstructured.Unstructured, wasOpen, isOpen bool, c change, noted bool) {
	key := client.ObjectKeyFromObject(mr)
	r.mu.Lock()
	seen, known := r.seenOpen[key]
	var sig string
	if isOpen {
		sig = describe(c.decision.Open)
		r.seenOpen[key] = sig
	} else {
		delete(r.seenOpen, key)
	}
	r.mu.Unlock()
	wasOpen = wasOpen || known
	var reason xpv2.ConditionReason
	var msg string
	switch {
	case noted:
		reason, msg = c.note.Reason, c.note.Message
		r.events.Eventf(mr, nil, c.noteType, string(reason), "Gate", "%s", msg)
	case isOpen && seen != sig, !isOpen && wasOpen && c.note == nil:
		reason, msg = transition(c.decision, isOpen)
		r.events.Eventf(mr, nil, corev1.EventTypeNormal, string(reason), "Gate", "%s", msg)
	}
	if reason != "" {
		r.log.Debug("gate transition", "name", mr.GetName(), "reason", reason, "policies", c.want)
	}
	switch {
	case isOpen && !known:
		r.metrics.opened(r.gvk)
	case !isOpen && wasOpen:
		r.metrics.closed(r.gvk, len(c.decision.Expired) > 0, openedAt(c.before), r.opts.Now())
	}
}

// forget drops what this process saw of a resource that is gone or no
// longer the controller's.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seenOpen, key)
}

// openedAt is when the earliest External allowance of as still live held
// the gate open: when it was stamped.
func openedAt(as []allowance.Allowance) time.Time {
	var first time.Time
	for _, a := range as {
		if a.Consumed || a.Relation != v1alpha1.RelationExternal {
			continue
		}
		if ts, ok := a.StampedAt(); ok && (first.IsZero() || ts.Before(first)) {
			first = ts
		}
	}
	return first
}
