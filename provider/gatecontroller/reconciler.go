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
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/provider/parents"
)

// ConditionGate is the condition the controller sets on a gated managed
// resource while it keeps the gate shut against an allowance (see notice).
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
	// mu guards seenOpen: the gates this process saw open, by resource,
	// and the allowances that held each open.
	mu       sync.Mutex
	seenOpen map[types.NamespacedName]string

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
	return &Reconciler{seenOpen: map[types.NamespacedName]string{}, kube: kube, reader: reader, gvk: gvk, opts: o, events: rec, metrics: m, log: log.WithValues("kind", gvk.String())}
}

// Reconcile brings one managed resource's gate and consumption marks in
// line with its allowances and observed generation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mr := &unstructured.Unstructured{}
	mr.SetGroupVersionKind(r.gvk)
	if err := r.kube.Get(ctx, req.NamespacedName, mr); err != nil {
		if kerrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(errors.Wrapf(err, errFmtGet, r.gvk.Kind, req.NamespacedName))
	}
	if mr.GetLabels()[v1alpha1.LabelGated] != "true" || mr.GetDeletionTimestamp() != nil {
		r.forget(req.NamespacedName)
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
		note := &xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: ReasonInvalid, Message: msg}
		return ctrl.Result{}, r.apply(ctx, mr, cfg, current, change{want: cfg.Closed(), note: note, noteType: corev1.EventTypeWarning})
	}
	parsed := as
	as, revoked, recheck, err := r.revokeRefused(ctx, mr, as, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := cfg.Decide(mr.Object, mr.Object, as, now, r.frozen(ctx, mr, as))

	var marks []allowance.Allowance
	if d.Changed || len(revoked) > 0 {
		marks = d.Allowances
	}
	note, noteType := r.notice(d)
	var approval map[string]string
	if d.Approves || d.Withdraws {
		approval = d.Approved.Annotations()
	}
	c := change{want: d.Policies, marks: marks, approval: approval, note: note, noteType: noteType, decision: d, before: parsed}
	if err := r.apply(ctx, mr, cfg, current, c); err != nil {
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

// change is what one reconcile writes and tells.
type change struct {
	// want is the gate; marks, when not nil, the allowances annotation;
	// approval the approval annotations to add.
	want     []string
	marks    []allowance.Allowance
	approval map[string]string
	// note is the GateOpen condition to keep, nil for none; noteType the
	// type of the Event announcing a new one.
	note     *xpv2.Condition
	noteType string
	// decision and the allowances it was made over (before) tell the
	// gate's transitions.
	decision gate.Decision
	before   []allowance.Allowance
}

// apply writes the gate and consumption marks, then the condition if it
// changed, and reports transitions as Events and in the metrics.
func (r *Reconciler) apply(ctx context.Context, mr *unstructured.Unstructured, cfg gate.Config, current []string, c change) error {
	if !slices.Equal(current, c.want) || c.marks != nil {
		// The approval rides on a write the gate needs anyway: an open
		// gate's is already recorded by the write that opened it.
		ann := mr.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		maps.Copy(ann, c.approval)
		if err := fieldpath.Pave(mr.Object).SetValue(gate.PathManagementPolicies, c.want); err != nil {
			return errors.Wrapf(err, errFmtSet, gate.PathManagementPolicies)
		}
		if c.marks != nil {
			ann[v1alpha1.AnnotationAllowances] = allowance.Format(c.marks)
		}
		mr.SetAnnotations(ann)
		// Update, not patch: the resourceVersion makes a concurrent writer
		// (Crossplane, the provider) win and this reconcile start over.
		if err := r.kube.Update(ctx, mr); err != nil {
			return errors.Wrapf(err, errFmtUpdateGate, mr.GetKind(), mr.GetName())
		}
	}
	noted, err := r.writeNote(ctx, mr, c.note)
	if err != nil {
		return err
	}
	r.tell(mr, cfg.Opens(current), cfg.Opens(c.want), c, noted)
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
