package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Deletion is the validating webhook for deleting Claims and composites.
// It protects them from accidental deletion (the ValidatingAdmissionPolicy
// the provider creates does the same inside the API server; this is the
// fallback), and it is where a deletion's effect on the cloud is decided:
// an admitted deletion opens the Delete gate of each gated managed resource
// below whose composite's policies allow the external Delete while
// deleting, and leaves the others closed, so Kubernetes' garbage
// collection removes them without touching the cloud (orphaned). Opening
// gates is its side effect; dry runs have none.
type Deletion struct {
	Policies client.Reader
	Cache    *policy.Cache
	// Reader finds the composite and its managed resources uncached;
	// Kube writes the gates, as the provider.
	Reader client.Reader
	Kube   client.Client
	// Managed are the managed resource kinds to look for.
	Managed func() []schema.GroupVersionKind
	// Discovered reports whether Managed is known yet (nil: always).
	// Until it is, every deletion is refused with a retryable error: a
	// gated managed resource would be taken for a composite, and an open
	// Delete gate left open as it is deleted.
	Discovered func() bool
	// Gate is how gates behave, as for the gate controller.
	Gate gate.Config
	// Trusted names Crossplane, whose deletion of a Claim's composite
	// opens nothing of its own.
	Trusted admit.Writers
	Now     func() time.Time
}

// Handle implements admission.Handler.
func (h *Deletion) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	old, _, err := objects(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, errors.Wrapf(err, errFmtDecodeDELETE, req.Kind.Kind, req.Name))
	}
	if old == nil {
		return admission.Errored(http.StatusBadRequest, errors.Errorf(errFmtDELETECarriesNoObject, req.Kind.Kind, req.Name))
	}
	if h.Discovered != nil && !h.Discovered() {
		return admission.Errored(http.StatusServiceUnavailable, errors.Errorf(errFmtNotDiscovered, req.Kind.Kind, req.Name))
	}
	if slices.Contains(h.managed(), old.GroupVersionKind()) {
		return h.managedDeleted(ctx, req, old)
	}
	set, _, err := policiesFor(ctx, h.Policies, h.Cache, old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if set.DeletionProtection() && old.GetAnnotations()[v1alpha1.AnnotationAllowDelete] != "true" && !admit.ComposedDeletion(req.UserInfo.Username, old) {
		return deny(ctx, metrics.ReasonDeletionProtected, policy.DeletionMessage(admit.Describe(old), set.Names()))
	}
	if (req.DryRun != nil && *req.DryRun) || h.Kube == nil {
		return admission.Allowed("")
	}
	if orphaning(req) && !policy.IsClaim(old.Object) {
		// The garbage collector keeps what the composite composed: a
		// Delete gate opened now would outlive the deletion it was for,
		// and let anyone who may delete the kept resource delete its
		// cloud resource. (A Claim's composite is deleted by Crossplane,
		// whatever the Claim's propagation policy, so a Claim's deletion
		// opens as usual.)
		return admission.Allowed("").WithWarnings(fmt.Sprintf("%s is deleted orphaning what it composed: their gates stay closed and their cloud resources are kept", admit.Describe(old)))
	}
	opened, err := h.openDeleteGates(ctx, old, req.UserInfo)
	if err != nil {
		return deny(ctx, metrics.ReasonDeletionUndecided, fmt.Sprintf("cannot decide what deleting %s does to the cloud, so it is not deleted: %v", admit.Describe(old), err))
	}
	if len(opened) == 0 {
		return admission.Allowed("")
	}
	return admission.Allowed("").WithWarnings(fmt.Sprintf("deleting %s deletes these cloud resources, as its policies allow: %s", admit.Describe(old), strings.Join(opened, ", ")))
}

// openDeleteGates opens the Delete gate of each gated managed resource of
// obj's composite whose deletion bound for this user allows the external
// Delete, and names them. Only the deletion a user starts opens gates: a
// Claim's (then the composite's managed resources), or a composite's
// deleted directly (unclaimed, or modern). Crossplane deleting a Claim's
// composite opens nothing more: it only carries out the Claim's deletion,
// which opened what its user was permitted.
func (h *Deletion) openDeleteGates(ctx context.Context, obj *unstructured.Unstructured, user authenticationv1.UserInfo) ([]string, error) {
	xr := obj
	if ref, ok, _ := unstructured.NestedStringMap(obj.Object, "spec", "resourceRef"); ok {
		// A Claim. Its composite must claim it back: spec.resourceRef is
		// the Claim user's to write.
		xr = &unstructured.Unstructured{}
		xr.SetAPIVersion(ref["apiVersion"])
		xr.SetKind(ref["kind"])
		if err := h.Reader.Get(ctx, client.ObjectKey{Name: ref["name"]}, xr); err != nil {
			return nil, client.IgnoreNotFound(errors.Wrapf(err, errFmtGetComposite, ref["kind"], ref["name"]))
		}
		back, _, _ := unstructured.NestedStringMap(xr.Object, "spec", "claimRef")
		if back["namespace"] != obj.GetNamespace() || back["name"] != obj.GetName() {
			return nil, nil
		}
	} else if user.Username == h.Trusted.Crossplane || admit.ComposedDeletion(user.Username, obj) {
		// Crossplane or the garbage collector carrying out the deletion
		// of what composed obj, which opened what its user was permitted.
		return nil, nil
	}
	ps, err := listPolicies(ctx, h.Policies)
	if err != nil {
		return nil, err
	}
	d := deletion{obj: obj, user: user, ps: ps, kinds: policy.KindsOf(ps), origin: allowance.HopOf(obj, obj.GetGeneration()).By(user.Username, h.Now())}
	return h.openComposed(ctx, d, xr, 0)
}

// deletion is a user's deletion of obj, a Claim or composite: what decides
// the Delete gates below it.
type deletion struct {
	obj    *unstructured.Unstructured
	user   authenticationv1.UserInfo
	ps     []v1alpha1.AllowancePolicy
	kinds  policy.Kinds
	origin allowance.Hop
}

// maxNesting bounds how deep a deletion follows composites composed by
// composites.
const maxNesting = 8

// openComposed opens the Delete gate of each gated managed resource xr
// composed whose deletion bound for the deleting user (xr's policies')
// allows the external Delete, and names them. A composite xr composed
// (nested XRs) is followed when xr's deletion bound lets the user delete
// it (a ControllerChild entry granting Delete): the garbage collector
// deletes it next, carrying out this deletion, and its own policies'
// deletion bound for the same user decides what it composed.
func (h *Deletion) openComposed(ctx context.Context, d deletion, xr *unstructured.Unstructured, depth int) ([]string, error) {
	// A policy that does not compile grants no deletion.
	set, _ := h.Cache.For(xr.GetAPIVersion(), xr.GetKind(), d.ps)
	bound := set.DeletionBound(identity(d.user))
	var opened []string
	managed := h.managed()
	for _, mr := range admit.Composed(xr) {
		// Only the resources the composite references, which Crossplane
		// writes: the crossplane.io/composite label and an owner reference
		// are anyone's to set on their own resource. Read each by name, not
		// by listing every managed kind: a provider may serve hundreds.
		child := d.kinds.ChildOf(mr.GetAPIVersion(), mr.GetKind())
		isManaged := slices.Contains(managed, mr.GroupVersionKind())
		if !isManaged && (depth >= maxNesting || child.Class != policy.ClassComposite || !bound.AllowsChild(child, v1alpha1.VerbDelete)) {
			continue
		}
		if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(mr), mr); err != nil {
			if kerrors.IsNotFound(err) {
				continue
			}
			return nil, errors.Wrapf(err, errFmtGet, admit.Describe(mr))
		}
		if c := metav1.GetControllerOf(mr); c == nil || c.UID != xr.GetUID() {
			continue
		}
		if !isManaged {
			below, err := h.openComposed(ctx, d, mr, depth+1)
			if err != nil {
				return nil, err
			}
			opened = append(opened, below...)
			continue
		}
		if ok, err := h.openManaged(ctx, d, mr, bound.ExternalVerbs(child)); err != nil {
			return nil, err
		} else if ok {
			opened = append(opened, admit.Describe(mr))
		}
	}
	return opened, nil
}

// openManaged opens the Delete gate of a gated managed resource mr when
// verbs, the external verbs the deleting user's bound grants its kind,
// include Delete, and reports whether it did.
func (h *Deletion) openManaged(ctx context.Context, d deletion, mr *unstructured.Unstructured, verbs []string) (bool, error) {
	if mr.GetLabels()[v1alpha1.LabelGated] != "true" {
		return false, nil
	}
	if !v1alpha1.GrantsVerb(verbs, v1alpha1.VerbDelete) {
		// A gate an earlier deletion opened (one another check refused)
		// is that deletion's, not this user's; once the deletion is final
		// (obj is being deleted) the gates are its.
		if d.obj.GetDeletionTimestamp() == nil {
			return false, h.revokeDelete(ctx, mr)
		}
		return false, nil
	}
	return true, h.openDelete(ctx, mr, d.origin)
}

// managed are the managed resource kinds, none when not known.
func (h *Deletion) managed() []schema.GroupVersionKind {
	if h.Managed == nil {
		return nil
	}
	return h.Managed()
}

// revokeDelete marks consumed every unconsumed allowance of mr, as stored,
// that opens its gate for Delete, and closes its gate for them; it writes
// nothing when there are none.
func (h *Deletion) revokeDelete(ctx context.Context, mr *unstructured.Unstructured) error {
	return h.revoke(ctx, mr, grantsDelete)
}

// revoke marks consumed the allowances of mr, as stored, that which
// selects, and closes its gate for them; it writes nothing when none is
// selected.
func (h *Deletion) revoke(ctx context.Context, mr *unstructured.Unstructured, which func(allowance.Allowance) bool) error {
	return h.regate(ctx, mr, func(as []allowance.Allowance) ([]allowance.Allowance, bool) {
		open := false
		for i := range as {
			if which(as[i]) {
				as[i].Consumed, open = true, true
			}
		}
		return as, open
	})
}

// storedAllowances are obj's allowances, none when they do not parse.
func storedAllowances(obj *unstructured.Unstructured) []allowance.Allowance {
	as, _ := allowance.Parse(obj.GetAnnotations()[v1alpha1.AnnotationAllowances])
	return as
}

// openDelete stamps an External Delete allowance on mr, traced to the
// deletion, and opens its gate for it.
func (h *Deletion) openDelete(ctx context.Context, mr *unstructured.Unstructured, origin allowance.Hop) error {
	return h.regate(ctx, mr, func(as []allowance.Allowance) ([]allowance.Allowance, bool) {
		if slices.ContainsFunc(as, func(a allowance.Allowance) bool { return a.OpensDelete() && !a.Consumed }) {
			return as, false // an earlier deletion (the Claim's) opened it
		}
		gen := allowance.NextGeneration(mr.GetGeneration())
		gvk := mr.GroupVersionKind()
		own := allowance.HopOf(mr, gen)
		own.Timestamp = origin.Timestamp
		return append(as, allowance.ExternalGrant(gvk.Group, gvk.Kind, v1alpha1.VerbDelete, gen, allowance.Trace{origin, own})), true
	})
}

// regate reads mr fresh, lets edit change its allowances (write false:
// leave it as it is), and writes them with the gate they decide, retrying
// on conflicts. The approval is the managed resource webhook's to record
// on that write: a Delete gate ships no spec.
func (h *Deletion) regate(ctx context.Context, mr *unstructured.Unstructured, edit func([]allowance.Allowance) ([]allowance.Allowance, bool)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(mr), mr); err != nil {
			return err
		}
		as, err := allowance.Parse(mr.GetAnnotations()[v1alpha1.AnnotationAllowances])
		if err != nil {
			return errors.Wrapf(err, errFmtParseAnnotation, v1alpha1.AnnotationAllowances, admit.Describe(mr))
		}
		as, write := edit(as)
		if !write {
			return nil
		}
		d := h.Gate.For(mr.Object).Decide(mr.Object, mr.Object, as, h.Now(), "")
		if d.Err != nil {
			return errors.Wrapf(d.Err, "cannot decide the gate of %s", admit.Describe(mr))
		}
		admit.SetAnnotation(mr, v1alpha1.AnnotationAllowances, allowance.Format(d.Allowances))
		if err := fieldpath.Pave(mr.Object).SetValue(gate.PathManagementPolicies, d.Policies); err != nil {
			return errors.Wrapf(err, errFmtSet, gate.PathManagementPolicies, admit.Describe(mr))
		}
		return h.Kube.Update(ctx, mr)
	})
}

// orphaning reports whether the deletion req asks for keeps the object's
// dependents (propagationPolicy Orphan, or the deprecated
// orphanDependents). Options that cannot be read are taken as not
// orphaning: the deletion then opens only what its policies permit, as
// any other.
func orphaning(req admission.Request) bool {
	if len(req.Options.Raw) == 0 {
		return false
	}
	o := &metav1.DeleteOptions{}
	if err := json.Unmarshal(req.Options.Raw, o); err != nil {
		return false
	}
	// The API server still honours the deprecated field.
	return (o.PropagationPolicy != nil && *o.PropagationPolicy == metav1.DeletePropagationOrphan) || (o.OrphanDependents != nil && *o.OrphanDependents) //nolint:staticcheck // see above
}
