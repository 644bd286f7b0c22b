package policycontroller

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/provider/kinds"
)

// Webhook paths the provider serves.
const (
	PathPolicies   = "/validate-policies"
	PathComposites = "/mutate-composite"
	PathManaged    = "/mutate-managed"
	PathDeletion   = "/validate-delete"
	PathStatus     = "/validate-status"
)

// DynamicName names the webhook configurations and admission policies the
// provider manages itself; the package ships only the static
// configuration for AllowancePolicies, whose client config (service and CA
// bundle, which Crossplane fills in) the dynamic ones copy.
const DynamicName = "kausality-dynamic"

// labelManaged marks what the provider manages itself, with the value
// managedBy.
const (
	labelManaged = "kausality.io/managed-by"
	managedBy    = "provider-kausality"
)

// Webhooks keeps the dynamic admission configuration in line with the
// AllowancePolicies and the managed kinds discovered: rules name exactly
// the kinds involved and never match all resources.
type Webhooks struct {
	Kube   client.Client
	Reader client.Reader
	Mapper meta.RESTMapper
	Cache  *policy.Cache
	// Static is the ValidatingWebhookConfiguration from the package.
	Static string
	// Managed are the managed kinds the gate controller watches.
	Managed func() []kinds.Kind
	// Discovered reports whether Managed is known yet (nil: always).
	// Until it is, the configurations are not rewritten: written from no
	// managed kinds they would drop every managed webhook.
	Discovered func() bool
	// Writes reports whether this replica writes the configurations (nil:
	// always). Of several replicas only the leader does, so two builds
	// during a rolling upgrade do not take turns rewriting them; the others
	// serve admission from what the leader wrote.
	Writes func() bool
	// Controllers is the username prefix of the service accounts whose
	// creation bookkeeping passes while the provider is down
	// (ControllerBookkeeping): "system:serviceaccount:<Crossplane's
	// namespace>:". Empty: none does.
	Controllers string
	// Namespace is the provider's own Namespace, where an administrator
	// sets the break-glass (v1alpha1.AnnotationBreakGlass); "" reads none.
	Namespace string
	Log       logging.Logger

	mu      sync.Mutex
	synced  bool  // a Sync has written the configurations
	lastErr error // the last Sync's error
}

// errNotSynced is the readiness error before the first Sync.
var errNotSynced = errors.New(errWebhookConfigurationsHaveNotBeen)

// Ready is a readiness check: ready once the webhook configurations are
// written and the last attempt to keep them in line with the policies
// succeeded. Without them admission checks nothing, so a provider that
// cannot write them (missing RBAC, say) must not look healthy. A replica
// that does not write them (not the leader) is ready as far as they go.
func (w *Webhooks) Ready(_ *http.Request) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.Writes != nil && !w.Writes():
		return nil
	case w.lastErr != nil:
		return errors.Wrap(w.lastErr, "cannot keep the webhook configurations in line with the AllowancePolicies")
	case !w.synced:
		return errNotSynced
	}
	return nil
}

// holdBrokenGlass removes the dynamic webhook configurations while the
// break-glass is set, and reports whether it is. Deletion protection and
// the mode switch guard stay: they work inside the API server and need no
// provider.
func (w *Webhooks) holdBrokenGlass(ctx context.Context) (bool, error) {
	why, err := w.brokenGlass(ctx)
	if err != nil || why == "" {
		return false, err
	}
	w.Log.Info("break-glass set: Kausality's admission webhooks are out of the write path until it is removed", "namespace", w.Namespace, "annotation", v1alpha1.AnnotationBreakGlass, "reason", why)
	if err := w.remove(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: DynamicName}}, "MutatingWebhookConfiguration"); err != nil {
		return true, err
	}
	return true, w.remove(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: DynamicName}}, "ValidatingWebhookConfiguration")
}

// brokenGlass is the break-glass set on the provider's Namespace (why it
// was set), "" when none is.
func (w *Webhooks) brokenGlass(ctx context.Context) (string, error) {
	if w.Namespace == "" {
		return "", nil
	}
	ns := &corev1.Namespace{}
	if err := w.Reader.Get(ctx, client.ObjectKey{Name: w.Namespace}, ns); err != nil {
		return "", errors.Wrapf(client.IgnoreNotFound(err), errFmtGetNamespace, w.Namespace)
	}
	why, ok := ns.GetAnnotations()[v1alpha1.AnnotationBreakGlass]
	if ok && why == "" {
		why = "(no reason given)"
	}
	return why, nil
}

// target is what the dynamic configuration is computed from.
type target struct {
	composites, protected []schema.GroupVersionResource
	protectedBy           map[schema.GroupVersionResource][]string
	managed               []schema.GroupVersionResource
	// restricted are the managed kinds the policies that compile restrict:
	// their ungated resources (created before) are gated on their next write.
	restricted []schema.GroupVersionResource
	// creating are the managed kinds whose creation admission sees: those
	// the policies restrict, every one while a policy does not compile
	// (it might restrict any).
	creating []schema.GroupVersionResource
	// owners are the package configuration's owners (the ProviderRevisions
	// Crossplane installed it from), which every object the provider
	// manages here shares: deleting the provider package deletes them all,
	// so no webhook is left failing closed for a Service that is gone.
	owners []metav1.OwnerReference
}

// Sync rewrites the dynamic webhook configurations and deletion protection
// policies. It is safe to call concurrently.
func (w *Webhooks) Sync(ctx context.Context) error {
	if w.Writes != nil && !w.Writes() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.sync(ctx)
	w.lastErr = err
	w.synced = w.synced || err == nil
	return err
}

func (w *Webhooks) sync(ctx context.Context) error {
	if broken, err := w.holdBrokenGlass(ctx); err != nil || broken {
		return err
	}
	if w.Discovered != nil && !w.Discovered() {
		return errors.New(errManagedKindsNotDiscovered)
	}
	l := &v1alpha1.AllowancePolicyList{}
	if err := w.Reader.List(ctx, l); err != nil {
		return errors.Wrap(err, errListAllowancePolicies)
	}
	t := target{protectedBy: map[schema.GroupVersionResource][]string{}}
	for i := range l.Items {
		p := &l.Items[i]
		// A policy that does not compile (its Ready condition says why)
		// still puts its kind under the webhooks and its deletion
		// protection in place: admission refuses spec changes of the kind
		// until it is fixed, as the function withholds them (fail closed).
		f := p.Spec.For
		m, err := w.Mapper.RESTMapping(schema.GroupKind{Group: f.APIGroup, Kind: f.Kind}, f.APIVersion)
		if err != nil {
			// The kind's CRD may not exist yet; the next sync picks it up.
			w.Log.Info("AllowancePolicy names a kind the API server does not serve", "policy", p.GetName(), "kind", f.Kind, "error", err.Error())
			continue
		}
		if !slices.Contains(t.composites, m.Resource) {
			t.composites = append(t.composites, m.Resource)
		}
		if p.Spec.DeletionProtection {
			if _, ok := t.protectedBy[m.Resource]; !ok {
				t.protected = append(t.protected, m.Resource)
			}
			t.protectedBy[m.Resource] = append(t.protectedBy[m.Resource], p.GetName())
		}
	}
	if w.Managed != nil {
		for _, k := range w.Managed() {
			r := k.GVK.GroupVersion().WithResource(k.Resource)
			t.managed = append(t.managed, r)
			if w.Cache == nil {
				continue
			}
			child := policy.ChildFor(k.GVK, k.Resource)
			if w.Cache.RestrictingCompiled(l.Items, child) {
				t.restricted = append(t.restricted, r)
			}
			if restricting, _ := w.Cache.Restricting(l.Items, child); restricting {
				t.creating = append(t.creating, r)
			}
		}
	}
	// A policy may name a managed kind, for hand edits; those writes go to
	// the managed webhook, which knows Crossplane's writes from a user's.
	t.composites = slices.DeleteFunc(t.composites, func(r schema.GroupVersionResource) bool { return slices.Contains(t.managed, r) })

	cc, owners, err := w.static(ctx)
	if err != nil {
		return err
	}
	t.owners = owners
	if err := w.syncMutating(ctx, cc, t); err != nil {
		return err
	}
	if err := w.syncValidating(ctx, cc, t); err != nil {
		return err
	}
	return w.syncDeletionPolicies(ctx, t)
}

// StaticWebhookName is the webhook of the package's one
// ValidatingWebhookConfiguration. Crossplane renames that configuration
// after the Provider object (crossplane-provider-<name>), which the user
// chooses, so the provider finds it by this webhook.
const StaticWebhookName = "policies.kausality.io"

// static is the client config of the package's webhook, which Crossplane
// points at the provider's service with its CA bundle, and the owners of
// its configuration (the configuration named Static, or the one holding
// StaticWebhookName), as non-controlling references.
func (w *Webhooks) static(ctx context.Context) (admissionregistrationv1.WebhookClientConfig, []metav1.OwnerReference, error) {
	var none admissionregistrationv1.WebhookClientConfig
	if w.Static != "" {
		static := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := w.Reader.Get(ctx, client.ObjectKey{Name: w.Static}, static); err != nil {
			return none, nil, errors.Wrapf(err, errFmtGetValidatingWebhookConfigurationFromPackage, w.Static)
		}
		if len(static.Webhooks) == 0 {
			return none, nil, errors.Errorf(errFmtValidatingWebhookConfigurationHasNoWebhooksCopy, w.Static)
		}
		return static.Webhooks[0].ClientConfig, shared(static.GetOwnerReferences()), nil
	}
	l := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := w.Reader.List(ctx, l); err != nil {
		return none, nil, errors.Wrap(err, errListValidatingWebhookConfigurations)
	}
	for _, c := range l.Items {
		if c.GetName() == DynamicName {
			continue
		}
		for _, h := range c.Webhooks {
			if h.Name == StaticWebhookName {
				return h.ClientConfig, shared(c.GetOwnerReferences()), nil
			}
		}
	}
	return none, nil, errors.Errorf(errFmtNoValidatingWebhookConfigurationHasWebhook, StaticWebhookName)
}

// shared are refs as references of an object that shares the owners
// without being controlled by them: the garbage collector deletes it once
// they are all gone, and nothing waits for it (blocking an owner's deletion
// would need the right to update the owner's finalizers).
func shared(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	out := make([]metav1.OwnerReference, len(refs))
	for i, r := range refs {
		out[i] = metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID}
	}
	return out
}

func (w *Webhooks) syncMutating(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, t target) error {
	var hooks []admissionregistrationv1.MutatingWebhook
	if len(t.composites) > 0 {
		composites := mutating("composites.kausality.io", clientConfig(cc, PathComposites), rules(t.composites, admissionregistrationv1.Create, admissionregistrationv1.Update), nil)
		composites.MatchConditions = changing
		hooks = append(hooks, composites)
	}
	if len(t.managed) > 0 {
		// Updates of gated resources only (the API server matches the
		// selector against the old object too, so a write dropping the
		// label is still seen).
		// A write that only narrows the gate, or only records a creation,
		// is admitted without it: a gate closes and a creation completes
		// while the provider is down (managedConditions).
		managed := mutating("managed.kausality.io", clientConfig(cc, PathManaged), rules(t.managed, admissionregistrationv1.Update), gatedSelector)
		managed.MatchConditions = managedConditions(w.Controllers)
		hooks = append(hooks, managed)
	}
	if len(t.creating) > 0 {
		// Creation of the kinds the policies restrict, however it comes
		// about: gated, with an origin trace, and what Crossplane stamps
		// on it chained. Not every managed kind: while the provider is
		// down, only these kinds cannot be created.
		hooks = append(hooks, mutating("create.managed.kausality.io", clientConfig(cc, PathManaged), rules(t.creating, admissionregistrationv1.Create), nil))
	}
	if len(t.restricted) > 0 {
		// Updates of ungated resources of the kinds the policies restrict:
		// created before a policy named their kind, they are gated by
		// their next write. Only those kinds, so a policy restricting one
		// kind does not put every managed resource's writes behind the
		// webhook.
		restricted := mutating("restricted.managed.kausality.io", clientConfig(cc, PathManaged), rules(t.restricted, admissionregistrationv1.Update), ungatedSelector)
		restricted.MatchConditions = restrictedConditions
		hooks = append(hooks, restricted)
	}
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: DynamicName}}
	if len(hooks) == 0 {
		return w.remove(ctx, c, "MutatingWebhookConfiguration")
	}
	return w.apply(ctx, c, "MutatingWebhookConfiguration", t.owners, func() {
		if !equality.Semantic.DeepEqual(c.Webhooks, hooks) {
			c.Webhooks = hooks
		}
	})
}

func (w *Webhooks) syncValidating(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, t target) error {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: DynamicName}}
	if len(t.composites) == 0 {
		return w.remove(ctx, c, "ValidatingWebhookConfiguration")
	}
	// Deleting any Claim or composite a policy names decides what happens
	// to the cloud below it: the webhook opens Delete gates (never on a
	// dry run).
	hooks := []admissionregistrationv1.ValidatingWebhook{deleting("deletion.kausality.io", clientConfig(cc, PathDeletion), rules(t.composites, admissionregistrationv1.Delete), nil)}
	if len(t.managed) > 0 {
		// Deleting a gated managed resource by itself while its Delete
		// gate is open for a deletion above it that is not final revokes
		// that gate first.
		hooks = append(hooks, deleting("managed-deletion.kausality.io", clientConfig(cc, PathDeletion), rules(t.managed, admissionregistrationv1.Delete), gatedSelector))
	}
	if len(t.restricted) > 0 {
		// Deleting an ungated resource of a restricted kind (created
		// before a policy named its kind, never written since) closes its
		// gate first, as for a gated one: it is orphaned.
		hooks = append(hooks, deleting("restricted-deletion.managed.kausality.io", clientConfig(cc, PathDeletion), rules(t.restricted, admissionregistrationv1.Delete), ungatedSelector))
	}
	// What Kausality reads from status must be facts: only Crossplane and
	// the providers write the status of the Claims and composites the
	// policies name and of gated managed resources.
	status := validating("status.kausality.io", clientConfig(cc, PathStatus), rules(subresource(t.composites, "status"), admissionregistrationv1.Update), nil)
	status.MatchConditions = statusConditions(w.Controllers)
	hooks = append(hooks, status)
	if len(t.managed) > 0 {
		managedStatus := validating("managed-status.kausality.io", clientConfig(cc, PathStatus), rules(subresource(t.managed, "status"), admissionregistrationv1.Update), gatedSelector)
		managedStatus.MatchConditions = statusConditions(w.Controllers)
		hooks = append(hooks, managedStatus)
	}
	return w.apply(ctx, c, "ValidatingWebhookConfiguration", t.owners, func() {
		if !equality.Semantic.DeepEqual(c.Webhooks, hooks) {
			c.Webhooks = hooks
		}
	})
}

// apply creates or updates obj, labelled as the provider's own and owned
// by owners, with mutate setting what the provider wants of it.
func (w *Webhooks) apply(ctx context.Context, obj client.Object, kind string, owners []metav1.OwnerReference, mutate func()) error {
	_, err := controllerutil.CreateOrUpdate(ctx, w.Kube, obj, func() error {
		obj.SetLabels(map[string]string{labelManaged: managedBy})
		obj.SetOwnerReferences(owners)
		mutate()
		return nil
	})
	return errors.Wrapf(err, errFmtApply, kind, obj.GetName())
}

// remove deletes obj if it exists.
func (w *Webhooks) remove(ctx context.Context, obj client.Object, kind string) error {
	return client.IgnoreNotFound(errors.Wrapf(w.Kube.Delete(ctx, obj), "cannot delete %s %s", kind, obj.GetName()))
}
