// Package kinds finds the managed resource kinds the API server serves (the
// CRD category "managed") and starts a controller for each as it appears.
package kinds

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// categoryManaged is the CRD category every Crossplane managed resource
// kind carries.
const categoryManaged = "managed"

// categoryComposite is the CRD category Crossplane gives every composite
// resource kind an XRD defines.
const categoryComposite = "composite"

// A Kind is a managed resource kind found by discovery.
type Kind struct {
	GVK      schema.GroupVersionKind
	Resource string
}

// A Watcher finds the managed resource kinds the API server serves and
// starts a controller for each, so the gate controller needs no list of
// kinds: a provider installed later is picked up at the next discovery.
type Watcher struct {
	mgr      manager.Manager
	disco    discovery.DiscoveryInterface
	interval time.Duration
	newRec   func(schema.GroupVersionKind) reconcile.Reconciler
	// workers is how many resources of one kind are reconciled at once.
	workers int
	log     logging.Logger

	mu      sync.Mutex
	started map[schema.GroupVersionKind]Kind
	// composites are the composite resource kinds the last round found.
	composites []Kind
	notify     []func()
	// discovered: a discovery round has run to its end.
	discovered bool
}

// NewWatcher returns a Watcher that rediscovers kinds every interval and
// reconciles up to workers resources of each kind at once (at least one).
func NewWatcher(mgr manager.Manager, disco discovery.DiscoveryInterface, interval time.Duration, workers int, newRec func(schema.GroupVersionKind) reconcile.Reconciler, log logging.Logger) *Watcher {
	return &Watcher{mgr: mgr, disco: disco, interval: interval, workers: max(workers, 1), newRec: newRec, log: log, started: map[schema.GroupVersionKind]Kind{}}
}

// OnChange registers fn to run after every discovery, so what depends on
// the kinds (webhook rules, kinds whose CRDs arrived late) catches up.
func (w *Watcher) OnChange(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notify = append(w.notify, fn)
}

// Discovered reports whether a discovery round has run to its end, so
// that Kinds is what the API server serves and not the empty start of a
// process: until then nothing may be decided from Kinds (a gated managed
// resource would look like a composite).
func (w *Watcher) Discovered() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.discovered
}

// Kinds are the managed resource kinds watched so far, sorted.
func (w *Watcher) Kinds() []Kind {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Kind, 0, len(w.started))
	for _, k := range w.started {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GVK.String() < out[j].GVK.String() })
	return out
}

// Composites are the composite resource kinds (XRs) the last discovery
// round found, sorted: what an upgrade's roll-out counts.
func (w *Watcher) Composites() []Kind {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.composites)
}

// NeedLeaderElection is false: every replica serves admission, which
// decides from the kinds discovered. The controllers a Watcher adds are
// the leader's alone; the manager holds them back until it is elected.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Start discovers kinds until ctx ends. It implements manager.Runnable. A
// round that failed outright (errDiscoveryFailed) is retried within
// seconds, backing off to the interval: until one succeeds nothing is
// decided from the kinds.
func (w *Watcher) Start(ctx context.Context) error {
	retry := time.Duration(0)
	for {
		next := w.interval
		switch err := w.Discover(); {
		case errors.Is(err, errDiscoveryFailed):
			retry = min(max(2*retry, time.Second), w.interval)
			next = retry
			w.log.Info("managed resource discovery failed; admission stays not ready", "error", err.Error(), "retry", next.String())
		case err != nil:
			// Partial discovery (an aggregated API down) is normal; what
			// was found is watched.
			retry = 0
			w.log.Info("managed resource discovery incomplete", "error", err.Error())
		default:
			retry = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// errDiscoveryFailed is a discovery round that found nothing at all: the
// API server could not be asked. Such a round says nothing about which
// kinds exist, so it changes nothing.
var errDiscoveryFailed = errors.New("managed resource discovery failed outright")

// Discover starts a controller for every managed kind not yet watched.
func (w *Watcher) Discover() error {
	lists, derr := w.disco.ServerPreferredResources()
	if derr != nil && len(lists) == 0 {
		// Not "no managed kinds": with none, every managed hook would be
		// dropped and deletions would skip the guard.
		return errors.Wrap(errors.Join(errDiscoveryFailed, derr), "cannot discover API resources")
	}
	var found, composites []Kind
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if slices.Contains(r.Categories, categoryComposite) && slices.Contains(r.Verbs, "watch") && slices.Contains(r.Verbs, "patch") {
				composites = append(composites, Kind{GVK: gv.WithKind(r.Kind), Resource: r.Name})
			}
			if !slices.Contains(r.Categories, categoryManaged) || !slices.Contains(r.Verbs, "watch") || !slices.Contains(r.Verbs, "update") {
				continue
			}
			found = append(found, Kind{GVK: gv.WithKind(r.Kind), Resource: r.Name})
		}
	}
	for _, k := range found {
		w.mu.Lock()
		_, ok := w.started[k.GVK]
		w.mu.Unlock()
		if ok {
			continue
		}
		if err := w.watch(k.GVK); err != nil {
			return errors.Wrapf(err, errFmtWatch, k.GVK)
		}
		w.mu.Lock()
		w.started[k.GVK] = k
		w.mu.Unlock()
	}
	sort.Slice(composites, func(i, j int) bool { return composites[i].GVK.String() < composites[j].GVK.String() })
	w.mu.Lock()
	w.composites = composites
	// A partial round (an aggregated API down) still knows every kind a
	// CRD serves: managed kinds are all CRDs.
	w.discovered = true
	fns := slices.Clone(w.notify)
	w.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return errors.Wrap(derr, "cannot discover API resources")
}

func (w *Watcher) watch(gvk schema.GroupVersionKind) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	gated := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[v1alpha1.LabelGated] == "true" })
	return ctrl.NewControllerManagedBy(w.mgr).
		Named("gate/"+gvk.GroupKind().String()).
		For(u, builder.WithPredicates(gated)).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: w.workers}).
		Complete(w.newRec(gvk))
}
