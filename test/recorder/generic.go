package recorder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"
)

// Object is a namespaced managed resource of any kind the recording
// provider serves from its CRD alone (a real provider's kind, say
// ec2.aws.m.upbound.io VPC): crossplane-runtime's managed reconciler reads
// and writes it unstructured, as Crossplane core reads composed resources.
type Object struct {
	composed.Unstructured
}

var _ resource.ModernManaged = &Object{}

// DeepCopyObject keeps the type, which the managed reconciler relies on.
func (o *Object) DeepCopyObject() runtime.Object {
	return &Object{Unstructured: composed.Unstructured{Unstructured: *o.Unstructured.Unstructured.DeepCopy()}}
}

// GetManagementPolicies reads spec.managementPolicies.
func (o *Object) GetManagementPolicies() xpv2.ManagementPolicies {
	var p xpv2.ManagementPolicies
	_ = fieldpath.Pave(o.Object).GetValueInto("spec.managementPolicies", &p)
	return p
}

// SetManagementPolicies writes spec.managementPolicies.
func (o *Object) SetManagementPolicies(p xpv2.ManagementPolicies) {
	_ = fieldpath.Pave(o.Object).SetValue("spec.managementPolicies", p)
}

// GetProviderConfigReference reads spec.providerConfigRef.
func (o *Object) GetProviderConfigReference() *xpv2.ProviderConfigReference {
	r := &xpv2.ProviderConfigReference{}
	if err := fieldpath.Pave(o.Object).GetValueInto("spec.providerConfigRef", r); err != nil {
		return nil
	}
	return r
}

// SetProviderConfigReference writes spec.providerConfigRef.
func (o *Object) SetProviderConfigReference(r *xpv2.ProviderConfigReference) {
	_ = fieldpath.Pave(o.Object).SetValue("spec.providerConfigRef", r)
}

// GetWriteConnectionSecretToReference reads spec.writeConnectionSecretToRef,
// a Secret in the resource's own namespace (Crossplane v2).
func (o *Object) GetWriteConnectionSecretToReference() *xpv2.LocalSecretReference {
	r := &xpv2.LocalSecretReference{}
	if err := fieldpath.Pave(o.Object).GetValueInto("spec.writeConnectionSecretToRef", r); err != nil {
		return nil
	}
	return r
}

// SetWriteConnectionSecretToReference writes spec.writeConnectionSecretToRef.
func (o *Object) SetWriteConnectionSecretToReference(r *xpv2.LocalSecretReference) {
	_ = fieldpath.Pave(o.Object).SetValue("spec.writeConnectionSecretToRef", r)
}

// KindsIn are the kinds of the CRDs in dir, at their storage versions,
// except the recorder's own Buckets: the real provider kinds the recording
// provider serves as Objects.
func KindsIn(dir string) ([]schema.GroupVersionKind, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []schema.GroupVersionKind
	for _, f := range files {
		raw, err := os.ReadFile(f) //nolint:gosec // the package's own CRDs
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return nil, errors.Wrapf(err, "cannot parse %s", f)
		}
		if strings.HasPrefix(crd.Spec.Group, "recorder.") {
			continue
		}
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			return nil, errors.Errorf("%s: the recording provider serves namespaced kinds (Crossplane v2) only, not %s", f, crd.Spec.Scope)
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				out = append(out, schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
			}
		}
	}
	return out, nil
}

// SetupKinds registers a controller for each kind, as Setup does for
// Buckets, whose external client keeps spec.forProvider in the Cloud
// under the resource's external name and reports it back, with an id, in
// status.atProvider.
func SetupKinds(mgr ctrl.Manager, cloud *Cloud, poll time.Duration, kinds ...schema.GroupVersionKind) error {
	for _, gvk := range kinds {
		s := runtime.NewScheme()
		s.AddKnownTypeWithName(gvk, &Object{})
		km := kindManager{Manager: mgr, scheme: s, client: kindClient{Client: mgr.GetClient(), gvk: gvk}}
		name := managed.ControllerName(gvk.GroupKind().String())
		r := managed.NewReconciler(km,
			resource.ManagedKind(gvk),
			managed.WithExternalConnector(&objectConnector{cloud: cloud, kind: gvk.Kind}),
			managed.WithManagementPolicies(),
			managed.WithPollInterval(poll),
			managed.WithCreationGracePeriod(0),
			managed.WithLogger(logging.NewLogrLogger(mgr.GetLogger().WithValues("controller", name))),
			managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))), //nolint:staticcheck // crossplane-runtime's recorder wants the old events API.
		)
		watched := &unstructured.Unstructured{}
		watched.SetGroupVersionKind(gvk)
		skipNameValidation := true
		if err := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			For(watched).
			WithEventFilter(resource.DesiredStateChanged()).
			WithOptions(controller.Options{SkipNameValidation: &skipNameValidation, MaxConcurrentReconciles: workers}).
			Complete(r); err != nil {
			return errors.Wrapf(err, "cannot set up the controller for %s", gvk)
		}
	}
	return nil
}

// kindManager is mgr as the managed reconciler of one kind sees it: a
// scheme that makes an Object of that kind, and a client that gives the
// reconciler's empty Object its kind before reading it.
type kindManager struct {
	manager.Manager
	scheme *runtime.Scheme
	client client.Client
}

func (m kindManager) GetScheme() *runtime.Scheme { return m.scheme }
func (m kindManager) GetClient() client.Client   { return m.client }

type kindClient struct {
	client.Client
	gvk schema.GroupVersionKind
}

func (c kindClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if o, ok := obj.(*Object); ok && o.GroupVersionKind().Empty() {
		o.SetGroupVersionKind(c.gvk)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

type objectConnector struct {
	cloud *Cloud
	kind  string
}

func (c *objectConnector) Connect(_ context.Context, _ resource.Managed) (managed.ExternalClient, error) {
	return &objectExternal{cloud: c.cloud, kind: c.kind}, nil
}

// objectExternal records every call it makes against the Cloud, as the
// Bucket's external client does.
type objectExternal struct {
	cloud *Cloud
	kind  string
}

func params(mg resource.Managed) (map[string]any, string, error) {
	o, ok := mg.(*Object)
	if !ok {
		return nil, "", errors.Errorf("managed resource %T is not an Object", mg)
	}
	p, _, err := unstructured.NestedMap(o.Object, "spec", "forProvider")
	if err != nil {
		return nil, "", errors.Wrapf(err, "cannot read spec.forProvider of %s %s", o.GetKind(), o.GetName())
	}
	n := meta.GetExternalName(o)
	if n == "" {
		n = o.GetName()
	}
	return p, n, nil
}

// Observe reports whether the resource exists and matches
// spec.forProvider, copies it into status.atProvider with the id and ARN
// the cloud gave it, and publishes its connection details. It never
// late-initializes.
func (e *objectExternal) Observe(_ context.Context, mg resource.Managed) (managed.ExternalObservation, error) {
	p, name, err := params(mg)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	s, exists := e.cloud.observeObject(e.kind, name)
	if !exists {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	o := mg.(*Object) //nolint:forcetypeassert // params checked it
	at := runtime.DeepCopyJSON(s)
	id := ObjectID(e.kind, name)
	at["id"], at["arn"] = id, "arn:recorder:"+strings.ToLower(e.kind)+":"+id
	_ = unstructured.SetNestedMap(o.Object, at, "status", "atProvider")
	o.SetConditions(xpv2.Available())
	return managed.ExternalObservation{
		ResourceExists:    true,
		ResourceUpToDate:  reflect.DeepEqual(runtime.DeepCopyJSON(p), s),
		ConnectionDetails: connectionDetails(e.kind, name, id),
	}, nil
}

// connectionDetails are what the cloud tells of a resource: its id and
// endpoint, and credentials (username, password) as an IAM access key
// publishes them, so compositions that gather credentials have some.
func connectionDetails(kind, name, id string) managed.ConnectionDetails {
	return managed.ConnectionDetails{
		"id":       []byte(id),
		"endpoint": []byte(fmt.Sprintf("%s.%s.recorder.example", name, strings.ToLower(kind))),
		"username": []byte(name),
		"password": []byte("secret-of-" + id),
	}
}

// ObjectID is the id the Cloud gives a resource of kind named name.
func ObjectID(kind, name string) string { return strings.ToLower(kind) + "-" + name }

// Create writes spec.forProvider into the Cloud.
func (e *objectExternal) Create(_ context.Context, mg resource.Managed) (managed.ExternalCreation, error) {
	p, name, err := params(mg)
	if err != nil {
		return managed.ExternalCreation{}, err
	}
	return managed.ExternalCreation{}, e.cloud.writeObject(VerbCreate, e.kind, name, p)
}

// Update writes spec.forProvider into the Cloud.
func (e *objectExternal) Update(_ context.Context, mg resource.Managed) (managed.ExternalUpdate, error) {
	p, name, err := params(mg)
	if err != nil {
		return managed.ExternalUpdate{}, err
	}
	return managed.ExternalUpdate{}, e.cloud.writeObject(VerbUpdate, e.kind, name, p)
}

// Delete removes the resource from the Cloud.
func (e *objectExternal) Delete(_ context.Context, mg resource.Managed) (managed.ExternalDelete, error) {
	_, name, err := params(mg)
	if err != nil {
		return managed.ExternalDelete{}, err
	}
	e.cloud.removeObject(e.kind, name)
	return managed.ExternalDelete{}, nil
}

func (e *objectExternal) Disconnect(_ context.Context) error { return nil }
