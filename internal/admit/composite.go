package admit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Inject writes the decision's allowances and trace onto obj. Both start
// from the stored object, never from the request: Crossplane's claim
// controller copies a Claim's annotations onto its composite, and those are
// the Claim's, not the composite's. Consumed allowances are pruned; the
// trace changes when the write earned something or created the object.
func Inject(old, obj *unstructured.Unstructured, d policy.Decision, parentTrace allowance.Trace) error {
	var stored map[string]string
	if old != nil {
		stored = old.GetAnnotations()
	}
	have, err := allowance.Parse(stored[v1alpha1.AnnotationAllowances])
	if err != nil {
		_, kept := obj.GetAnnotations()[v1alpha1.AnnotationAllowances]
		switch {
		case !kept:
			// The repair: removing an unreadable annotation loses nothing.
			have = nil
		case len(d.Changed) == 0 && len(d.Allowances) == 0:
			// A write that changes and earns nothing (a finalizer
			// removed) passes, so nothing gets stuck, and leaves the
			// annotations as stored, whatever the writer sent (the
			// Claim's copy, from Crossplane).
			KeepStored(obj, old, v1alpha1.AnnotationAllowances, v1alpha1.AnnotationTrace)
			return nil
		default:
			return errors.Wrapf(err, "cannot parse annotation %s on %s; it is kept as it is and writes that change the spec are denied until it is removed (an unreadable annotation counts as no allowances)", v1alpha1.AnnotationAllowances, Describe(old))
		}
	}
	var kept []allowance.Allowance
	if old != nil {
		// The stored status decides what is consumed, never the status a
		// client sends with its write; an allowance stays until the object
		// has observed a later generation (see allowance.OnComposite).
		kept = allowance.OnComposite(have, old.Object)
	}
	kept = append(kept, d.Allowances...)
	ann := maps.Clone(obj.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	if len(kept) > 0 {
		ann[v1alpha1.AnnotationAllowances] = allowance.Format(kept)
	} else {
		delete(ann, v1alpha1.AnnotationAllowances)
	}
	earned := len(d.Allowances) > 0 || old == nil
	if earned {
		ann[v1alpha1.AnnotationTrace] = allowance.FormatTrace(parentTrace.Then(d.Hop))
	}
	obj.SetAnnotations(ann)
	if !earned {
		KeepStored(obj, old, v1alpha1.AnnotationTrace)
	}
	return nil
}

// crossplaneFields are composite spec fields Crossplane itself manages;
// they are never a change a Claim must allow.
var crossplaneFields = []string{
	"spec.crossplane", "spec.claimRef", "spec.compositionRef", "spec.compositionRevisionRef", "spec.compositionSelector",
	"spec.compositionUpdatePolicy", "spec.compositionRevisionSelector", "spec.resourceRefs", "spec.writeConnectionSecretToRef",
	"spec.publishConnectionDetailsTo", "spec.environmentConfigRefs",
}

// CrossplaneField reports whether p lies in a composite spec field
// Crossplane itself manages.
func CrossplaneField(p string) bool {
	return slices.ContainsFunc(crossplaneFields, func(f string) bool { return mutation.Under(p, f) })
}

// ParentFor picks the parent's (the Claim's, or the composing composite's)
// unconsumed allowance for this composite, of
// kind child as the API server serves it, that covers every spec change,
// first in trace order. note says why none did.
//
// A composing composite's allowance is consumed as the function reads it
// (allowance.OnComposite), and used up for this composite once it was
// composed from the allowance's generation (uncomposed: by the stored
// composite's record or the composing one's): Crossplane marks a
// composite Synced at the generation it reads back after composing, so a change that landed while
// it composed from the copy before looks observed before anything carried
// it down.
func ParentFor(claim, old, xr *unstructured.Unstructured, child policy.Child) (*allowance.Allowance, string, error) {
	as, err := allowance.Parse(claim.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil {
		return nil, "", errors.Wrapf(err, "cannot parse annotation %s on %s", v1alpha1.AnnotationAllowances, Describe(claim))
	}
	var oldSpec any
	if old != nil {
		oldSpec = old.Object["spec"]
	}
	changed := mutation.Diff("spec", oldSpec, xr.Object["spec"], mutation.WithSkip(CrossplaneField))
	if _, claimed, _ := unstructured.NestedMap(xr.Object, "spec", "claimRef"); claimed || policy.IsClaim(claim.Object) {
		as = allowance.Unconsumed(as, claim.Object)
	} else {
		as = uncomposed(as, claim, old)
	}
	allowance.Sort(as)
	for i, a := range as {
		if a.Relation != v1alpha1.RelationControllerChild || !policy.MatchesChild(a.Target, child) {
			continue
		}
		if !slices.ContainsFunc(changed, func(m mutation.Mutation) bool {
			return !(a.HasVerb(v1alpha1.VerbUpdate) && (len(a.Mutations) == 0 || mutation.CoveredBy(m, a.Mutations)))
		}) {
			return &as[i], "", nil
		}
	}
	if len(changed) == 0 {
		return nil, "", nil
	}
	return nil, fmt.Sprintf("no unconsumed allowance on %s covers %s", Describe(claim), changed[0].Path), nil
}

// RefuseBroken says why a write that changes obj's spec (or creates
// it) while an AllowancePolicy for its kind does not compile: what that
// policy would permit is unknown, so nothing is (DESIGN §4a, fail closed, as
// the function does). Writes that leave the spec alone (finalizers, labels,
// annotations) pass, so no deletion gets stuck.
func RefuseBroken(broken []string, old, obj *unstructured.Unstructured) Verdict {
	if len(broken) == 0 {
		return Allow()
	}
	if old != nil {
		o, _, _ := unstructured.NestedFieldNoCopy(old.Object, "spec")
		n, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec")
		if equality.Semantic.DeepEqual(o, n) {
			return Allow()
		}
	}
	return Deny(metrics.ReasonBrokenPolicy, "%s: its spec cannot change while an AllowancePolicy for %s does not compile: %s", Describe(obj), obj.GetKind(), strings.Join(broken, "; "))
}

// Composed are the resources the composite references among its composed
// resources, spec.resourceRefs (legacy) or spec.crossplane.resourceRefs,
// each named by kind, namespace (the composite's unless the reference
// says) and name.
func Composed(xr *unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, path := range resourceRefPaths {
		refs, _, _ := unstructured.NestedSlice(xr.Object, path...)
		for _, r := range refs {
			ref, _ := r.(map[string]any)
			apiVersion, _ := ref["apiVersion"].(string)
			kind, _ := ref["kind"].(string)
			name, _ := ref["name"].(string)
			if kind == "" || name == "" {
				continue
			}
			ns, _ := ref["namespace"].(string)
			if ns == "" {
				ns = xr.GetNamespace()
			}
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(apiVersion)
			u.SetKind(kind)
			u.SetNamespace(ns)
			u.SetName(name)
			out = append(out, u)
		}
	}
	return out
}
