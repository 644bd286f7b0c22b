package admit

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// FreezeChanged reports whether a write sets, changes or lifts
// kausality.io/freeze.
func FreezeChanged(old, obj *unstructured.Unstructured) bool {
	var was string
	var had bool
	if old != nil {
		was, had = old.GetAnnotations()[v1alpha1.AnnotationFreeze]
	}
	is, has := obj.GetAnnotations()[v1alpha1.AnnotationFreeze]
	return had != has || was != is
}

// Freeze settles a user's write of kausality.io/freeze (DESIGN §3): anyone
// may set one, and admission records who and when, whatever the value
// claims; only the user who set it, or a user a policy for the kind names
// as a subject who may initiate changes, may lift or replace it (set holds
// the policies the caller found for it: on a composed resource, its
// composite's when those name the user). A freeze
// that cannot be read names nobody, so only such a user may lift it.
// Crossplane and Kausality pass unchanged (Crossplane copies a Claim's
// freeze to its XR and back); a provider's change is undone. It returns a
// denial, or "" after updating obj.
func (t Writers) Freeze(user policy.Identity, old, obj *unstructured.Unstructured, set policy.Set, now time.Time) Verdict {
	if t.Has(user.Username) || !FreezeChanged(old, obj) {
		return Allow()
	}
	if t.Controller(user.Username) {
		// A provider never sets or lifts a freeze: a change is its older
		// copy written back (crossplane-runtime's critical annotation
		// updater after a conflict), so the stored freeze stays.
		KeepStored(obj, old, v1alpha1.AnnotationFreeze)
		return Allow()
	}
	if old != nil {
		if v, ok := old.GetAnnotations()[v1alpha1.AnnotationFreeze]; ok {
			f, err := allowance.ParseFreeze(v)
			if (err != nil || f.User != user.Username) && !set.NamesInitiator(user) {
				by := f.User
				if err != nil {
					by = "nobody readable"
				}
				kinds := obj.GetKind()
				if metav1.GetControllerOf(obj) != nil {
					kinds += " or for its composite's kind"
				}
				return Deny(metrics.ReasonFrozenWrite, "annotation %s of %s was set by %s: only that user, or a subject an AllowancePolicy for %s lets initiate changes, may lift or replace it",
					v1alpha1.AnnotationFreeze, Describe(obj), by, kinds)
			}
		}
	}
	if v, ok := obj.GetAnnotations()[v1alpha1.AnnotationFreeze]; ok {
		SetAnnotation(obj, v1alpha1.AnnotationFreeze, allowance.FormatFreeze(allowance.FreezeSetBy(v, user.Username, now)))
	}
	return Allow()
}
