package admit

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
)

// Writers are the users that write Kausality's own annotations: the
// provider itself (gate controller, consumption marks) and Crossplane (the
// function's output, the claim controller).
type Writers struct {
	// Provider is the provider's own username.
	Provider string
	// Crossplane is Crossplane's service account username.
	Crossplane string
}

// Has reports whether username is one of the trusted writers.
func (t Writers) Has(username string) bool {
	return username != "" && (username == t.Provider || username == t.Crossplane)
}

// Controller reports whether username is a service account in Crossplane's
// namespace other than Crossplane and the provider: a provider's, whose
// writes of its managed resources are its own bookkeeping (late
// initialization), not a user's hand edit. Users cannot act as them.
func (t Writers) Controller(username string) bool {
	ns, ok := serviceAccountNamespace(t.Crossplane)
	if !ok || t.Has(username) {
		return false
	}
	uns, uok := serviceAccountNamespace(username)
	return uok && uns == ns
}

// ControllerPrefix is the username prefix of the service accounts in
// Crossplane's namespace ("system:serviceaccount:<namespace>:"): Crossplane
// and its providers. "" when Crossplane's username names no service
// account.
func (t Writers) ControllerPrefix() string {
	ns, ok := serviceAccountNamespace(t.Crossplane)
	if !ok {
		return ""
	}
	return "system:serviceaccount:" + ns + ":"
}

// serviceAccountNamespace is the namespace of a service account's username,
// system:serviceaccount:<namespace>:<name>.
func serviceAccountNamespace(username string) (string, bool) {
	parts := strings.Split(username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" || parts[2] == "" || parts[3] == "" {
		return "", false
	}
	return parts[2], true
}

// ProtectedAnnotations only trusted users may change; users may set the
// rest of kausality.io/* (freeze, mode, allow-delete, trace-*).
var ProtectedAnnotations = []string{
	v1alpha1.AnnotationAllowances,
	v1alpha1.AnnotationTrace,
	v1alpha1.AnnotationControllerBuilds,
	v1alpha1.AnnotationCompositionRevision,
	v1alpha1.AnnotationFunctionVersions,
	v1alpha1.AnnotationInputVersions,
	v1alpha1.AnnotationApplied,
	v1alpha1.AnnotationComposedGeneration,
	v1alpha1.AnnotationLeftAsStored,
	v1alpha1.AnnotationApproved,
	v1alpha1.AnnotationApprovedGeneration,
	v1alpha1.AnnotationApprovedBefore,
	v1alpha1.AnnotationPrevious,
	v1alpha1.AnnotationAbandoned,
	v1alpha1.AnnotationRequestedPolicies,
}

// ProviderAnnotations only the provider itself may change, Crossplane
// included: what the provider works out from its watch of the fleet (a
// composite's roll-out turns), which no pipeline step may forge.
var ProviderAnnotations = []string{v1alpha1.AnnotationRolloutTurns}

// Protect says why user may not make this write, or "" when it may: only
// trusted users change the protected annotations or the gated label, and
// only the provider its own.
func (t Writers) Protect(user string, old, obj *unstructured.Unstructured) Verdict {
	var oldAnn, oldLabels map[string]string
	if old != nil {
		oldAnn, oldLabels = old.GetAnnotations(), old.GetLabels()
	}
	newAnn := obj.GetAnnotations()
	if user == "" || user != t.Provider {
		for _, k := range ProviderAnnotations {
			if ov, oldOK := oldAnn[k]; ov != newAnn[k] || oldOK != hasKey(newAnn, k) {
				return Deny(metrics.ReasonProtected, "annotation %s of %s: only Kausality's provider may change it, not user %q", k, Describe(obj), user)
			}
		}
	}
	if t.Has(user) {
		return Allow()
	}
	var changed []string
	for _, k := range ProtectedAnnotations {
		ov, oldOK := oldAnn[k]
		nv, newOK := newAnn[k]
		if (ov != nv || oldOK != newOK) && !removesUnreadable(k, ov, oldOK, newOK) {
			changed = append(changed, "annotation "+k)
		}
	}
	if ov, nv := oldLabels[v1alpha1.LabelGated], obj.GetLabels()[v1alpha1.LabelGated]; ov != nv {
		changed = append(changed, "label "+v1alpha1.LabelGated)
	}
	if len(changed) == 0 {
		return Allow()
	}
	return Deny(metrics.ReasonProtected, "%s of %s: only Kausality and Crossplane may change %s; user %q may set %s, %s and %s* annotations",
		strings.Join(changed, " and "), Describe(obj), strings.Join(changed, ", "), user,
		v1alpha1.AnnotationFreeze, v1alpha1.AnnotationAllowDelete, v1alpha1.AnnotationTraceLabelPrefix)
}

// OnlyTurns reports whether a write of an existing object changes nothing
// of it but its roll-out turns (ProviderAnnotations): the provider's own
// record, which no policy bounds, so admission need not evaluate one.
func OnlyTurns(old, obj *unstructured.Unstructured) bool {
	if old == nil {
		return false
	}
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		ann := c.GetAnnotations()
		delete(ann, v1alpha1.AnnotationRolloutTurns)
		c.SetAnnotations(ann)
		c.SetManagedFields(nil)
		c.SetResourceVersion("")
		return c.Object
	}
	return equality.Semantic.DeepEqual(strip(old), strip(obj))
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// removesUnreadable reports whether a write removes a stored allowances or
// trace annotation that cannot be read. That loses nothing (an unreadable
// annotation counts as none) and is the repair path: a malformed allowances
// annotation otherwise blocks every write of its object.
func removesUnreadable(k, stored string, had, has bool) bool {
	if !had || has {
		return false
	}
	switch k {
	case v1alpha1.AnnotationAllowances:
		_, err := allowance.Parse(stored)
		return err != nil
	case v1alpha1.AnnotationTrace:
		_, err := allowance.ParseTrace(stored)
		return err != nil
	}
	return false
}

// providerBookkeeping are the annotations crossplane-runtime's managed
// reconciler records around external calls. It writes them with
// RetryingCriticalAnnotationUpdater, which on a conflict re-reads the
// resource and puts back every annotation of its own, older copy: a
// write-back of kausality.io annotations Kausality changed meanwhile, not
// a change by the provider. Denying it would leave the provider unable to
// record a creation (crossplane.io/external-create-pending forever).
var providerBookkeeping = []string{
	"crossplane.io/external-create-pending",
	"crossplane.io/external-create-succeeded",
	"crossplane.io/external-create-failed",
	"crossplane.io/external-name",
}

// RestoreStale puts back the stored protected annotations and gated label
// when an untrusted write changes them while setting one of
// crossplane-runtime's bookkeeping annotations. That never lets anything through: the stored
// values stay, whoever wrote; a user who only edits protected annotations
// is still denied with a message saying why.
func RestoreStale(old, obj *unstructured.Unstructured) bool {
	if old == nil {
		return false
	}
	oldAnn, newAnn := old.GetAnnotations(), obj.GetAnnotations()
	// The updater records: it sets these, it never removes them.
	if !slices.ContainsFunc(providerBookkeeping, func(k string) bool { v, ok := newAnn[k]; return ok && oldAnn[k] != v }) {
		return false
	}
	KeepStored(obj, old, ProtectedAnnotations...)
	labels := maps.Clone(obj.GetLabels())
	if v, ok := old.GetLabels()[v1alpha1.LabelGated]; ok {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1alpha1.LabelGated] = v
	} else {
		delete(labels, v1alpha1.LabelGated)
	}
	obj.SetLabels(labels)
	return true
}
