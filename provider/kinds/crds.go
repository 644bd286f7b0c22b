package kinds

import (
	"context"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// discoveryLag is how soon a CRD the API server established but discovery
// does not serve yet is looked at again: the API server's discovery
// document follows a new CRD a moment after its Established condition.
const discoveryLag = 250 * time.Millisecond

// CRDs starts discovery as soon as a managed resource kind's CRD is
// established, so a newly installed provider's kinds are gated and under
// the webhooks within a second rather than at the next discovery round
// (DESIGN §4a: a kind nobody watches yet is a window for an ungated
// resource with managementPolicies ["*"]). The periodic discovery stays,
// for what a watch may miss.
type CRDs struct {
	// Reader reads CRDs whole, uncached: the watch holds metadata only,
	// since CRDs carry large schemas and change rarely.
	Reader  client.Reader
	Watcher interface {
		Discover() error
		Kinds() []Kind
	}
}

// CRDMetadata is the object CRDs are watched and cached as: metadata only.
// A manager whose cache selects by label by default must select every CRD
// for it (cache.Options.ByObject).
func CRDMetadata() *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return crd
}

// Setup watches CRDs (metadata only) with mgr, on every replica: each
// serves admission from the kinds it has discovered.
func (c *CRDs) Setup(mgr ctrl.Manager) error {
	return errors.Wrap(ctrl.NewControllerManagedBy(mgr).Named("managed-crds").
		For(CRDMetadata(), builder.OnlyMetadata).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).Complete(c), "cannot watch CustomResourceDefinitions")
}

// Reconcile runs discovery when the CRD is an established managed kind
// that is not watched yet, and looks again shortly while discovery does
// not serve it.
func (c *CRDs) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Reader.Get(ctx, req.NamespacedName, crd); err != nil {
		return reconcile.Result{}, errors.Wrapf(client.IgnoreNotFound(err), "cannot get CustomResourceDefinition %s", req.Name)
	}
	if !Managed(crd) || !established(crd) || c.watched(crd) {
		return reconcile.Result{}, nil
	}
	// A partial discovery (an aggregated API down) still finds this kind;
	// what else goes wrong the periodic round logs. Either way: look again.
	_ = c.Watcher.Discover()
	if c.watched(crd) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: discoveryLag}, nil
}

// Managed reports whether crd defines a managed resource kind: one in the
// category every Crossplane managed kind carries.
func Managed(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.Contains(crd.Spec.Names.Categories, categoryManaged)
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}

// watched reports whether some served version of crd's kind is watched.
func (c *CRDs) watched(crd *apiextensionsv1.CustomResourceDefinition) bool {
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	return slices.ContainsFunc(c.Watcher.Kinds(), func(k Kind) bool { return k.GVK.GroupKind() == gk })
}
