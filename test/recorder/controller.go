package recorder

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	mv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/m/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
)

// Bucket is a cluster-scoped, legacy-style managed resource; the
// recorder.m.kausality.io Bucket is its namespaced, Crossplane v2 twin.
var (
	_ resource.LegacyManaged = &v1alpha1.Bucket{} //nolint:staticcheck // deliberately the legacy (cluster-scoped) kind
	_ resource.ModernManaged = &mv1alpha1.Bucket{}
)

const errNotBucket = "managed resource is not a Bucket"

// workers is how many Buckets of one kind the recording provider
// reconciles at once.
const workers = 8

// Setup registers the Bucket controllers with the manager, one per kind:
// crossplane-runtime's managed reconciler with management policies enabled,
// polling every poll and with no creation grace period, whose external
// client works against cloud. The manager's scheme must hold both APIs'
// types. Controller name validation is skipped so that several managers in
// one test binary may each run the controllers.
func Setup(mgr ctrl.Manager, cloud *Cloud, poll time.Duration) error {
	for _, k := range []struct {
		gvk schema.GroupVersionKind
		obj client.Object
	}{
		{v1alpha1.BucketGroupVersionKind, &v1alpha1.Bucket{}},
		{mv1alpha1.BucketGroupVersionKind, &mv1alpha1.Bucket{}},
	} {
		name := managed.ControllerName(k.gvk.GroupKind().String())
		skipNameValidation := true
		r := managed.NewReconciler(mgr,
			resource.ManagedKind(k.gvk),
			managed.WithExternalConnector(&connector{cloud: cloud}),
			managed.WithManagementPolicies(),
			managed.WithPollInterval(poll),
			managed.WithPollIntervalHook(pollInterval),
			// The Cloud is strongly consistent: trust a "does not exist"
			// right after a Create. The default 30s grace period would
			// otherwise stall deleting a Bucket created less than 30s ago.
			managed.WithCreationGracePeriod(0),
			managed.WithLogger(logging.NewLogrLogger(mgr.GetLogger().WithValues("controller", name))),
			managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))), //nolint:staticcheck // crossplane-runtime's recorder wants the old events API.
		)
		if err := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			For(k.obj).
			WithEventFilter(resource.DesiredStateChanged()).
			// Several workers, as a real provider runs (crossplane-runtime's
			// default rate allows ten): with one, every Bucket of the suite
			// polled each second starves new ones under load.
			WithOptions(controller.Options{SkipNameValidation: &skipNameValidation, MaxConcurrentReconciles: workers}).
			Complete(r); err != nil {
			return err
		}
	}
	return nil
}

// LabelPollInterval on a Bucket sets how often the recorder observes it
// once it is up to date, instead of the suite's short poll: a fleet of
// hundreds polled every second, as nothing a real provider does, would
// starve the creations of the rest.
const LabelPollInterval = "recorder.kausality.io/poll-interval"

// pollInterval is the Bucket's LabelPollInterval, else poll.
func pollInterval(mg resource.Managed, poll time.Duration) time.Duration {
	if d, err := time.ParseDuration(mg.GetLabels()[LabelPollInterval]); err == nil && d > 0 {
		return d
	}
	return poll
}

// bucket is what the external client reads and writes of either kind.
type bucket struct {
	resource.Managed
	params *v1alpha1.BucketParameters
	at     *v1alpha1.BucketObservation
}

// bucketOf is mg as a bucket of either kind.
func bucketOf(mg resource.Managed) (bucket, error) {
	switch cr := mg.(type) {
	case *v1alpha1.Bucket:
		return bucket{Managed: cr, params: &cr.Spec.ForProvider, at: &cr.Status.AtProvider}, nil
	case *mv1alpha1.Bucket:
		return bucket{Managed: cr, params: &cr.Spec.ForProvider, at: &cr.Status.AtProvider}, nil
	}
	return bucket{}, errors.New(errNotBucket)
}

// connector connects directly to the Cloud; no ProviderConfig is read.
type connector struct {
	cloud *Cloud
}

// Connect returns an external client for the Cloud.
func (c *connector) Connect(_ context.Context, _ resource.Managed) (managed.ExternalClient, error) {
	return &external{cloud: c.cloud}, nil
}

// external records every call it makes against the Cloud. A Bucket's cloud
// bucket is named by its crossplane.io/external-name annotation, which
// crossplane-runtime sets to the object's name unless the creator chose
// one: a Bucket can adopt an existing cloud bucket, as with real providers.
type external struct {
	cloud *Cloud
}

// Observe reports whether the bucket exists and matches spec.forProvider, and
// copies it into status.atProvider. It never late-initializes.
func (e *external) Observe(_ context.Context, mg resource.Managed) (managed.ExternalObservation, error) {
	cr, err := bucketOf(mg)
	if err != nil {
		return managed.ExternalObservation{}, err
	}

	s, exists := e.cloud.observe(externalName(cr))
	if !exists {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}

	*cr.at = v1alpha1.BucketObservation{Size: s.Size, Region: s.Region}
	cr.SetConditions(xpv2.Available())

	p := *cr.params
	return managed.ExternalObservation{
		ResourceExists:          true,
		ResourceUpToDate:        s.Size == p.Size && s.Region == p.Region && maps.Equal(s.Tags, p.Tags),
		ResourceLateInitialized: false,
	}, nil
}

// Create writes spec.forProvider into the Cloud.
func (e *external) Create(_ context.Context, mg resource.Managed) (managed.ExternalCreation, error) {
	cr, err := bucketOf(mg)
	if err != nil {
		return managed.ExternalCreation{}, err
	}
	return managed.ExternalCreation{}, e.cloud.write(VerbCreate, externalName(cr), stateOf(cr))
}

// Update writes spec.forProvider into the Cloud.
func (e *external) Update(_ context.Context, mg resource.Managed) (managed.ExternalUpdate, error) {
	cr, err := bucketOf(mg)
	if err != nil {
		return managed.ExternalUpdate{}, err
	}
	return managed.ExternalUpdate{}, e.cloud.write(VerbUpdate, externalName(cr), stateOf(cr))
}

// Delete removes the bucket from the Cloud.
func (e *external) Delete(_ context.Context, mg resource.Managed) (managed.ExternalDelete, error) {
	cr, err := bucketOf(mg)
	if err != nil {
		return managed.ExternalDelete{}, err
	}
	e.cloud.remove(externalName(cr))
	return managed.ExternalDelete{}, nil
}

// Disconnect does nothing.
func (e *external) Disconnect(_ context.Context) error { return nil }

// externalName is the cloud bucket cr manages.
func externalName(cr bucket) string {
	if n := meta.GetExternalName(cr); n != "" {
		return n
	}
	return cr.GetName()
}

// stateOf returns the Cloud state spec.forProvider asks for.
func stateOf(cr bucket) State {
	p := *cr.params
	return State{Size: p.Size, Region: p.Region, Tags: p.Tags}
}
