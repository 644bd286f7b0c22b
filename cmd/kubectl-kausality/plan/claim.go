package plan

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/preview"
	"github.com/kausality-io/kausality-crossplane/provider/parents"
)

// claimOnly are the Claim spec fields Crossplane's claim sync does not
// copy onto the XR (crossplane-runtime's xcrd.CompositeResourceClaimSpecProps
// less xcrd.PropagateSpecProps): they describe the Claim itself. The
// revision reference is copied only when the XR's update policy is
// Manual. Every other spec field is copied as it is.
var claimOnly = map[string]bool{"resourceRef": true, "writeConnectionSecretToRef": true, "compositeDeletePolicy": true, "compositionRevisionRef": true}

// claimSynced reports whether Crossplane copies the Claim's spec field k
// onto xr.
func claimSynced(k string, xr *unstructured.Unstructured) bool {
	if k == "compositionRevisionRef" {
		p, _, _ := unstructured.NestedString(xr.Object, "spec", "compositionUpdatePolicy")
		return p == "Manual"
	}
	return !claimOnly[k]
}

// syncClaim is the XR a Claim's change reaches: the live XR (the Claim's
// spec.resourceRef) with the Claim's spec fields copied onto its spec, as
// Crossplane's claim sync does, and the allowances admission would stamp
// when Crossplane writes it, decided by admission's own code (policy
// evaluation with the Claim's allowance as parent, then injection). A
// Claim without an XR yet returns nil: the plan has nothing to render.
func syncClaim(ctx context.Context, o Options, liveClaim, claim *unstructured.Unstructured, ps []v1alpha1.AllowancePolicy) (*unstructured.Unstructured, *preview.Admission, []string, error) {
	ref, _, _ := unstructured.NestedMap(claim.Object, "spec", "resourceRef")
	apiVersion, _ := ref["apiVersion"].(string)
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	if liveClaim == nil || name == "" {
		return nil, &preview.Admission{Allowed: true}, []string{admit.Describe(claim) + " has no XR yet (spec.resourceRef): Crossplane creates one, which this plan does not render"}, nil
	}
	live := &unstructured.Unstructured{}
	live.SetAPIVersion(apiVersion)
	live.SetKind(kind)
	if err := o.Client.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, &preview.Admission{Allowed: true}, []string{admit.Describe(claim) + ": its XR " + kind + " " + name + " (spec.resourceRef) does not exist"}, nil
		}
		return nil, nil, nil, errors.Wrapf(err, "cannot get the XR %s %s of %s (spec.resourceRef)", kind, name, admit.Describe(claim))
	}
	live.SetManagedFields(nil)
	xr := live.DeepCopy()
	xr.Object["spec"] = syncedSpec(liveClaim, claim, live)
	if !equality.Semantic.DeepEqual(live.Object["spec"], xr.Object["spec"]) {
		// The API server bumps the generation of a spec change; the
		// allowances admission stamps are for that generation.
		xr.SetGeneration(live.GetGeneration() + 1)
	}
	sim, err := compositeAdmission(ctx, o, claim, live, xr, ps)
	if err != nil {
		return nil, nil, nil, err
	}
	return xr, sim, []string{"the XR's spec is the live XR's with the Claim's spec fields copied onto it, as Crossplane's claim sync does (all but resourceRef, writeConnectionSecretToRef, compositeDeletePolicy and, unless the update policy is Manual, compositionRevisionRef); its allowances are what admission would stamp when Crossplane (" + o.CrossplaneUser + ") writes it"}, nil
}

// syncedSpec is the XR's spec once Crossplane synced the Claim onto it.
// Crossplane applies the Claim's fields with server-side apply, so a
// field the live Claim had and the changed one lacks goes from the XR.
func syncedSpec(liveClaim, claim, xr *unstructured.Unstructured) map[string]any {
	spec, _ := runtime.DeepCopyJSONValue(xr.Object["spec"]).(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	claimSpec, _ := claim.Object["spec"].(map[string]any)
	liveSpec, _ := liveClaim.Object["spec"].(map[string]any)
	for k := range liveSpec {
		if _, kept := claimSpec[k]; !kept && claimSynced(k, xr) {
			delete(spec, k)
		}
	}
	for k, v := range claimSpec {
		if claimSynced(k, xr) {
			spec[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	return spec
}

// compositeAdmission is what the provider's Composites webhook decides
// when Crossplane writes xr (live as stored) on behalf of claim: the same
// steps, from internal/admit and internal/policy, without the webhook's
// request plumbing. It edits xr's annotations as the webhook would.
func compositeAdmission(ctx context.Context, o Options, claim, live, xr *unstructured.Unstructured, ps []v1alpha1.AllowancePolicy) (*preview.Admission, error) {
	a := &preview.Admission{Before: allowancesOf(live)}
	set, errs := policy.NewCache().For(xr.GetAPIVersion(), xr.GetKind(), ps)
	broken := make([]string, 0, len(errs))
	for _, err := range errs {
		broken = append(broken, err.Error())
	}
	if v := admit.RefuseBroken(broken, live, xr); !v.Allowed() {
		a.Message = v.Message
		return a, nil
	}
	if len(set.Names()) == 0 {
		a.Allowed, a.After = true, a.Before
		return a, nil
	}
	r := policy.Request{Object: xr.Object, OldObject: live.Object, User: policy.Identity{Username: o.CrossplaneUser}, Now: o.Now()}
	ns, err := parents.Namespace(ctx, o.Client, xr)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read the Namespace of %s", admit.Describe(xr))
	}
	if ns != nil {
		r.Namespace = ns.Object
	}
	gvk := xr.GroupVersionKind()
	m, err := o.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot find the resource of %s", admit.Describe(xr))
	}
	var note string
	r.Parent, note, err = admit.ParentFor(claim, live, xr, policy.ChildFor(gvk, m.Resource.Resource))
	if err != nil {
		a.Message = err.Error()
		return a, nil
	}
	var parentTrace allowance.Trace
	if r.Parent != nil {
		parentTrace = r.Parent.Trace
	} else if parentTrace, err = allowance.ParseTrace(claim.GetAnnotations()[v1alpha1.AnnotationTrace]); err != nil {
		a.Message = errors.Wrapf(err, "cannot parse annotation %s on %s", v1alpha1.AnnotationTrace, admit.Describe(claim)).Error()
		return a, nil
	}
	d, v := admit.Evaluate(set, r, xr, note)
	a.Warnings = v.Warnings
	if !v.Allowed() {
		a.Message = v.Message
		return a, nil
	}
	if err := admit.Inject(live, xr, d, parentTrace); err != nil {
		a.Message = err.Error()
		return a, nil
	}
	a.Allowed, a.After = true, allowancesOf(xr)
	return a, nil
}
