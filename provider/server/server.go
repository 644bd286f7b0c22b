// Package server wires the provider: one controller-runtime manager with
// the gate controller, the AllowancePolicy controller, the admission
// webhooks and, when asked for, the policy derivation controller. The
// provider binary and the envtest suites both start it through New, so the
// tests run what ships.
package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	kmetrics "github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
	"github.com/kausality-io/kausality-crossplane/provider/admission"
	"github.com/kausality-io/kausality-crossplane/provider/derivecontroller"
	"github.com/kausality-io/kausality-crossplane/provider/eventwriter"
	"github.com/kausality-io/kausality-crossplane/provider/gatecontroller"
	"github.com/kausality-io/kausality-crossplane/provider/kinds"
	"github.com/kausality-io/kausality-crossplane/provider/parents"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/provider/rollouts"
)

// leaderRetryPeriod is how often a replica that does not lead asks for the
// lease.
const leaderRetryPeriod = 500 * time.Millisecond

// Options configure the provider.
type Options struct {
	// MetricsAddress and HealthAddress are listen addresses; "0" disables.
	MetricsAddress, HealthAddress string
	// PprofAddress serves Go's profiles when set, for measuring the
	// provider under load; empty or "0" disables.
	PprofAddress string
	// LeaderElection makes one replica active; its lease lives in
	// LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionNamespace string
	// WebhookHost, WebhookPort and CertDir serve the webhooks; CertDir
	// holds tls.crt and tls.key (Crossplane mounts them for providers).
	WebhookHost string
	WebhookPort int
	CertDir     string
	// StaticWebhook is the package's ValidatingWebhookConfiguration.
	StaticWebhook string
	// CrossplaneUser is the username of Crossplane's service account.
	CrossplaneUser string
	// Gate is how gates behave: MaxOpen closes gates left open; ReadOnly
	// is the closed gate of resources that do not carry their own (the
	// function writes the one its Composition's Input chose).
	Gate gate.Config
	// DiscoveryInterval is how often new managed kinds are looked for.
	DiscoveryInterval time.Duration
	// MaxReconcileRate is how many managed resources of one kind the gate
	// controller reconciles at once, as Crossplane providers' flag of the
	// same name sets it; 1 when zero.
	MaxReconcileRate int
	// DerivePolicies runs the controller that keeps an AllowancePolicy
	// derived from each Composition annotated kausality.io/derive-policy:
	// "true" (provider/derivecontroller). Off by default: it writes policies, an
	// administrator's objects, and needs to read Compositions and XRDs.
	DerivePolicies bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log is where Kausality's controllers and webhooks log, in
	// crossplane-runtime's logging interface as the function does: Info
	// for what an operator acts on, Debug for what explains a decision.
	// The manager itself logs through controller-runtime's global logger.
	Log logging.Logger
}

// Scheme is the provider's scheme: Kubernetes' built-in types and
// kausality.io.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, errAddKubernetesTypesScheme)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, errAddKausalityIoTypesScheme)
	}
	// Compositions and their revisions, which policies are derived from.
	if err := xpv1.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, errAddCrossplaneTypesScheme)
	}
	// CRDs: a managed kind's CRD starts its discovery (kinds.CRDs).
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, errors.Wrap(err, errAddCustomResourceDefinitionsScheme)
	}
	return s, nil
}

// New returns the provider's manager, ready to Start.
func New(ctx context.Context, cfg *rest.Config, o Options) (manager.Manager, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Gate = o.Gate.Defaulted()
	if err := gate.ValidateReadOnly(o.Gate.ReadOnly); err != nil {
		return nil, errors.Wrap(err, errInvalidReadOnlyManagementPolicies)
	}
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{
		&v1alpha1.AllowancePolicy{}:  {Label: labels.Everything()},
		&v1alpha1.UpgradeAllowance{}: {Label: labels.Everything()},
		// Admission reads the mode of the Namespace of every
		// Claim and XR it evaluates.
		&corev1.Namespace{}: {Label: labels.Everything()},
		// A managed kind's CRD starts its discovery (metadata only).
		kinds.CRDMetadata(): {Label: labels.Everything()},
	}
	if o.DerivePolicies {
		// Only with the flag: the cache asks the API server about every
		// kind listed here as it starts, and reading Compositions needs
		// the role the flag comes with.
		byObject[&xpv1.Composition{}] = cache.ByObject{Label: labels.Everything()}
		byObject[&xpv1.CompositionRevision{}] = cache.ByObject{Label: labels.Everything()}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  s,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddress},
		HealthProbeBindAddress:  o.HealthAddress,
		PprofBindAddress:        o.PprofAddress,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "provider-kausality.kausality.io",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// A replica that stops (a rolling upgrade, a drained node) hands the
		// lease over at once instead of leaving gates unclosed for its
		// duration.
		LeaderElectionReleaseOnCancel: true,
		// A replica that is not the leader asks for the lease this often:
		// once a stopping leader released it, the next one takes over
		// within it (e2e TestReplicasLeaderStopped), not controller-runtime's
		// default two seconds. One GET of one Lease per waiting replica.
		RetryPeriod:   ptr.To(leaderRetryPeriod),
		WebhookServer: newWebhookServer(o.WebhookHost, o.WebhookPort, o.CertDir),
		// The gate controller reads managed resources (unstructured) from
		// the cache too; controller-runtime would otherwise read them from
		// the API server and cache them for nothing.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache: cache.Options{
			// Of managed resources only gated ones are cached; Kausality's
			// own kinds are cached whole. Managed fields are never read:
			// leaving them out keeps the cache of many managed resources
			// small (an Update without them keeps the stored ones).
			DefaultLabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelGated: "true"}),
			DefaultTransform:     cache.TransformStripManagedFields(),
			ByObject:             byObject,
		},
	})
	if err != nil {
		return nil, errors.Wrap(err, errCreateManager)
	}
	direct, err := client.New(cfg, client.Options{Scheme: s, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, errors.Wrap(err, errCreateClient)
	}
	self := &authenticationv1.SelfSubjectReview{}
	if err := direct.Create(ctx, self); err != nil {
		return nil, errors.Wrap(err, errLearnOwnUsername)
	}
	trusted := admit.Writers{Provider: self.Status.UserInfo.Username, Crossplane: o.CrossplaneUser}
	o.Log.Info("trusted writers of kausality.io annotations", "provider", trusted.Provider, "crossplane", trusted.Crossplane)

	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, errCreateDiscoveryClient)
	}
	gm := gatecontroller.NewMetrics(metrics.Registry)
	// Events are written one each, without client-go's series cache
	// (provider/eventwriter).
	rec := eventwriter.New(mgr.GetClient(), s, "provider-kausality", o.Log.WithValues("component", "events"))
	if err := mgr.Add(rec); err != nil {
		return nil, errors.Wrap(err, errAddEventWriter)
	}
	watcher := kinds.NewWatcher(mgr, disco, o.DiscoveryInterval, o.MaxReconcileRate, func(gvk schema.GroupVersionKind) reconcile.Reconciler {
		return gatecontroller.NewReconciler(mgr.GetClient(), parents.Served{Reader: direct}, gvk, rec, gm, gatecontroller.Options{Gate: o.Gate, Now: o.Now}, o.Log)
	}, o.Log.WithValues("controller", "discovery"))
	if err := mgr.Add(watcher); err != nil {
		return nil, errors.Wrap(err, errAddManagedKindDiscovery)
	}
	if err := (&kinds.CRDs{Reader: direct, Watcher: watcher}).Setup(mgr); err != nil {
		return nil, err
	}

	pc := policy.NewCache()
	// Every replica discovers the managed kinds and serves admission; the
	// leader alone runs the controllers and writes the webhook
	// configurations.
	elected := func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}
	hooks := &policycontroller.Webhooks{Kube: direct, Reader: direct, Mapper: mgr.GetRESTMapper(), Cache: pc, Static: o.StaticWebhook, Managed: watcher.Kinds, Discovered: watcher.Discovered,
		Writes: elected, Controllers: trusted.ControllerPrefix(), Namespace: o.LeaderElectionNamespace, Log: o.Log.WithValues("controller", "webhooks")}
	watcher.OnChange(func() {
		if err := hooks.Sync(ctx); err != nil {
			o.Log.Info("cannot update the webhook rules for new managed kinds", "error", err)
		}
	})
	// Write the configurations once at start, policies or not, so that
	// readiness (which requires them) does not wait for a policy event.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := hooks.Sync(ctx); err != nil {
				o.Log.Info("cannot write the webhook configurations; not ready until they are written", "error", err)
				return false, nil
			}
			return true, nil
		})
	})); err != nil {
		return nil, errors.Wrap(err, errAddInitialWebhookSync)
	}
	if err := (&policycontroller.Reconciler{Kube: mgr.GetClient(), Cache: pc, Webhooks: hooks,
		Resolver: policycontroller.APIResolver{Reader: direct, Mapper: mgr.GetRESTMapper()}}).Setup(mgr); err != nil {
		return nil, errors.Wrap(err, errSetUpAllowancePolicyController)
	}
	managedGVKs := gvksOf(watcher.Kinds)
	if err := (&policycontroller.UpgradeReconciler{Kube: mgr.GetClient(), Kinds: managedGVKs}).Setup(mgr); err != nil {
		return nil, errors.Wrap(err, errSetUpUpgradeAllowanceController)
	}
	if err := setUpRollouts(mgr, cfg, s, watcher, o); err != nil {
		return nil, err
	}
	if o.DerivePolicies {
		if err := (&derivecontroller.Reconciler{Kube: mgr.GetClient(), Definitions: derivecontroller.Cluster{Reader: direct, Mapper: mgr.GetRESTMapper()},
			Events: rec, Log: o.Log.WithValues("controller", "derivation")}).Setup(mgr); err != nil {
			return nil, errors.Wrap(err, errSetUpPolicyDerivationController)
		}
	}

	srv := mgr.GetWebhookServer()
	// Every webhook is counted, timed and audited by the same decorator;
	// its metrics join the gate controller's on the manager's endpoint.
	am := kmetrics.NewAdmission(metrics.Registry)
	observed := func(name string, h webhook.AdmissionHandler) *webhook.Admission {
		return &webhook.Admission{Handler: &admission.Observed{Webhook: name, Handler: h, Metrics: am}}
	}
	srv.Register(policycontroller.PathPolicies, observed(admission.WebhookPolicies, &admission.Policies{}))
	srv.Register(policycontroller.PathComposites, observed(admission.WebhookComposites, &admission.Composites{Policies: mgr.GetClient(), Reader: direct, Cache: pc, Trusted: trusted, Now: o.Now}))
	srv.Register(policycontroller.PathManaged, observed(admission.WebhookManaged, &admission.Managed{Reader: direct, Policies: mgr.GetClient(), Cache: pc, Trusted: trusted, Gate: o.Gate, Now: o.Now}))
	srv.Register(policycontroller.PathDeletion, observed(admission.WebhookDeletion, &admission.Deletion{Policies: mgr.GetClient(), Cache: pc, Reader: direct, Kube: direct, Trusted: trusted,
		Managed: managedGVKs, Discovered: watcher.Discovered, Gate: o.Gate, Now: o.Now}))
	srv.Register(policycontroller.PathStatus, observed(admission.WebhookStatus, &admission.Status{Trusted: trusted}))

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, errors.Wrap(err, errAddHealthCheck)
	}
	if err := mgr.AddReadyzCheck("webhook", srv.StartedChecker()); err != nil {
		return nil, errors.Wrap(err, errAddReadinessCheck)
	}
	if err := mgr.AddReadyzCheck("webhook-configurations", hooks.Ready); err != nil {
		return nil, errors.Wrap(err, errAddReadinessCheck)
	}
	// A replica takes no admission request it would decide on partial
	// knowledge: not before it has discovered the managed kinds (a gated
	// managed resource would look like a composite) and its caches hold
	// the policies, UpgradeAllowances and Namespaces.
	if err := mgr.AddReadyzCheck("managed-kinds", discovered(watcher.Discovered)); err != nil {
		return nil, errors.Wrap(err, errAddReadinessCheck)
	}
	if err := mgr.AddReadyzCheck("caches", synced(mgr.GetCache(), &v1alpha1.AllowancePolicy{}, &v1alpha1.UpgradeAllowance{}, &corev1.Namespace{})); err != nil {
		return nil, errors.Wrap(err, errAddReadinessCheck)
	}
	return mgr, nil
}

// discovered is a readiness check: ready once a discovery round has run.
func discovered(done func() bool) healthz.Checker {
	return func(_ *http.Request) error {
		if !done() {
			return errors.New(errManagedKindsNotDiscoveredYet)
		}
		return nil
	}
}

// synced is a readiness check: ready once the cache of each of objs holds
// what the API server does.
func synced(c cache.Cache, objs ...client.Object) healthz.Checker {
	return func(req *http.Request) error {
		for _, o := range objs {
			i, err := c.GetInformer(req.Context(), o, cache.BlockUntilSynced(false))
			if err != nil {
				return errors.Wrapf(err, errFmtGetInformer, fmt.Sprintf("%T", o))
			}
			if !i.HasSynced() {
				return errors.Errorf(errFmtCacheNotSynced, fmt.Sprintf("%T", o))
			}
		}
		return nil
	}
}

// ServiceAccountUser is the username of the service account
// "namespace:name".
func ServiceAccountUser(nsName string) string { return "system:serviceaccount:" + nsName }

// gvksOf is the kinds found now, as GroupVersionKinds.
func gvksOf(found func() []kinds.Kind) func() []schema.GroupVersionKind {
	return func() []schema.GroupVersionKind {
		ks := found()
		out := make([]schema.GroupVersionKind, 0, len(ks))
		for _, k := range ks {
			out = append(out, k.GVK)
		}
		return out
	}
}

// setUpRollouts adds the roll-out controller and the cache of composites
// it reads. Composites are cached whole, without managed fields, by a
// cache of their own that starts on the leader: the manager's caches only
// gated managed resources, and roll-out rules may read any field of an XR.
func setUpRollouts(mgr manager.Manager, cfg *rest.Config, s *runtime.Scheme, watcher *kinds.Watcher, o Options) error {
	fleet, err := cache.New(cfg, cache.Options{Scheme: s, Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return errors.Wrap(err, errCreateFleetCache)
	}
	if err := mgr.Add(fleet); err != nil {
		return errors.Wrap(err, errCreateFleetCache)
	}
	r := &rollouts.Reconciler{Kube: mgr.GetClient(), Fleet: fleet, Composites: gvksOf(watcher.Composites), Rules: rollout.NewRules(), Now: o.Now,
		Log: o.Log.WithValues("controller", "rollouts")}
	return errors.Wrap(r.Setup(mgr), errSetUpRolloutController)
}
