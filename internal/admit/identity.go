package admit

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// AnnotationExternalName is crossplane-runtime's annotation naming the
// cloud resource a managed resource acts on.
const AnnotationExternalName = "crossplane.io/external-name"

// AnnotationCompositionResourceName is Crossplane's annotation naming the
// pipeline resource a composed resource is: Crossplane matches observed
// resources to what the pipeline desires by it.
const AnnotationCompositionResourceName = "crossplane.io/composition-resource-name"

// GroupMasters is the group of the cluster's administrators, who are
// outside the threat model: they can edit AllowancePolicies and the
// webhook configurations themselves.
const GroupMasters = "system:masters"

// garbageCollectors are the usernames of Kubernetes' garbage collector: the
// controller manager's own, and its service account when it runs with
// --use-service-account-credentials (kubeadm's default). An orphaning
// deletion of a composite has it remove the composite's owner references.
var garbageCollectors = []string{
	"system:kube-controller-manager",
	"system:serviceaccount:kube-system:generic-garbage-collector",
}

// Identity says why user may not make this write of a gated managed
// resource, or "" when it may. A managed resource's identity is what it
// acts on and whom it answers to: crossplane.io/external-name names the
// cloud resource every gate that opens acts on, and the controller
// reference names the composite whose allowances, freeze and deletion
// decide that gate. Changing either retargets everything the gate ships
// (DESIGN §4a: identity-bearing metadata is part of what a gate ships), so
// neither is a user's to change on a resource Kausality gates:
//   - the external name only its provider changes (crossplane-runtime
//     records it around a creation), never Crossplane or a user: a
//     Composition that retargets a gated resource is refused, as a hand
//     edit is, and the resource is re-imported under a new name instead;
//   - the controller reference only Crossplane changes (it composes the
//     resource), and the garbage collector removes, when the composite is
//     deleted with orphaning propagation.
//
// The cluster's administrators (system:masters) may change both.
func (t Writers) Identity(user policy.Identity, old, obj *unstructured.Unstructured) Verdict {
	if slices.Contains(user.Groups, GroupMasters) {
		return Allow()
	}
	if old == nil {
		// A gated resource created by hand that names a composite as its
		// controller would be adopted by Crossplane (a deleted composed
		// resource recreated by Bob with a victim's external name) and
		// then opened by the composite's next permitted change.
		if c := metav1.GetControllerOf(obj); c != nil && user.Username != t.Crossplane {
			return Deny(metrics.ReasonIdentity, "controller reference (%s) of %s: user %q may not create a gated managed resource controlled by a composite; only Crossplane composes them",
				describeRef(c), Describe(obj), user.Username)
		}
		// Likewise a resource carrying a composition resource name:
		// Crossplane adopts an uncontrolled resource its composite
		// references under the pipeline resource it names.
		if n, ok := obj.GetAnnotations()[AnnotationCompositionResourceName]; ok && user.Username != t.Crossplane {
			return Deny(metrics.ReasonIdentity, "annotation %s (%q) of %s: user %q may not create a gated managed resource as a composed one; only Crossplane composes them",
				AnnotationCompositionResourceName, n, Describe(obj), user.Username)
		}
		return Allow()
	}
	var changed []string
	if ov, nv := externalName(old), externalName(obj); ov != nv && !t.Controller(user.Username) {
		changed = append(changed, fmt.Sprintf("annotation %s (from %q to %q)", AnnotationExternalName, ov, nv))
	}
	if ov, nv := old.GetAnnotations()[AnnotationCompositionResourceName], obj.GetAnnotations()[AnnotationCompositionResourceName]; ov != nv && user.Username != t.Crossplane {
		// Crossplane matches observed resources to the pipeline's by this
		// name: swapped between two gated resources (while the composite
		// is paused), a change permitted for one reaches the other.
		changed = append(changed, fmt.Sprintf("annotation %s (from %q to %q)", AnnotationCompositionResourceName, ov, nv))
	}
	if oc, nc := metav1.GetControllerOf(old), metav1.GetControllerOf(obj); !sameController(oc, nc) {
		removedByGC := nc == nil && slices.Contains(garbageCollectors, user.Username)
		switch {
		case user.Username == t.Crossplane && oc == nil && nc != nil:
			// Crossplane composes a resource with its controller
			// reference in the write that creates it. Adding one to a
			// resource that has none is adoption: of one created by
			// hand under the name Crossplane gives a resource the
			// pipeline adds later (names are computed from what anyone
			// can read), whose external name would then be what every
			// gate the composite opens acts on.
			changed = append(changed, fmt.Sprintf("controller reference (from none to %s: Crossplane may not adopt a gated managed resource it did not compose)", describeRef(nc)))
		case user.Username != t.Crossplane && !removedByGC:
			changed = append(changed, fmt.Sprintf("controller reference (from %s to %s)", describeRef(oc), describeRef(nc)))
		}
	}
	if len(changed) == 0 {
		return Allow()
	}
	return Deny(metrics.ReasonIdentity, "%s of %s: user %q may not change what a gated managed resource acts on or answers to; only its provider changes %s and only Crossplane its composition resource name and controller reference; to act on another cloud resource, create a managed resource for it",
		strings.Join(changed, " and "), Describe(obj), user.Username, AnnotationExternalName)
}

// externalName is o's crossplane.io/external-name, "" when unset.
func externalName(o *unstructured.Unstructured) string {
	return o.GetAnnotations()[AnnotationExternalName]
}

// sameController reports whether two controller references name the same
// object: the owner's UID, and its kind and name for references written
// without one.
func sameController(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.Kind == b.Kind && a.Name == b.Name && a.APIVersion == b.APIVersion
}

func describeRef(r *metav1.OwnerReference) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s", r.Kind, r.Name)
}

// Status says why user may not write the status of obj, a gated managed
// resource or a Claim or composite of a kind AllowancePolicies name, or ""
// when it may. Kausality reads stored status everywhere it asks what has
// happened: which generation a provider observed (an allowance is used
// up), whether an XR is still being created (the creation bound), whether
// an XR applied an upgrade and is Ready (a roll-out's next batch). Those
// must be facts, so only the controllers that establish them write them:
// Crossplane (composites and Claims), providers (managed resources, by
// their service accounts in Crossplane's namespace), Kausality's provider,
// and the cluster's administrators. Crossplane's crossplane-edit role
// grants users every verb on status subresources; this takes that back
// for what Kausality reads.
func (t Writers) Status(user policy.Identity, obj *unstructured.Unstructured) Verdict {
	if t.Has(user.Username) || t.Controller(user.Username) || slices.Contains(user.Groups, GroupMasters) {
		return Allow()
	}
	return Deny(metrics.ReasonStatusWriter, "status of %s: user %q may not write it; Kausality decides what has happened (observed generations, conditions, readiness) from status, so only Crossplane and the providers write the status of gated managed resources and of the Claims and composites AllowancePolicies name",
		Describe(obj), user.Username)
}

// References says why user may not make this write of a Claim or composite,
// or "" when it may: only Crossplane changes the references a composite
// keeps to what it composed (spec.resourceRefs, legacy, or
// spec.crossplane.resourceRefs), and its controller reference, which names
// the composite that composed it (nested XRs). A deletion opens the Delete
// gates of the resources a composite references and controls (DESIGN
// §4a), so a reference a user added would be read as proof of composition;
// and a composite with a controller reference is one the garbage collector
// may delete once its controller is gone, protected from deletion or not
// (ComposedDeletion), so a user must not make a protected XR look
// composed. The garbage collector may remove the controller reference
// (an orphaning deletion of the controller).
func (t Writers) References(user policy.Identity, old, obj *unstructured.Unstructured) Verdict {
	if user.Username == t.Crossplane || slices.Contains(user.Groups, GroupMasters) {
		return Allow()
	}
	var oc *metav1.OwnerReference
	if old != nil {
		oc = metav1.GetControllerOf(old)
	}
	if nc := metav1.GetControllerOf(obj); !sameController(oc, nc) && !(nc == nil && slices.Contains(garbageCollectors, user.Username)) {
		return Deny(metrics.ReasonReferences, "controller reference (from %s to %s) of %s: user %q may not change it; only Crossplane composes a composite into another",
			describeRef(oc), describeRef(nc), Describe(obj), user.Username)
	}
	for _, path := range resourceRefPaths {
		if changed(old, obj, path) {
			return Deny(metrics.ReasonReferences, "%s of %s: user %q may not change it; only Crossplane records what a composite composed, and a deletion acts on what it records",
				strings.Join(path, "."), Describe(obj), user.Username)
		}
	}
	if was, is := annotationOf(old, AnnotationCompositionResourceName), annotationOf(obj, AnnotationCompositionResourceName); was != is {
		// A nested composite's name in its parent's pipeline: swapped
		// between two, a change permitted for one reaches the other.
		return Deny(metrics.ReasonReferences, "annotation %s (from %q to %q) of %s: user %q may not change it; only Crossplane names what a composite composed",
			AnnotationCompositionResourceName, was, is, Describe(obj), user.Username)
	}
	for _, path := range bindingPaths {
		if changed(old, obj, path) {
			return Deny(metrics.ReasonReferences, "%s of %s: user %q may not change it; only Crossplane binds a Claim and its composite, and the composite a Claim names is the one its changes, its creation and its deletion reach (a platform administrator binds a Claim to an existing composite)",
				strings.Join(path, "."), Describe(obj), user.Username)
		}
	}
	return Allow()
}

// changed reports whether the field at path differs between old (nil: a
// creation) and obj.
func changed(old, obj *unstructured.Unstructured, path []string) bool {
	var was any
	if old != nil {
		was, _, _ = unstructured.NestedFieldNoCopy(old.Object, path...)
	}
	is, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
	return !equality.Semantic.DeepEqual(was, is)
}

// bindingPaths bind a legacy Claim and its composite: the Claim's
// spec.resourceRef, which the claim controller follows (and creates the
// composite it names when there is none), and the composite's
// spec.claimRef. Repointed by a user, a Claim would take over another
// composite, or have Crossplane create one under the Claim's trace.
var bindingPaths = [][]string{{"spec", "resourceRef"}, {"spec", "claimRef"}}

// resourceRefPaths are where composites keep references to what they
// composed: legacy and modern.
var resourceRefPaths = [][]string{{"spec", "resourceRefs"}, {"spec", "crossplane", "resourceRefs"}}

// ComposedDeletion reports whether the deletion of obj, a Claim or
// composite, by user is Kubernetes' garbage collector carrying out the
// deletion of the composite that composed obj (nested XRs): obj has a
// controller reference, which only Crossplane sets on a composite
// (References), and the garbage collector deletes a dependent only once
// its controller is gone or being deleted. Deletion protection guards
// against a person deleting an XR by accident; the person who deleted the
// parent lifted the parent's protection, and whether the cloud resources
// below go too was decided then.
func ComposedDeletion(user string, obj *unstructured.Unstructured) bool {
	return slices.Contains(garbageCollectors, user) && metav1.GetControllerOf(obj) != nil
}

// GarbageCollectors are the usernames Kubernetes' garbage collector acts
// as (see garbageCollectors), for rules that run in the API server.
func GarbageCollectors() []string { return slices.Clone(garbageCollectors) }

// annotationOf is o's annotation k, "" for a nil o.
func annotationOf(o *unstructured.Unstructured, k string) string {
	if o == nil {
		return ""
	}
	return o.GetAnnotations()[k]
}
