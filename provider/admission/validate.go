package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
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
	Managed  func() []schema.GroupVersionKind
	ReadOnly []string
	Now      func() time.Time
}

// Handle implements admission.Handler.
func (h *Deletion) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	old, _, err := objects(req)
	if err != nil || old == nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("DELETE of %s %s carries no object: %v", req.Kind.Kind, req.Name, err))
	}
	set, _, err := policiesFor(ctx, h.Policies, h.Cache, old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if set.DeletionProtection() && old.GetAnnotations()[v1alpha1.AnnotationAllowDelete] != "true" {
		return admission.Denied(DeletionMessage(describe(old), set.Names()))
	}
	if (req.DryRun != nil && *req.DryRun) || h.Kube == nil {
		return admission.Allowed("")
	}
	opened, err := h.openDeleteGates(ctx, old, req.UserInfo.Username)
	if err != nil {
		return admission.Denied(fmt.Sprintf("cannot decide what deleting %s does to the cloud, so it is not deleted: %v", describe(old), err))
	}
	if len(opened) == 0 {
		return admission.Allowed("")
	}
	return admission.Allowed("").WithWarnings(fmt.Sprintf("deleting %s deletes these cloud resources, as its policies allow: %s", describe(old), strings.Join(opened, ", ")))
}

// openDeleteGates opens the Delete gate of each gated managed resource of
// obj's composite whose deleting bound allows the external Delete, and
// names them.
func (h *Deletion) openDeleteGates(ctx context.Context, obj *unstructured.Unstructured, user string) ([]string, error) {
	xr := obj
	if _, ok, _ := unstructured.NestedMap(obj.Object, "spec", "claimRef"); !ok {
		ref, ok, _ := unstructured.NestedStringMap(obj.Object, "spec", "resourceRef")
		if !ok {
			return nil, nil // neither a Claim with a composite nor a legacy composite
		}
		xr = &unstructured.Unstructured{}
		xr.SetAPIVersion(ref["apiVersion"])
		xr.SetKind(ref["kind"])
		if err := h.Reader.Get(ctx, client.ObjectKey{Name: ref["name"]}, xr); err != nil {
			return nil, client.IgnoreNotFound(errors.Wrapf(err, "cannot get the composite %s %s", ref["kind"], ref["name"]))
		}
	}
	set, _, err := policiesFor(ctx, h.Policies, h.Cache, xr)
	if err != nil {
		return nil, err
	}
	bound := set.PhaseBound(policy.PhaseDeleting)
	origin := allowance.Hop{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), Generation: obj.GetGeneration(),
		User: user, Timestamp: allowance.Timestamp(h.Now())}
	var opened []string
	for _, gvk := range h.Managed() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := h.Reader.List(ctx, l, client.MatchingLabels{"crossplane.io/composite": xr.GetName(), v1alpha1.LabelGated: "true"}); err != nil {
			return nil, errors.Wrapf(err, "cannot list %s", gvk.Kind)
		}
		for i := range l.Items {
			mr := &l.Items[i]
			if !v1alpha1.GrantsVerb(bound.ExternalVerbs(policy.ChildOf(mr.GetAPIVersion(), mr.GetKind())), v1alpha1.VerbDelete) {
				continue
			}
			if err := h.openDelete(ctx, mr, origin); err != nil {
				return nil, err
			}
			opened = append(opened, describe(mr))
		}
	}
	return opened, nil
}

// openDelete stamps an External Delete allowance on mr, traced to the
// deletion, and opens its gate for it.
func (h *Deletion) openDelete(ctx context.Context, mr *unstructured.Unstructured, origin allowance.Hop) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(mr), mr); err != nil {
			return err
		}
		as, err := allowance.Parse(mr.GetAnnotations()[v1alpha1.AnnotationAllowances])
		if err != nil {
			return errors.Wrapf(err, "cannot parse annotation %s on %s", v1alpha1.AnnotationAllowances, describe(mr))
		}
		for _, a := range as {
			if a.Relation == v1alpha1.RelationExternal && !a.Consumed && len(a.Verbs) == 1 && a.Verbs[0] == v1alpha1.VerbDelete {
				return nil // an earlier deletion (the Claim's) opened it
			}
		}
		gen := mr.GetGeneration() + 1
		c := policy.ChildOf(mr.GetAPIVersion(), mr.GetKind())
		as = append(as, allowance.Allowance{
			Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"apiGroup": c.APIGroup, "kind": c.Kind}},
			Verbs: []string{v1alpha1.VerbDelete}, Generation: gen, Initiator: origin.User,
			Trace: allowance.Trace{origin, {APIVersion: mr.GetAPIVersion(), Kind: mr.GetKind(), Name: mr.GetName(), Generation: gen, Timestamp: origin.Timestamp}},
		})
		og, ok := allowance.ObservedGeneration(mr.Object)
		d := gate.Decide(gate.Inputs{Allowances: as, Observed: og, Reconciled: ok, Generation: mr.GetGeneration(), ReadOnly: h.ReadOnly, Now: h.Now()})
		if d.Err != nil {
			return errors.Wrapf(d.Err, "cannot open the Delete gate of %s", describe(mr))
		}
		setAnnotation(mr, v1alpha1.AnnotationAllowances, allowance.Format(d.Allowances))
		if err := unstructured.SetNestedStringSlice(mr.Object, d.Policies, "spec", "managementPolicies"); err != nil {
			return err
		}
		return h.Kube.Update(ctx, mr)
	})
}

// DeletionMessage is what a denied deletion says, by the webhook and by the
// ValidatingAdmissionPolicy alike: what is protected, by which policy, and
// the annotation that lets it go.
func DeletionMessage(object string, policies []string) string {
	return fmt.Sprintf("%s is protected from deletion by AllowancePolicy %s; set the annotation %s: \"true\" on it to delete it",
		object, strings.Join(policies, ", "), v1alpha1.AnnotationAllowDelete)
}

// Policies is the validating webhook for AllowancePolicies and
// UpgradeAllowances: every CEL expression compiles and every path parses,
// or the write is denied naming the field and expression.
type Policies struct{}

// Handle implements admission.Handler.
func (h *Policies) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var err error
	switch req.Kind.Kind {
	case v1alpha1.AllowancePolicyKind:
		p := &v1alpha1.AllowancePolicy{}
		if err = json.Unmarshal(req.Object.Raw, p); err == nil {
			_, err = policy.Compile(p)
		}
	case v1alpha1.UpgradeAllowanceKind:
		u := &v1alpha1.UpgradeAllowance{}
		if err = json.Unmarshal(req.Object.Raw, u); err == nil {
			err = policy.ValidateUpgrade(u)
		}
	default:
		return admission.Allowed("")
	}
	if err != nil {
		return admission.Denied(fmt.Sprintf("%s %s: %v", req.Kind.Kind, req.Name, err))
	}
	return admission.Allowed("")
}
