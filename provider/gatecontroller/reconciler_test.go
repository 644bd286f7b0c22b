package gatecontroller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
)

// A made-up managed resource kind, and the composite above it.
var (
	nopGVK = schema.GroupVersionKind{Group: "nop.example.org", Version: "v1alpha1", Kind: "NopResource"}
	xnopGV = schema.GroupVersion{Group: "example.org", Version: "v1alpha1"}

	fixed = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

const (
	alice  = "alice@example.com"
	carol  = "carol@example.com"
	ns     = "team-a"
	mrName = "nop"
)

var (
	closedGate  = []string{gate.Observe, gate.LateInitialize}
	updateGate  = []string{gate.Observe, gate.Update, gate.LateInitialize}
	observeGate = []string{gate.Observe}
)

// ext is an External allowance for verbs on the NopResource at generation
// gen, stamped at stamped, initiated by Alice on the composite.
func ext(gen int64, stamped time.Time, verbs ...string) allowance.Allowance {
	return allowance.Allowance{
		Relation:   v1alpha1.RelationExternal,
		Target:     v1alpha1.Target{External: map[string]string{"apiGroup": nopGVK.Group, "kind": nopGVK.Kind}},
		Verbs:      verbs,
		Generation: gen,
		Initiator:  alice,
		Trace: allowance.Trace{
			{APIVersion: xnopGV.String(), Kind: "XNop", Name: "xnop", Generation: 5, Field: "spec.size", User: alice, Timestamp: allowance.Timestamp(stamped.Add(-time.Second))},
			{APIVersion: nopGVK.GroupVersion().String(), Kind: nopGVK.Kind, Name: mrName, Generation: gen, Timestamp: allowance.Timestamp(stamped)},
		},
	}
}

func consumed(a allowance.Allowance) allowance.Allowance {
	a.Consumed = true
	return a
}

// held is a as a freeze holds it.
func held(a allowance.Allowance) allowance.Allowance {
	a.Held = true
	return a
}

func regen(a allowance.Allowance, gen int64) allowance.Allowance {
	a.Generation = gen
	return a
}

type mrOption func(*unstructured.Unstructured)

// managed is a gated NopResource at generation 3, closed to the default
// gate, that no provider has reconciled yet.
func managed(opts ...mrOption) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nopGVK)
	u.SetNamespace(ns)
	u.SetName(mrName)
	u.SetGeneration(3)
	u.SetLabels(map[string]string{v1alpha1.LabelGated: "true"})
	u.SetAnnotations(map[string]string{})
	_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "forProvider", "size")
	withPolicies(closedGate...)(u)
	for _, o := range opts {
		o(u)
	}
	return u
}

func withPolicies(p ...string) mrOption {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringSlice(u.Object, p, "spec", "managementPolicies")
	}
}

func withAnnotation(k, v string) mrOption {
	return func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		a[k] = v
		u.SetAnnotations(a)
	}
}

func withAllowances(as ...allowance.Allowance) mrOption {
	return withAnnotation(v1alpha1.AnnotationAllowances, allowance.Format(as))
}

// withApproved records the resource's spec as approved at generation gen:
// the gate opening it writes that approval.
func withApproved(gen int64) mrOption {
	return func(u *unstructured.Unstructured) {
		for k, v := range (gate.Approval{Spec: gate.SpecRecord(u.Object), Generation: gen}).Annotations() {
			withAnnotation(k, v)(u)
		}
	}
}

// withApprovedSize records a spec of the given size as approved at
// generation gen.
func withApprovedSize(size, gen int64) mrOption {
	return func(u *unstructured.Unstructured) {
		spec := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": size}}}
		for k, v := range (gate.Approval{Spec: gate.SpecRecord(spec), Generation: gen}).Annotations() {
			withAnnotation(k, v)(u)
		}
	}
}

func withFreeze(user string) mrOption {
	return withAnnotation(v1alpha1.AnnotationFreeze, `{"user":"`+user+`","message":"incident 42"}`)
}

func withGeneration(g int64) mrOption {
	return func(u *unstructured.Unstructured) { u.SetGeneration(g) }
}

func withObserved(g int64) mrOption {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, g, "status", "observedGeneration")
	}
}

func withConditions(cs ...xpv2.Condition) mrOption {
	return func(u *unstructured.Unstructured) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&xpv2.ConditionedStatus{Conditions: cs})
		if err != nil {
			panic(err)
		}
		_ = unstructured.SetNestedField(u.Object, m["conditions"], "status", "conditions")
	}
}

func withoutLabel() mrOption {
	return func(u *unstructured.Unstructured) { u.SetLabels(nil) }
}

func withDeletion() mrOption {
	return func(u *unstructured.Unstructured) {
		u.SetFinalizers([]string{"finalizer.managedresource.crossplane.io"})
		u.SetDeletionTimestamp(&metav1.Time{Time: fixed.Add(-time.Minute)})
	}
}

func withController(kind, name string) mrOption {
	return func(u *unstructured.Unstructured) {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: xnopGV.String(), Kind: kind, Name: name, UID: "xnop-uid", Controller: ptr.To(true)}})
	}
}

// composite is the XNop xnop in team-a.
func composite(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(xnopGV.WithKind("XNop"))
	u.SetNamespace(ns)
	u.SetName("xnop")
	u.SetUID("xnop-uid")
	u.SetAnnotations(annotations)
	return u
}

func synced(status corev1.ConditionStatus, g int64) xpv2.Condition {
	reason := xpv2.ConditionReason("ReconcileSuccess")
	if status != corev1.ConditionTrue {
		reason = "ReconcileError"
	}
	return xpv2.Condition{Type: "Synced", Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(fixed.Add(-time.Hour)), ObservedGeneration: g}
}

func gateClosed(reason xpv2.ConditionReason, g int64, at time.Time, msg string) xpv2.Condition {
	return xpv2.Condition{Type: ConditionGate, Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(at), ObservedGeneration: g}
}

// gateCondition is the managed resource's GateOpen condition.
func gateCondition(mr *unstructured.Unstructured) xpv2.Condition {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(mr.Object).GetValueInto("status", cs)
	return cs.GetCondition(ConditionGate)
}

// normalize round-trips an object through JSON, as the fake client stores
// it, and drops the resourceVersion the fake client assigns.
func normalize(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if u == nil {
		return nil
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	out.SetResourceVersion("")
	return out
}

// gathered are the gate metrics that are not zero: counters by name,
// histograms by name_count.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil && m.GetCounter().GetValue() != 0:
				out[mf.GetName()] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil && m.GetHistogram().GetSampleCount() != 0:
				out[mf.GetName()+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestReconcile(t *testing.T) {
	const (
		openMsg     = "gate open for Update: Update at generation 3 initiated by alice@example.com"
		consumedMsg = "gate closed: consumed Update at generation 3 initiated by alice@example.com"
		frozenMsg   = "gate closed by a freeze; withheld: Update at generation 4 initiated by alice@example.com"
		closedMsg   = "gate closed: no unconsumed External allowance"
	)
	recent := fixed.Add(-10 * time.Minute) // 50 minutes left of the default hour
	del := func(at time.Time) allowance.Allowance { return ext(4, at, gate.Delete) }
	delMsg := "gate open for Delete: Delete at generation 4 initiated by alice@example.com"
	refusedMsg := "Delete gate revoked: the deletion it was opened for did not happen within 1m0s (another admission check refused it): Delete at generation 4 initiated by alice@example.com"
	upd := ext(3, recent, gate.Update)
	// upgradeDel opens the Delete gate of a resource new logic dropped,
	// under an UpgradeAllowance.
	upgradeDel := del(fixed.Add(-2 * time.Minute))
	upgradeDel.Initiator = ""
	upgradeDel.Trace = append(allowance.Trace{{APIVersion: "kausality.io/v1alpha1", Kind: v1alpha1.UpgradeAllowanceKind, Name: "pt-0-10", Generation: 1}}, upgradeDel.Trace[1:]...)
	upgradeDelMsg := "gate open for Delete: Delete at generation 4"
	conflict := kerrors.NewConflict(schema.GroupResource{Group: nopGVK.Group, Resource: "nopresources"}, mrName, errors.New("the object has been modified"))
	errBoom := errors.New("boom")
	_, malformedErr := allowance.Parse(`[{"relation":"Sideways"}]`)

	type args struct {
		objs      []client.Object
		opts      Options
		intercept interceptor.Funcs
	}
	type want struct {
		result  ctrl.Result
		err     error
		mr      *unstructured.Unstructured
		writes  []string
		events  []string
		metrics map[string]float64
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NotFound": {
			reason: "A managed resource that is gone is no error.",
			args:   args{},
			want:   want{},
		},
		"NotGated": {
			reason: "A managed resource without the gated label is not the controller's: untouched.",
			args:   args{objs: []client.Object{managed(withoutLabel(), withAllowances(upd), withObserved(2))}},
			want:   want{mr: managed(withoutLabel(), withAllowances(upd), withObserved(2))},
		},
		"BeingDeleted": {
			reason: "A managed resource being deleted is untouched: its Delete gate belongs to the deletion.",
			args:   args{objs: []client.Object{managed(withDeletion(), withAllowances(upd), withObserved(2))}},
			want:   want{mr: managed(withDeletion(), withAllowances(upd), withObserved(2))},
		},
		"OpenedByUpdateAllowance": {
			reason: "An unconsumed External Update allowance opens the gate to [Observe, Update, LateInitialize] and the controller comes back when it expires.",
			args:   args{objs: []client.Object{managed(withAllowances(upd), withObserved(2))}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr:      managed(withPolicies(updateGate...), withAllowances(upd), withApproved(4), withObserved(2)),
				writes:  []string{"Update"},
				events:  []string{"Normal Opened " + openMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"OpenRequeuesBeforeExpiry": {
			reason: "An open gate is looked at again one second after its allowance is MaxOpen old; nothing is written, and a process that had not seen it open says so once.",
			args: args{
				objs: []client.Object{managed(withPolicies(updateGate...), withAllowances(ext(3, fixed.Add(-20*time.Minute), gate.Update)), withObserved(2))},
				opts: Options{Gate: gate.Config{MaxOpen: 30 * time.Minute}},
			},
			want: want{
				result:  ctrl.Result{RequeueAfter: 10*time.Minute + time.Second},
				mr:      managed(withPolicies(updateGate...), withAllowances(ext(3, fixed.Add(-20*time.Minute), gate.Update)), withObserved(2)),
				events:  []string{"Normal Opened " + openMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"ConsumedByObservedGeneration": {
			reason: "Once status.observedGeneration reaches the allowance's generation it is marked consumed and the gate closes in the same write, with no status write; an Event says so.",
			args:   args{objs: []client.Object{managed(withPolicies(updateGate...), withAllowances(upd), withObserved(3))}},
			want: want{
				mr:      managed(withAllowances(consumed(upd)), withObserved(3)),
				writes:  []string{"Update"},
				events:  []string{"Normal Consumed " + consumedMsg},
				metrics: map[string]float64{"kausality_gates_closed_total": 1, "kausality_gate_open_duration_seconds_count": 1},
			},
		},
		"OpenedLaterThanItsGeneration": {
			reason: "The gate opened for the allowance at generation 4 (the write that opened it raised the generation), and the provider has observed only generation 3, behind the closed gate: nothing was applied yet, so the gate stays open.",
			args:   args{objs: []client.Object{managed(withPolicies(updateGate...), withAllowances(upd), withApproved(4), withObserved(3))}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr:      managed(withPolicies(updateGate...), withAllowances(upd), withApproved(4), withObserved(3)),
				events:  []string{"Normal Opened " + openMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"ConsumedBySyncedCondition": {
			reason: "Without status.observedGeneration, a True Synced condition's observedGeneration consumes.",
			args: args{objs: []client.Object{managed(withPolicies(updateGate...), withAllowances(upd),
				withConditions(synced(corev1.ConditionTrue, 3)))}},
			want: want{
				mr:      managed(withAllowances(consumed(upd)), withConditions(synced(corev1.ConditionTrue, 3))),
				writes:  []string{"Update"},
				events:  []string{"Normal Consumed " + consumedMsg},
				metrics: map[string]float64{"kausality_gates_closed_total": 1, "kausality_gate_open_duration_seconds_count": 1},
			},
		},
		"SyncedFalseDoesNotConsume": {
			reason: "A failed reconcile stamps its generation on a False Synced condition; nothing was applied, so the gate stays open and nothing is written.",
			args: args{objs: []client.Object{managed(withPolicies(updateGate...), withAllowances(upd),
				withConditions(synced(corev1.ConditionFalse, 3)))}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr:      managed(withPolicies(updateGate...), withAllowances(upd), withConditions(synced(corev1.ConditionFalse, 3))),
				events:  []string{"Normal Opened " + openMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"Expired": {
			reason: "An allowance stamped longer than Options.Gate.MaxOpen ago closes the gate with reason Expired, unconsumed.",
			args: args{
				objs: []client.Object{managed(withPolicies(updateGate...), withAllowances(ext(3, fixed.Add(-31*time.Minute), gate.Update)), withObserved(2))},
				opts: Options{Gate: gate.Config{MaxOpen: 30 * time.Minute}},
			},
			want: want{
				mr: managed(withAllowances(ext(3, fixed.Add(-31*time.Minute), gate.Update)), withObserved(2),
					withConditions(gateClosed(ReasonExpired, 3, fixed, "gate closed after 30m0s: Update at generation 3 initiated by alice@example.com"))),
				writes: []string{"Update", "Status"},
				events: []string{"Warning Expired gate closed after 30m0s: Update at generation 3 initiated by alice@example.com"},
				metrics: map[string]float64{"kausality_gates_closed_total": 1, "kausality_gates_expired_total": 1,
					"kausality_gate_open_duration_seconds_count": 1},
			},
		},
		"FrozenOnManagedResource": {
			reason: "A freeze on the managed resource closes the gate, moves the allowance past the stored generation (held, not consumed) and looks again in 15s.",
			args:   args{objs: []client.Object{managed(withFreeze(carol), withPolicies(updateGate...), withAllowances(upd), withObserved(2))}},
			want: want{
				result: ctrl.Result{RequeueAfter: 15 * time.Second},
				mr: managed(withFreeze(carol), withAllowances(held(regen(upd, 4))), withObserved(2),
					withConditions(gateClosed(ReasonFrozen, 3, fixed, frozenMsg))),
				writes:  []string{"Update", "Status"},
				events:  []string{"Warning Frozen " + frozenMsg},
				metrics: map[string]float64{"kausality_gates_closed_total": 1, "kausality_gate_open_duration_seconds_count": 1},
			},
		},
		"FrozenLongerThanTheLimit": {
			reason: "A freeze that outlasts Options.Gate.MaxOpen keeps holding the change: a held allowance does not expire.",
			args: args{
				objs: []client.Object{managed(withFreeze(carol), withAllowances(held(regen(ext(3, fixed.Add(-2*time.Hour), gate.Update), 4))), withObserved(2),
					withConditions(gateClosed(ReasonFrozen, 3, fixed.Add(-2*time.Hour), frozenMsg)))},
				opts: Options{Gate: gate.Config{MaxOpen: 30 * time.Minute}},
			},
			want: want{
				result: ctrl.Result{RequeueAfter: 15 * time.Second},
				mr: managed(withFreeze(carol), withAllowances(held(regen(ext(3, fixed.Add(-2*time.Hour), gate.Update), 4))), withObserved(2),
					withConditions(gateClosed(ReasonFrozen, 3, fixed.Add(-2*time.Hour), frozenMsg))),
			},
		},
		"FreezeLifted": {
			reason: "When the freeze lifts, the held allowance is restamped, so the gate opens for the change however long the freeze lasted, and the condition that told of the freeze goes.",
			args: args{
				objs: []client.Object{managed(withAllowances(held(regen(ext(3, fixed.Add(-2*time.Hour), gate.Update), 4))), withObserved(2),
					withConditions(gateClosed(ReasonFrozen, 3, fixed.Add(-2*time.Hour), frozenMsg)))},
				opts: Options{Gate: gate.Config{MaxOpen: 30 * time.Minute}},
			},
			want: want{
				result:  ctrl.Result{RequeueAfter: 30 * time.Minute},
				mr:      managed(withPolicies(updateGate...), withAllowances(regen(ext(3, fixed.Add(-2*time.Hour), gate.Update), 4).Restamped(fixed)), withObserved(2), withApprovedSize(2, 4), withConditions()),
				writes:  []string{"Update", "Status"},
				events:  []string{"Normal Opened gate open for Update: Update at generation 4 initiated by alice@example.com"},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"FrozenOnComposite": {
			reason: "A freeze on the controlling composite keeps the gate shut: the allowance is held past the stored generation.",
			args: args{objs: []client.Object{
				composite(map[string]string{v1alpha1.AnnotationFreeze: `{"user":"carol@example.com"}`}),
				managed(withController("XNop", "xnop"), withAllowances(upd), withObserved(2)),
			}},
			want: want{
				result: ctrl.Result{RequeueAfter: 15 * time.Second},
				mr: managed(withController("XNop", "xnop"), withAllowances(held(regen(upd, 4))), withObserved(2),
					withConditions(gateClosed(ReasonFrozen, 3, fixed, frozenMsg))),
				writes: []string{"Update", "Status"},
				events: []string{"Warning Frozen " + frozenMsg},
			},
		},
		"CompositeNotFrozen": {
			reason: "A controlling composite without a freeze does not hold the gate.",
			args: args{objs: []client.Object{
				composite(map[string]string{"example.org/note": "nothing"}),
				managed(withController("XNop", "xnop"), withAllowances(upd), withObserved(2)),
			}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr:      managed(withController("XNop", "xnop"), withPolicies(updateGate...), withAllowances(upd), withApproved(4), withObserved(2)),
				writes:  []string{"Update"},
				events:  []string{"Normal Opened " + openMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"RefusedDeletionRevoked": {
			reason: "A Delete gate whose deletion never became final (the composite stands, past the grace) is revoked: the allowance is marked consumed and the gate closes, saying why.",
			args: args{objs: []client.Object{
				composite(nil),
				managed(withController("XNop", "xnop"), withPolicies(gate.Observe, gate.Delete), withAllowances(del(fixed.Add(-2*time.Minute))), withObserved(3)),
			}},
			want: want{
				mr: managed(withController("XNop", "xnop"), withAllowances(consumed(del(fixed.Add(-2*time.Minute)))), withObserved(3),
					withConditions(gateClosed(ReasonDeletionRefused, 3, fixed, refusedMsg))),
				writes:  []string{"Update", "Status"},
				events:  []string{"Warning DeletionRefused " + refusedMsg},
				metrics: map[string]float64{"kausality_gates_closed_total": 1, "kausality_gate_open_duration_seconds_count": 1},
			},
		},
		"RevokedDeletionStillSaid": {
			reason: "A reconcile that revoked a Delete gate but lost the race to write the condition leaves the mark: the next one, with nothing left to revoke, still says why the gate closed.",
			args: args{objs: []client.Object{
				composite(nil),
				managed(withController("XNop", "xnop"), withAllowances(consumed(del(fixed.Add(-2*time.Minute)))), withObserved(3)),
			}},
			want: want{
				mr: managed(withController("XNop", "xnop"), withAllowances(consumed(del(fixed.Add(-2*time.Minute)))), withObserved(3),
					withConditions(gateClosed(ReasonDeletionRefused, 3, fixed, refusedMsg))),
				writes: []string{"Status"},
				events: []string{"Warning DeletionRefused " + refusedMsg},
			},
		},
		"RevokedDeletionForgottenOnceAnUpdateIsUsed": {
			reason: "Once an allowance of a later generation is used up, the revoked deletion is history: the condition goes.",
			args: args{objs: []client.Object{
				composite(nil),
				managed(withController("XNop", "xnop"), withGeneration(5), withAllowances(consumed(del(fixed.Add(-2*time.Minute))), consumed(ext(5, recent, gate.Update))), withObserved(5),
					withConditions(gateClosed(ReasonDeletionRefused, 3, fixed.Add(-time.Minute), refusedMsg))),
			}},
			want: want{
				mr: managed(withController("XNop", "xnop"), withGeneration(5), withAllowances(consumed(del(fixed.Add(-2*time.Minute))), consumed(ext(5, recent, gate.Update))), withObserved(5),
					withConditions()),
				writes: []string{"Status"},
			},
		},
		"UpgradeDeleteIsNoRefusedDeletion": {
			reason: "A Delete gate an UpgradeAllowance opened for a resource new logic dropped waits for Crossplane to delete it, with the composite standing: no deletion above it was refused, so it is not revoked past the grace; its time limit closes it.",
			args: args{objs: []client.Object{
				composite(nil),
				managed(withController("XNop", "xnop"), withPolicies(gate.Observe, gate.Delete), withAllowances(upgradeDel), withObserved(3)),
			}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 58*time.Minute + time.Second},
				mr:      managed(withController("XNop", "xnop"), withPolicies(gate.Observe, gate.Delete), withAllowances(upgradeDel), withObserved(3)),
				events:  []string{"Normal Opened " + upgradeDelMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"DeletionWithinGraceStaysOpen": {
			reason: "Within the grace the deletion may still be in admission: the Delete gate stays open and is looked at again once the grace is over.",
			args: args{objs: []client.Object{
				composite(nil),
				managed(withController("XNop", "xnop"), withPolicies(gate.Observe, gate.Delete), withAllowances(del(fixed.Add(-10*time.Second))), withObserved(3)),
			}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 51 * time.Second},
				mr:      managed(withController("XNop", "xnop"), withPolicies(gate.Observe, gate.Delete), withAllowances(del(fixed.Add(-10*time.Second))), withObserved(3)),
				events:  []string{"Normal Opened " + delMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"FinalDeletionKeepsGate": {
			reason: "Once the composite is gone the deletion is final: the Delete gate stays open, however old.",
			args: args{objs: []client.Object{
				managed(withController("XNop", "xnop"), withPolicies(gate.Observe, gate.Delete), withAllowances(del(fixed.Add(-2*time.Minute))), withObserved(3)),
			}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 58*time.Minute + time.Second},
				mr:      managed(withController("XNop", "xnop"), withPolicies(gate.Observe, gate.Delete), withAllowances(del(fixed.Add(-2*time.Minute))), withObserved(3)),
				events:  []string{"Normal Opened " + delMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"InvalidAllowances": {
			reason: "A malformed allowances annotation closes the gate and is kept byte for byte.",
			args:   args{objs: []client.Object{managed(withPolicies(updateGate...), withAnnotation(v1alpha1.AnnotationAllowances, `[{"relation":"Sideways"}]`), withObserved(2))}},
			want: want{
				mr: managed(withAnnotation(v1alpha1.AnnotationAllowances, `[{"relation":"Sideways"}]`), withObserved(2),
					withConditions(gateClosed(ReasonInvalid, 3, fixed, "cannot parse annotation kausality.io/allowances on NopResource team-a/nop; the gate stays closed: "+malformedErr.Error()))),
				writes:  []string{"Update", "Status"},
				events:  []string{"Warning InvalidAllowances cannot parse annotation kausality.io/allowances on NopResource team-a/nop; the gate stays closed: " + malformedErr.Error()},
				metrics: map[string]float64{"kausality_gates_closed_total": 1},
			},
		},
		"UnsupportedFailsClosed": {
			reason: "Update and Delete without Create is no combination crossplane-runtime supports: the gate stays closed with reason Unsupported.",
			args:   args{objs: []client.Object{managed(withAllowances(ext(3, recent, gate.Update, gate.Delete)), withObserved(2))}},
			want: want{
				result: ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr: managed(withAllowances(ext(3, recent, gate.Update, gate.Delete)), withObserved(2),
					withConditions(gateClosed(ReasonUnsupported, 3, fixed, "cannot open gate for verbs [Update, Delete]: managementPolicies [Observe, Update, Delete, LateInitialize] is not a combination crossplane-runtime supports; the gate stays closed"))),
				writes: []string{"Status"},
				events: []string{"Warning Unsupported cannot open gate for verbs [Update, Delete]: managementPolicies [Observe, Update, Delete, LateInitialize] is not a combination crossplane-runtime supports; the gate stays closed"},
			},
		},
		"UncoveredChangeHeld": {
			reason: "The size differs from the approved generation 2 and the allowance covers no field: the gate stays closed, the allowance is held although generation 3 was observed, and the condition names the field.",
			args:   args{objs: []client.Object{managed(withAllowances(upd), withObserved(3), withApprovedSize(1, 2))}},
			want: want{
				result: ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr: managed(withAllowances(upd), withObserved(3), withApprovedSize(1, 2),
					withConditions(gateClosed(ReasonUncovered, 3, fixed, "gate kept closed for Update at generation 3 initiated by alice@example.com: spec.forProvider.size changed since generation 2 was let through to the cloud and no open allowance covers it"))),
				writes: []string{"Status"},
				events: []string{"Warning UncoveredChange gate kept closed for Update at generation 3 initiated by alice@example.com: spec.forProvider.size changed since generation 2 was let through to the cloud and no open allowance covers it"},
			},
		},
		"ObserveGateNoAllowances": {
			reason: "A Composition that closes gates to [Observe] wrote it on the resource; without allowances the controller never rewrites it to [Observe, LateInitialize] (no Update), and writes nothing.",
			args:   args{objs: []client.Object{managed(withPolicies(observeGate...), withObserved(3))}},
			want: want{
				mr: managed(withPolicies(observeGate...), withObserved(3)),
			},
		},
		"ClosedConditionRemoved": {
			reason: "A GateOpen condition that says only that the gate is closed goes: the gate itself says so.",
			args:   args{objs: []client.Object{managed(withPolicies(observeGate...), withObserved(3), withConditions(gateClosed(ReasonClosed, 3, recent, closedMsg)))}},
			want: want{
				mr:     managed(withPolicies(observeGate...), withObserved(3), withConditions()),
				writes: []string{"Status"},
			},
		},
		"ObserveGateOpensUpdate": {
			reason: "An Update allowance on an [Observe] resource opens [Observe, Update]: the Composition's closed gate, plus the verb.",
			args:   args{objs: []client.Object{managed(withPolicies(observeGate...), withAllowances(upd), withObserved(2))}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr:      managed(withPolicies(gate.Observe, gate.Update), withAllowances(upd), withApproved(4), withObserved(2)),
				writes:  []string{"Update"},
				events:  []string{"Normal Opened " + openMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"ObserveGateClosesToObserve": {
			reason: "An [Observe, Update] gate whose allowance is consumed closes to [Observe], the Composition's closed gate, not the default.",
			args:   args{objs: []client.Object{managed(withPolicies(gate.Observe, gate.Update), withAllowances(upd), withObserved(3))}},
			want: want{
				mr:      managed(withPolicies(observeGate...), withAllowances(consumed(upd)), withObserved(3)),
				writes:  []string{"Update"},
				events:  []string{"Normal Consumed " + consumedMsg},
				metrics: map[string]float64{"kausality_gates_closed_total": 1, "kausality_gate_open_duration_seconds_count": 1},
			},
		},
		"ObserveOnlyImportNeverOpens": {
			reason: "An observe-only import (its Composition asks for [Observe]) with an Update allowance keeps its gate: the allowance opens nothing, nothing is approved, and the condition says why.",
			args:   args{objs: []client.Object{managed(withPolicies(observeGate...), withAnnotation(v1alpha1.AnnotationRequestedPolicies, `["Observe"]`), withAllowances(upd), withObserved(2))}},
			want: want{
				mr: managed(withPolicies(observeGate...), withAnnotation(v1alpha1.AnnotationRequestedPolicies, `["Observe"]`), withAllowances(upd), withObserved(2),
					withConditions(gateClosed(ReasonNotRequested, 3, fixed, "gate kept to [Observe], what the Composition asks for: Update at generation 3 initiated by alice@example.com opens nothing"))),
				writes: []string{"Status"},
				events: []string{"Normal NotRequested gate kept to [Observe], what the Composition asks for: Update at generation 3 initiated by alice@example.com opens nothing"},
			},
		},
		"KeepOnDeleteNeverDeletes": {
			reason: "A resource its Composition keeps on deletion ([Create, Update, Observe, LateInitialize]) does not open for a Delete allowance.",
			args: args{objs: []client.Object{managed(withAnnotation(v1alpha1.AnnotationRequestedPolicies, `["Create","Update","Observe","LateInitialize"]`), withAllowances(del(recent)), withObserved(3),
				withConditions(gateClosed(ReasonNotRequested, 3, recent, "gate kept to [Observe LateInitialize], what the Composition asks for: Delete at generation 4 initiated by alice@example.com opens nothing")))}},
			want: want{
				mr: managed(withAnnotation(v1alpha1.AnnotationRequestedPolicies, `["Create","Update","Observe","LateInitialize"]`), withAllowances(del(recent)), withObserved(3),
					withConditions(gateClosed(ReasonNotRequested, 3, recent, "gate kept to [Observe LateInitialize], what the Composition asks for: Delete at generation 4 initiated by alice@example.com opens nothing"))),
			},
		},
		"NarrowedGateReopens": {
			reason: "Bob narrowed Alice's open Update gate (generation 4) before the provider applied her resize, which was approved at 3; the provider observed 4 Synced behind the narrowed gate. Nothing was applied: the allowance is not used up and the gate opens again.",
			args:   args{objs: []client.Object{managed(withGeneration(4), withAllowances(upd), withApproved(3), withObserved(4))}},
			want: want{
				result:  ctrl.Result{RequeueAfter: 50*time.Minute + time.Second},
				mr:      managed(withGeneration(4), withPolicies(updateGate...), withAllowances(upd), withApproved(5), withObserved(4)),
				writes:  []string{"Update"},
				events:  []string{"Normal Opened " + openMsg},
				metrics: map[string]float64{"kausality_gates_opened_total": 1},
			},
		},
		"ConflictRequeues": {
			reason: "A concurrent writer won the Update: look again, without an error.",
			args: args{
				objs: []client.Object{managed(withAllowances(upd), withObserved(2))},
				intercept: interceptor.Funcs{Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
					return conflict
				}},
			},
			want: want{
				result: ctrl.Result{RequeueAfter: conflictRecheck},
				mr:     managed(withAllowances(upd), withObserved(2)),
			},
		},
		"StatusConflictRequeues": {
			reason: "A concurrent writer won the status update after the gate was written: look again, without an error.",
			args: args{
				objs: []client.Object{managed(withFreeze(carol), withPolicies(updateGate...), withAllowances(upd), withObserved(2))},
				intercept: interceptor.Funcs{SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
					return conflict
				}},
			},
			want: want{
				result: ctrl.Result{RequeueAfter: conflictRecheck},
				mr:     managed(withFreeze(carol), withAllowances(held(regen(upd, 4))), withObserved(2)),
				writes: []string{"Update"},
			},
		},
		"UpdateFails": {
			reason: "Any other error writing the gate is returned, naming the resource.",
			args: args{
				objs: []client.Object{managed(withAllowances(upd), withObserved(2))},
				intercept: interceptor.Funcs{Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
					return errBoom
				}},
			},
			want: want{
				err: errors.Wrap(errBoom, "cannot update the gate of NopResource nop"),
				mr:  managed(withAllowances(upd), withObserved(2)),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var writes []string
			funcs := tc.args.intercept
			update := funcs.Update
			funcs.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if update != nil {
					return update(ctx, c, obj, opts...)
				}
				writes = append(writes, "Update")
				return c.Update(ctx, obj, opts...)
			}
			subUpdate := funcs.SubResourceUpdate
			funcs.SubResourceUpdate = func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if subUpdate != nil {
					return subUpdate(ctx, c, sub, obj, opts...)
				}
				if sub == "status" {
					writes = append(writes, "Status")
				} else {
					writes = append(writes, "SubResourceUpdate "+sub)
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			}
			status := &unstructured.Unstructured{}
			status.SetGroupVersionKind(nopGVK)
			kube := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).
				WithObjects(tc.args.objs...).WithStatusSubresource(status).
				WithInterceptorFuncs(funcs).Build()
			rec := events.NewFakeRecorder(10)
			reg := prometheus.NewRegistry()
			o := tc.args.opts
			o.Now = func() time.Time { return fixed }
			r := NewReconciler(kube, kube, nopGVK, rec, NewMetrics(reg), o, logging.NewNopLogger())

			got, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: mrName}})
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nReconcile(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.result, got); diff != "" {
				t.Errorf("%s\nReconcile(...): -want result, +got result:\n%s", tc.reason, diff)
			}
			var stored *unstructured.Unstructured
			if tc.want.mr != nil {
				stored = &unstructured.Unstructured{}
				stored.SetGroupVersionKind(nopGVK)
				if err := kube.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: mrName}, stored); err != nil {
					t.Fatalf("cannot get the managed resource: %v", err)
				}
			}
			if diff := cmp.Diff(normalize(t, tc.want.mr), normalize(t, stored)); diff != "" {
				t.Errorf("%s\nstored managed resource: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.writes, writes); diff != "" {
				t.Errorf("%s\nwrites: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.events, drain(rec.Events)); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
			wantMetrics := tc.want.metrics
			if wantMetrics == nil {
				wantMetrics = map[string]float64{}
			}
			if diff := cmp.Diff(wantMetrics, gathered(t, reg)); diff != "" {
				t.Errorf("%s\nmetrics: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOpenAndCloseWriteNoStatus pins the usual life of a gate: the
// controller sees it open at the allowance's generation, then the provider
// observes that generation and the gate closes as Consumed. The Events
// tell both; the only write is the one that closes the gate, and nothing
// is written to the status: each status write is a watch event Crossplane
// charges to the composite above.
func TestOpenAndCloseWriteNoStatus(t *testing.T) {
	upd := ext(3, fixed.Add(-10*time.Minute), gate.Update)
	var writes []string
	status := &unstructured.Unstructured{}
	status.SetGroupVersionKind(nopGVK)
	kube := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(managed(withPolicies(updateGate...), withAllowances(upd), withObserved(2))).
		WithStatusSubresource(status).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes = append(writes, "Update")
			return c.Update(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes = append(writes, "Update "+sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}).Build()
	rec := events.NewFakeRecorder(10)
	reg := prometheus.NewRegistry()
	r := NewReconciler(kube, kube, nopGVK, rec, NewMetrics(reg), Options{Now: func() time.Time { return fixed }}, logging.NewNopLogger())
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: mrName}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	// Seen open once: another look says nothing new.
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(nopGVK)
	if err := kube.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	withObserved(3)(got)
	if err := kube.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	writes = nil
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if c := gateCondition(got); c.Reason != "" {
		t.Errorf("GateOpen condition %v, want none", c)
	}
	if diff := cmp.Diff([]string{"Update"}, writes); diff != "" {
		t.Errorf("writes closing the gate: -want +got:\n%s", diff)
	}
	want := []string{
		"Normal Opened gate open for Update: Update at generation 3 initiated by alice@example.com",
		"Normal Consumed gate closed: consumed Update at generation 3 initiated by alice@example.com",
	}
	if diff := cmp.Diff(want, drain(rec.Events)); diff != "" {
		t.Errorf("events: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"kausality_gates_opened_total": 1, "kausality_gates_closed_total": 1, "kausality_gate_open_duration_seconds_count": 1}, gathered(t, reg)); diff != "" {
		t.Errorf("metrics: -want +got:\n%s", diff)
	}
}

// TestParentsReadOnlyWhenAFreezeMatters: the reconcile that closes a gate
// reads the parents a freeze may be set on (its allowance is still live);
// every reconcile of the closed gate after it reads none, since no freeze
// can change a decision over used-up allowances (gate.FreezeMatters).
func TestParentsReadOnlyWhenAFreezeMatters(t *testing.T) {
	upd := ext(3, fixed.Add(-10*time.Minute), gate.Update)
	mr := managed(withController("XNop", "xnop"), withPolicies(updateGate...), withAllowances(upd), withObserved(3))
	status := &unstructured.Unstructured{}
	status.SetGroupVersionKind(nopGVK)
	var parentReads int
	kube := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(mr, composite(nil)).WithStatusSubresource(status).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == "XNop" {
				parentReads++
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	r := NewReconciler(kube, kube, nopGVK, events.NewFakeRecorder(10), NewMetrics(prometheus.NewRegistry()), Options{Now: func() time.Time { return fixed }}, logging.NewNopLogger())
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: mrName}}
	for i, want := range []int{1, 0, 0} {
		parentReads = 0
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if parentReads != want {
			t.Errorf("reconcile %d read the composite %d times, want %d", i+1, parentReads, want)
		}
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(nopGVK)
	if err := kube.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "managementPolicies"); !cmp.Equal(p, closedGate) {
		t.Errorf("gate after closing: %v, want %v", p, closedGate)
	}
}
