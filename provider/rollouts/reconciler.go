// Package rollouts works out, from the provider's watch of the fleet,
// whose turn it is in each UpgradeAllowance's roll-out, and records it on
// each composite (kausality.io/rollout-turns) and the counts on the
// UpgradeAllowance's status. The function then decides a composite's turn
// from the composite alone, at a cost that does not grow with the fleet
// (docs/PROPAGATION.md, "A roll-out across XRs").
package rollouts

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// Key is the one request the reconciler serves: every roll-out is worked
// out in one pass, so that one write records all of a composite's turns.
var Key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "rollouts"}}

// Intervals at which the fleet is counted again: while some roll-out is
// under way a composite that applied the upgrade and turned Ready opens
// the next batch, which nothing the reconciler watches announces.
const (
	Active = 2 * time.Second
	Idle   = 30 * time.Second
)

// Reconciler records whose turn it is in each UpgradeAllowance's roll-out.
type Reconciler struct {
	// Kube reads UpgradeAllowances from the manager's cache, and writes
	// the turns and the status.
	Kube client.Client
	// Fleet reads composites from a watch cache of their own: the
	// manager's caches only gated managed resources.
	Fleet client.Reader
	// Composites are the composite resource kinds discovery found.
	Composites func() []schema.GroupVersionKind
	// Rules compiles each roll-out once.
	Rules *rollout.Rules
	// Now is the time the rules see.
	Now func() time.Time
	// Log says what each pass found and wrote.
	Log logging.Logger
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	ul := &v1alpha1.UpgradeAllowanceList{}
	if err := r.Kube.List(ctx, ul); err != nil {
		return reconcile.Result{}, errors.Wrap(err, errListUpgradeAllowances)
	}
	var xrs []*unstructured.Unstructured
	for _, gvk := range r.Composites() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// The cache's objects are read, never changed: copying a fleet of
		// thousands on every pass would be most of the pass.
		if err := r.Fleet.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return reconcile.Result{}, errors.Wrapf(err, errFmtListComposites, gvk.Kind)
		}
		for i := range l.Items {
			xrs = append(xrs, &l.Items[i])
		}
	}
	r.log().Debug("counting the fleets", "kinds", len(r.Composites()), "composites", len(xrs))
	p := Work(r.Rules, ul.Items, xrs, r.Now())
	written, err := r.recordAll(ctx, xrs, p)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.log().Debug("worked out the roll-outs", "upgradeAllowances", len(ul.Items), "composites", len(xrs), "turnsWritten", written, "active", p.Active)
	for i := range ul.Items {
		u := &ul.Items[i]
		want := p.Status[u.GetName()]
		if statusEqual(u.Status.Rollout, want) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"rollout": rolloutPatch(want)}})
		if err := r.Kube.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return reconcile.Result{}, errors.Wrapf(err, errFmtUpdateStatusUpgradeAllowance, u.GetName())
		}
	}
	if p.Active {
		return reconcile.Result{RequeueAfter: Active}, nil
	}
	return reconcile.Result{RequeueAfter: Idle}, nil
}

func (r *Reconciler) log() logging.Logger {
	if r.Log == nil {
		return logging.NewNopLogger()
	}
	return r.Log
}

// writers is how many composites' turns are written at once: each write
// passes through admission, and a batch of a large roll-out is hundreds.
const writers = 8

// recordAll writes the turns of every composite whose record differs from
// what p worked out, writers at a time, and says how many it wrote; the
// first error stops it.
func (r *Reconciler) recordAll(ctx context.Context, xrs []*unstructured.Unstructured, p Pass) (int, error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
		written int
	)
	type write struct {
		xr    *unstructured.Unstructured
		turns string
	}
	work := make(chan write)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range work {
				err := r.recordTurns(ctx, w.xr, w.turns)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					written++
				}
				mu.Unlock()
			}
		}()
	}
	for _, xr := range xrs {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		if want := p.Turns[xr.GetUID()].Format(); xr.GetAnnotations()[v1alpha1.AnnotationRolloutTurns] != want {
			work <- write{xr: xr, turns: want}
		}
	}
	close(work)
	wg.Wait()
	return written, first
}

// recordTurns writes the composite's turns, and only them: a merge patch
// of the one annotation, whatever else changed meanwhile.
func (r *Reconciler) recordTurns(ctx context.Context, xr *unstructured.Unstructured, turns string) error {
	var v any
	if turns != "" {
		v = turns
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationRolloutTurns: v}}})
	// A copy: the cache's own object is never written to.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(xr.GroupVersionKind())
	u.SetNamespace(xr.GetNamespace())
	u.SetName(xr.GetName())
	return errors.Wrapf(client.IgnoreNotFound(r.Kube.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))), errFmtRecordTurns, xr.GetKind(), xr.GetName())
}

// rolloutPatch is status.rollout as a merge patch sets it: a message the
// roll-out no longer has is removed (a null), not kept from before, and no
// rollout removes the whole record.
func rolloutPatch(st *v1alpha1.RolloutStatus) any {
	if st == nil {
		return nil
	}
	var msg any
	if st.Message != "" {
		msg = st.Message
	}
	return map[string]any{"composites": st.Composites, "updated": st.Updated, "turns": st.Turns, "message": msg}
}

func statusEqual(a, b *v1alpha1.RolloutStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// A Pass is what one pass over the fleet works out.
type Pass struct {
	// Turns are each composite's turns, by UID.
	Turns map[types.UID]rollout.Turns
	// Status is each paced UpgradeAllowance's rollout status, by name;
	// nil for one without a rollout.
	Status map[string]*v1alpha1.RolloutStatus
	// Active: some composite has a logic it has not applied yet.
	Active bool
}

// Work works out whose turn it is, for every UpgradeAllowance with a
// rollout, in every fleet: the composites of one kind, namespace and
// Composition revision, under each logic one of them names (the function
// names the logic it runs on every composite while an upgrade is paced).
// A roll-out that does not compile gives no turn; its status says why.
// A composite no roll-out gives a turn gets an empty record.
func Work(rules *rollout.Rules, uas []v1alpha1.UpgradeAllowance, xrs []*unstructured.Unstructured, now time.Time) Pass {
	p := Pass{Turns: map[types.UID]rollout.Turns{}, Status: map[string]*v1alpha1.RolloutStatus{}}
	fs := fleetsOf(xrs)
	for i := range uas {
		u := &uas[i]
		rule, ok, err := rules.Upgrade(u)
		if !ok && err == nil {
			continue
		}
		st := &v1alpha1.RolloutStatus{}
		p.Status[u.GetName()] = st
		if err != nil {
			st.Message = err.Error()
			continue
		}
		held, failed := 0, ""
		for _, f := range fs {
			h, why := p.decide(rule, u, f, st, now)
			held += h
			if failed == "" {
				failed = why
			}
		}
		if held > 0 && failed != "" {
			// Without the count: every waiting XR repeats this message in
			// its conditions, so it changes only when the reason does
			// (the counts are status.rollout's other fields).
			st.Message = failed
		}
	}
	return p
}

// A fleet is the composites of one kind, namespace and revision, and
// their UIDs by id.
type fleet struct {
	members rollout.Fleet
	uids    map[string]types.UID
	// had are the turns each composite holds now, by id.
	had map[string]rollout.Turns
}

// fleetsOf groups composites into fleets, in a stable order; a composite
// on no revision yet is in none.
func fleetsOf(xrs []*unstructured.Unstructured) []fleet {
	byKey := map[string]fleet{}
	for _, xr := range xrs {
		rev := rollout.Revision(xr.Object)
		if rev == "" {
			continue
		}
		k := xr.GroupVersionKind().String() + " " + xr.GetNamespace() + " " + rev
		f, ok := byKey[k]
		if !ok {
			f = fleet{members: rollout.Fleet{}, uids: map[string]types.UID{}, had: map[string]rollout.Turns{}}
			byKey[k] = f
		}
		id := xr.GetNamespace() + "/" + xr.GetName()
		f.members[id] = xr.Object
		f.uids[id] = xr.GetUID()
		// An unreadable record holds no turn; the next write replaces it.
		f.had[id], _ = rollout.ParseTurns(xr.GetAnnotations()[v1alpha1.AnnotationRolloutTurns])
	}
	keys := slices.Sorted(maps.Keys(byKey))
	out := make([]fleet, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// decide gives the turns of u's roll-out in fleet f under every logic its
// composites name, counts them into st, and says how many composites it
// holds back and why.
func (p *Pass) decide(rule rollout.Rule, u *v1alpha1.UpgradeAllowance, f fleet, st *v1alpha1.RolloutStatus, now time.Time) (held int, why string) {
	logics := f.members.Logics()
	if len(logics) == 0 {
		return 0, ""
	}
	st.Composites += int64(len(f.members))
	turned := map[string]bool{}
	best := 0
	for _, logic := range logics {
		d, err := rollout.Decide(rule, f.members, logic, now)
		switch {
		case err != nil && why == "":
			why = fmt.Sprintf("%s fails: %v", d.Failed, err)
		case d.Failed != "" && why == "":
			why = d.Failed + " is false"
		}
		best = max(best, d.Updated)
		// A turn once given is kept while the UpgradeAllowance's generation
		// and the logic stay: a composite of an earlier batch that is not
		// Ready for a moment holds back the batches to come, not one under
		// way (blockers, which the function reads on every run, halt that).
		for id, had := range f.had {
			if had.Has(u.GetName(), u.GetGeneration(), logic) {
				d.Turns[id] = true
			}
		}
		for id := range d.Turns {
			turned[id] = true
			uid := f.uids[id]
			p.Turns[uid] = append(p.Turns[uid], rollout.Turn{Upgrade: u.GetName(), Generation: u.GetGeneration(), Logic: logic})
		}
		if d.Updated < len(f.members) {
			p.Active = true
		}
	}
	st.Updated += int64(best)
	st.Turns += int64(len(turned))
	return len(f.members) - len(turned), why
}

// Setup adds the reconciler to mgr: it runs on the leader, on every
// UpgradeAllowance change and at Active or Idle intervals.
func (r *Reconciler) Setup(mgr manager.Manager) error {
	return ctrl.ControllerManagedBy(mgr).Named("rollouts").
		Watches(&v1alpha1.UpgradeAllowance{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{Key}
		})).
		Complete(r)
}
