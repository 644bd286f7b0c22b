package policycontroller

// The webhooks Kausality registers, as the API server takes them: each
// handler's client config, the rules naming exactly the kinds involved,
// and how each fails (closed) and may be re-invoked.

import (
	"net/url"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// clientConfig is the static webhook's client config with another path.
func clientConfig(cc admissionregistrationv1.WebhookClientConfig, path string) admissionregistrationv1.WebhookClientConfig {
	out := *cc.DeepCopy()
	switch {
	case out.Service != nil:
		out.Service.Path = ptr.To(path)
	case out.URL != nil:
		if u, err := url.Parse(*out.URL); err == nil {
			u.Path = path
			out.URL = ptr.To(u.String())
		}
	}
	return out
}

// rules lists each resource with the operations, grouped per group and
// version so the configuration stays short.
func rules(gvrs []schema.GroupVersionResource, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	by := map[schema.GroupVersion][]string{}
	var order []schema.GroupVersion
	for _, r := range gvrs {
		gv := r.GroupVersion()
		if _, ok := by[gv]; !ok {
			order = append(order, gv)
		}
		if !slices.Contains(by[gv], r.Resource) {
			by[gv] = append(by[gv], r.Resource)
		}
	}
	slices.SortFunc(order, func(a, b schema.GroupVersion) int { return strings.Compare(a.String(), b.String()) })
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(order))
	for _, gv := range order {
		rs := by[gv]
		slices.Sort(rs)
		out = append(out, admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{gv.Group}, APIVersions: []string{gv.Version}, Resources: rs,
				Scope: ptr.To(admissionregistrationv1.AllScopes)},
		})
	}
	return out
}

var (
	sideEffectsNone = ptr.To(admissionregistrationv1.SideEffectClassNone)
	failClosed      = ptr.To(admissionregistrationv1.Fail)
	// equivalent sends a write through any served version of a kind to
	// the webhook whose rule names another version of it: a managed kind
	// with several served versions (v1beta1 and v1beta2, as many provider
	// kinds have) is covered whichever version a client writes.
	equivalent      = ptr.To(admissionregistrationv1.Equivalent)
	reviewVersions  = []string{"v1"}
	gatedSelector   = &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelGated: "true"}}
	ungatedSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: v1alpha1.LabelGated, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}},
	}}
)

// mutating is one of Kausality's mutating webhooks, failing closed.
func mutating(name string, cc admissionregistrationv1.WebhookClientConfig, rs []admissionregistrationv1.RuleWithOperations, selector *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
	return admissionregistrationv1.MutatingWebhook{
		Name: name, ClientConfig: cc, Rules: rs, ObjectSelector: selector,
		SideEffects: sideEffectsNone, FailurePolicy: failClosed, MatchPolicy: equivalent, AdmissionReviewVersions: reviewVersions,
		ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy), TimeoutSeconds: ptr.To[int32](10),
	}
}

// deleting is one of Kausality's deletion webhooks, failing closed: they
// write gates, never on a dry run.
func deleting(name string, cc admissionregistrationv1.WebhookClientConfig, rs []admissionregistrationv1.RuleWithOperations, selector *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name, ClientConfig: cc, Rules: rs, ObjectSelector: selector,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun), FailurePolicy: failClosed, MatchPolicy: equivalent, AdmissionReviewVersions: reviewVersions, TimeoutSeconds: ptr.To[int32](10),
	}
}

// validating is one of Kausality's validating webhooks without side
// effects, failing closed.
func validating(name string, cc admissionregistrationv1.WebhookClientConfig, rs []admissionregistrationv1.RuleWithOperations, selector *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name, ClientConfig: cc, Rules: rs, ObjectSelector: selector,
		SideEffects: sideEffectsNone, FailurePolicy: failClosed, MatchPolicy: equivalent, AdmissionReviewVersions: reviewVersions, TimeoutSeconds: ptr.To[int32](10),
	}
}

// subresource names the subresource sub of each resource, as webhook rules
// do ("buckets/status").
func subresource(gvrs []schema.GroupVersionResource, sub string) []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, len(gvrs))
	for i, r := range gvrs {
		out[i] = r.GroupVersion().WithResource(r.Resource + "/" + sub)
	}
	return out
}

// unchangedMetadata is the CEL of a write that keeps what Kausality reads
// of an object's metadata as stored: labels, annotations, owner references
// and finalizers, and no deletion begun.
const unchangedMetadata = `(has(object.metadata.annotations) ? object.metadata.annotations : {}) == (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}) &&
` + unchangedReferences

// unchangedReferences is unchangedMetadata but the annotations: labels,
// owner references and finalizers as stored, and no deletion begun.
const unchangedReferences = `!has(object.metadata.deletionTimestamp) &&
(has(object.metadata.labels) ? object.metadata.labels : {}) == (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}) &&
(has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) == (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []) &&
(has(object.metadata.finalizers) ? object.metadata.finalizers : []) == (has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : [])`

// OnlyClosing is the CEL of a managed resource write that changes nothing
// but its gate, to a part of the read-only set it had: spec, labels,
// annotations, owner references and finalizers are as stored, and the
// resulting spec.managementPolicies hold Observe and nothing but Observe
// and LateInitialize that the stored gate held. Such a write sends no
// change to the cloud whoever makes it, and writes nothing Kausality reads
// as a cause, so the API server admits it without calling the provider:
// the function closes a gate held open past maxGateOpen while the provider
// is down (docs/OPERATIONS.md), and the provider, once up, writes the gate
// its formula gives again.
const OnlyClosing = `request.operation == 'UPDATE' &&
has(object.spec) && has(oldObject.spec) &&
has(object.spec.managementPolicies) && has(oldObject.spec.managementPolicies) &&
'Observe' in object.spec.managementPolicies &&
object.spec.managementPolicies.all(p, (p == 'Observe' || p == 'LateInitialize') && p in oldObject.spec.managementPolicies) &&
object.spec.all(k, k == 'managementPolicies' || (k in oldObject.spec && object.spec[k] == oldObject.spec[k])) &&
oldObject.spec.all(k, k == 'managementPolicies' || k in object.spec) &&
` + unchangedMetadata

// Unchanged is the CEL of a Claim or composite write that changes nothing
// Kausality reads: its spec and the metadata of unchangedMetadata as
// stored. Crossplane writes an XR's resource references before it applies
// what the pipeline composed, whether they changed or not; admitted
// without the provider, that write lets the pipeline's closing of an
// overdue gate (OnlyClosing) reach the resource while the provider is
// down. There is nothing in it to decide.
const Unchanged = `request.operation == 'UPDATE' &&
(has(object.spec) ? object.spec : {}) == (has(oldObject.spec) ? oldObject.spec : {}) &&
` + unchangedMetadata

// OnlyCreationBookkeeping is the CEL of a managed resource write that
// records nothing but crossplane-runtime's creation bookkeeping: it sets or
// changes crossplane.io/external-create-pending, -succeeded or -failed,
// and leaves every other annotation, the spec (its gate included), labels,
// owner references and finalizers as stored. The managed reconciler writes
// these around the cloud Create and, should the second write fail, refuses
// to go on ("cannot determine creation result") until someone removes the
// pending one by hand; admitted without the provider, a creation the gate
// let through completes while the provider is down. The gate, which the
// provider checks before the Create, is not part of such a write.
//
// Only a controller's such write passes (ControllerBookkeeping): a user's
// would wedge the resource (crossplane-runtime stops at a pending marker),
// so it goes to the webhook, which refuses a change of Crossplane's
// metadata no rule permits.
const OnlyCreationBookkeeping = `request.operation == 'UPDATE' &&
(has(object.spec) ? object.spec : {}) == (has(oldObject.spec) ? oldObject.spec : {}) &&
` + unchangedReferences + ` &&
(has(object.metadata.annotations) ? object.metadata.annotations : {}).all(k, k in ['crossplane.io/external-create-pending', 'crossplane.io/external-create-succeeded', 'crossplane.io/external-create-failed'] ||
  (has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations && oldObject.metadata.annotations[k] == object.metadata.annotations[k])) &&
(has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}).all(k, has(object.metadata.annotations) && k in object.metadata.annotations)`

// ControllerBookkeeping is the CEL of an OnlyCreationBookkeeping write by a
// service account whose username starts with controllers
// ("system:serviceaccount:<Crossplane's namespace>:": Crossplane and its
// providers, which users cannot act as). Without a prefix no write is one.
func ControllerBookkeeping(controllers string) string {
	if controllers == "" || strings.ContainsAny(controllers, `'\`) {
		return "false"
	}
	return "request.userInfo.username.startsWith('" + controllers + "') &&\n" + OnlyCreationBookkeeping
}

// Stale is the CEL of an update sent from a stale copy: it names a
// resource version other than the stored one. The API server calls the
// mutating webhooks first and then compares that version with the very
// object it showed them (the generic registry's update), so such a write
// is refused with a Conflict whatever a webhook answers. Matched out of
// the mutating webhooks, it gets that Conflict from the API server alone:
// while the provider is down a writer from a stale cache (kubectl, a
// GitOps controller, Crossplane) reads again and retries as it would,
// instead of failing with "failed calling webhook". The handlers refuse
// such a write with a Conflict too (provider/admission), so a
// configuration without this condition answers the same.
const Stale = `request.operation == 'UPDATE' &&
has(object.metadata.resourceVersion) && object.metadata.resourceVersion != '' &&
object.metadata.resourceVersion != oldObject.metadata.resourceVersion`

// current keeps Stale writes from a mutating webhook.
var current = admissionregistrationv1.MatchCondition{Name: "not-from-a-stale-copy", Expression: "!(" + Stale + ")"}

// managedConditions send the managed webhook every gated resource's write
// but one that is Stale, OnlyClosing or a controller's
// OnlyCreationBookkeeping.
func managedConditions(controllers string) []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{
		current,
		{Name: "not-only-closing-the-gate", Expression: "!(" + OnlyClosing + ")"},
		{Name: "not-only-creation-bookkeeping", Expression: "!(" + ControllerBookkeeping(controllers) + ")"},
	}
}

// restrictedConditions send the webhook for ungated resources of
// restricted kinds every update but a Stale one.
var restrictedConditions = []admissionregistrationv1.MatchCondition{current}

// ControllerOrAdmin is the CEL of a request by a service account whose
// username starts with controllers (Crossplane, its providers and
// provider-kausality, in Crossplane's namespace) or by a member of
// system:masters: the writers the status webhook admits whatever they
// write (admit.Writers.Status). Matching them out of it changes no answer,
// and keeps Crossplane's status writes of XRs and Claims, and the
// providers' of managed resources, flowing while provider-kausality is
// down: `kubectl wait` and GitOps health checks see current conditions.
func ControllerOrAdmin(controllers string) string {
	admin := "'system:masters' in request.userInfo.groups"
	if controllers == "" || strings.ContainsAny(controllers, `'\`) {
		return admin
	}
	return "request.userInfo.username.startsWith('" + controllers + "') || " + admin
}

// statusConditions send the status webhooks every write but one
// ControllerOrAdmin makes.
func statusConditions(controllers string) []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{Name: "not-a-controller-or-admin", Expression: "!(" + ControllerOrAdmin(controllers) + ")"}}
}

// changing sends the composites webhook every write but a Stale or an
// Unchanged one.
var changing = []admissionregistrationv1.MatchCondition{current, {Name: "changes-something", Expression: "!(" + Unchanged + ")"}}
