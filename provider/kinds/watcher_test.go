package kinds

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// disco is client-go's fake discovery client answering
// ServerPreferredResources (which the fake leaves empty) from a script.
type disco struct {
	*fakediscovery.FakeDiscovery
	lists []*metav1.APIResourceList
	err   error
}

func (d *disco) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return d.lists, d.err
}

var (
	watchable = []string{"get", "list", "watch", "update", "patch", "create", "delete"}
	nop       = schema.GroupVersionKind{Group: "nop.example.org", Version: "v1alpha1", Kind: "NopResource"}
	bucket    = schema.GroupVersionKind{Group: "recorder.kausality.io", Version: "v1alpha1", Kind: "Bucket"}
	errDisco  = &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("503")}}
)

func nopList() *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: "nop.example.org/v1alpha1", APIResources: []metav1.APIResource{
		{Name: "nopresources", Kind: "NopResource", Namespaced: true, Verbs: watchable, Categories: []string{"crossplane", "managed", "nop"}},
		{Name: "nopresources/status", Kind: "NopResource", Namespaced: true, Verbs: []string{"get", "update", "patch"}},
		{Name: "nopconfigs", Kind: "NopConfig", Verbs: watchable, Categories: []string{"crossplane", "providerconfig"}},
		{Name: "nopreadonlies", Kind: "NopReadOnly", Verbs: []string{"get", "list", "watch"}, Categories: []string{"managed"}},
		{Name: "nopunwatchables", Kind: "NopUnwatchable", Verbs: []string{"get", "list", "update"}, Categories: []string{"managed"}},
	}}
}

func otherLists() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{
		{GroupVersion: "example.com/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "xdatabases", Kind: "XDatabase", Verbs: watchable, Categories: []string{"composite"}},
			{Name: "databaseclaims", Kind: "DatabaseClaim", Namespaced: true, Verbs: watchable, Categories: []string{"claim"}},
		}},
		{GroupVersion: "not/a/group/version", APIResources: []metav1.APIResource{
			{Name: "things", Kind: "Thing", Verbs: watchable, Categories: []string{"managed"}},
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: watchable},
		}},
	}
}

func bucketList() *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: "recorder.kausality.io/v1alpha1", APIResources: []metav1.APIResource{
		{Name: "buckets", Kind: "Bucket", Verbs: watchable, Categories: []string{"crossplane", "managed"}},
	}}
}

// newManager is a manager that is never started: building controllers
// needs one, an API server does not.
func newManager(t *testing.T) manager.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("cannot build a manager without an API server: %v", err)
	}
	return mgr
}

// A round is one discovery: what the API server serves, and whether the
// controller for a kind can be built.
type round struct {
	lists    []*metav1.APIResourceList
	err      error
	unbuilds map[schema.GroupVersionKind]bool
}

func TestDiscover(t *testing.T) {
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	nopKind := Kind{GVK: nop, Resource: "nopresources"}
	bucketKind := Kind{GVK: bucket, Resource: "buckets"}

	type want struct {
		errs  []error
		built []schema.GroupVersionKind
		kinds []Kind
		// composites: Composites() when it is not empty.
		composites []Kind
		notified   int
	}
	cases := map[string]struct {
		reason string
		rounds []round
		want   want
	}{
		"ManagedCategoryOnly": {
			reason: "Only kinds in the managed category that can be watched and updated get a controller; subresources, other categories and unparseable group versions are skipped. Composite kinds are listed, not watched.",
			rounds: []round{{lists: append([]*metav1.APIResourceList{nopList()}, otherLists()...)}},
			want: want{errs: []error{nil}, built: []schema.GroupVersionKind{nop}, kinds: []Kind{nopKind}, notified: 1,
				composites: []Kind{{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XDatabase"}, Resource: "xdatabases"}}},
		},
		"NothingServed": {
			reason: "Without managed kinds nothing is watched, and dependants still hear about the discovery.",
			rounds: []round{{lists: otherLists()}},
			want: want{errs: []error{nil}, notified: 1,
				composites: []Kind{{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XDatabase"}, Resource: "xdatabases"}}},
		},
		"LaterProviderPickedUp": {
			reason: "A provider installed later is picked up at the next discovery; a kind already watched gets no second controller.",
			rounds: []round{
				{lists: []*metav1.APIResourceList{nopList()}},
				{lists: []*metav1.APIResourceList{bucketList(), nopList()}},
				{lists: []*metav1.APIResourceList{bucketList(), nopList()}},
			},
			want: want{errs: []error{nil, nil, nil}, built: []schema.GroupVersionKind{nop, bucket}, kinds: []Kind{nopKind, bucketKind}, notified: 3},
		},
		"KindsSorted": {
			reason: "Kinds are sorted by GVK, whatever order discovery returns them in.",
			rounds: []round{{lists: []*metav1.APIResourceList{bucketList(), nopList()}}},
			want:   want{errs: []error{nil}, built: []schema.GroupVersionKind{bucket, nop}, kinds: []Kind{nopKind, bucketKind}, notified: 1},
		},
		"PartialDiscovery": {
			reason: "An aggregated API that is down makes discovery partial: what was found is watched and the error is reported.",
			rounds: []round{{lists: []*metav1.APIResourceList{nopList()}, err: errDisco}},
			want: want{errs: []error{errors.Wrap(errDisco, "cannot discover API resources")},
				built: []schema.GroupVersionKind{nop}, kinds: []Kind{nopKind}, notified: 1},
		},
		"FailedOutrightDecidesNothing": {
			reason: "A round that could not ask the API server at all returns no lists: it is no round, not \"no managed kinds\". Nothing counts as discovered, dependants are not told, and the error says so.",
			rounds: []round{{err: errDisco}},
			want:   want{errs: []error{errors.Wrap(errors.Join(errDiscoveryFailed, errDisco), "cannot discover API resources")}},
		},
		"FailedOutrightKeepsWhatWasFound": {
			reason: "A failed round after a good one keeps the kinds found: watched kinds are never dropped by a failure.",
			rounds: []round{{lists: []*metav1.APIResourceList{nopList()}}, {err: errDisco}},
			want: want{errs: []error{nil, errors.Wrap(errors.Join(errDiscoveryFailed, errDisco), "cannot discover API resources")},
				built: []schema.GroupVersionKind{nop}, kinds: []Kind{nopKind}, notified: 1},
		},
		"ControllerFailsRetried": {
			reason: "A kind whose controller cannot be built is not recorded as watched, so the next discovery tries again.",
			rounds: []round{
				{lists: []*metav1.APIResourceList{nopList()}, unbuilds: map[schema.GroupVersionKind]bool{nop: true}},
				{lists: []*metav1.APIResourceList{nopList()}},
			},
			want: want{
				errs:  []error{errors.Wrapf(errors.New("must provide a non-nil Reconciler"), "cannot watch %s", nop), nil},
				built: []schema.GroupVersionKind{nop, nop}, kinds: []Kind{nopKind}, notified: 1,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &disco{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
			var (
				built    []schema.GroupVersionKind
				notified int
				current  round
			)
			w := NewWatcher(newManager(t), d, time.Hour, 1, func(gvk schema.GroupVersionKind) reconcile.Reconciler {
				built = append(built, gvk)
				if current.unbuilds[gvk] {
					return nil
				}
				return noop
			}, logging.NewNopLogger())
			w.OnChange(func() { notified++ })

			if w.Discovered() {
				t.Errorf("%s\nDiscovered() before any round = true", tc.reason)
			}
			var errs []error
			for _, r := range tc.rounds {
				current = r
				d.lists, d.err = r.lists, r.err
				errs = append(errs, w.Discover())
			}
			if diff := cmp.Diff(tc.want.errs, errs, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nDiscover(): -want errors, +got errors:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.built, built); diff != "" {
				t.Errorf("%s\ncontrollers built: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.kinds, w.Kinds(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nKinds(): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.composites, w.Composites(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nComposites(): -want, +got:\n%s", tc.reason, diff)
			}
			if w.Discovered() != slices.ContainsFunc(tc.rounds, func(r round) bool { return r.lists != nil }) {
				t.Errorf("%s\nDiscovered() after %d rounds = %t", tc.reason, len(tc.rounds), w.Discovered())
			}
			if diff := cmp.Diff(tc.want.notified, notified); diff != "" {
				t.Errorf("%s\nOnChange calls: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
