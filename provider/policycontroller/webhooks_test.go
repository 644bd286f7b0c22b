package policycontroller

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/provider/kinds"
)

var errBoom = errors.New("boom")

// staticName is the ValidatingWebhookConfiguration package/provider ships.
const staticName = "provider-kausality"

var (
	caBundle = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

	// Kinds the API server serves in these tests.
	claimGVK  = schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "DatabaseClaim"}
	xdbGVK    = schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XDatabase"}
	bucketGVK = schema.GroupVersionKind{Group: "recorder.kausality.io", Version: "v1alpha1", Kind: "Bucket"}
	nopGVK    = schema.GroupVersionKind{Group: "nop.example.org", Version: "v1alpha1", Kind: "NopResource"}

	managedKinds = []kinds.Kind{{GVK: nopGVK, Resource: "nopresources"}, {GVK: bucketGVK, Resource: "buckets"}}
)

func mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{claimGVK, xdbGVK, bucketGVK, nopGVK} {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := admissionregistrationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// static is the package's ValidatingWebhookConfiguration after Crossplane
// filled in the service and CA bundle.
func static() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: staticName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "policies.kausality.io",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: "crossplane-system", Name: "provider-kausality", Path: ptr.To("/validate-policies"), Port: ptr.To[int32](9443)},
				CABundle: caBundle,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"kausality.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"allowancepolicies", "upgradeallowances"}},
			}},
		}},
	}
}

// revision is the ProviderRevision Crossplane installed the package from,
// as the owner it sets on the package's objects.
var revision = metav1.OwnerReference{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: "provider-kausality-0123456789ab", UID: "revision-uid",
	Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}

func ownedStatic() *admissionregistrationv1.ValidatingWebhookConfiguration {
	s := static()
	s.OwnerReferences = []metav1.OwnerReference{revision}
	return s
}

// owned is m with the revision as a non-controlling owner.
func owned(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: revision.APIVersion, Kind: revision.Kind, Name: revision.Name, UID: revision.UID}}
	return m
}

func ownedVAP(v *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
	v = v.DeepCopy()
	v.ObjectMeta = owned(v.ObjectMeta)
	return v
}

func ownedBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	b = b.DeepCopy()
	b.ObjectMeta = owned(b.ObjectMeta)
	return b
}

func staticURL() *admissionregistrationv1.ValidatingWebhookConfiguration {
	s := static()
	s.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://provider.example.org:9443/validate-policies"), CABundle: caBundle}
	return s
}

type policyOption func(*v1alpha1.AllowancePolicy)

func allowancePolicy(name string, gvk schema.GroupVersionKind, opts ...policyOption) *v1alpha1.AllowancePolicy {
	p := &v1alpha1.AllowancePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Generation: 2},
		Spec: v1alpha1.AllowancePolicySpec{
			For:      v1alpha1.ObjectKind{APIGroup: gvk.Group, APIVersion: gvk.Version, Kind: gvk.Kind},
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectGroup, Name: "platform-team", MayInitiate: true}},
			Rules: []v1alpha1.Rule{{
				Trigger:    "spec.size",
				Conditions: []string{"has(object.metadata.annotations) && 'jira' in object.metadata.annotations"},
				Policies: []v1alpha1.PolicyEntry{{
					Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}}, Relation: v1alpha1.RelationExternal, Verbs: []string{"Update"},
				}},
			}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func protected() policyOption {
	return func(p *v1alpha1.AllowancePolicy) { p.Spec.DeletionProtection = true }
}

func broken() policyOption {
	return func(p *v1alpha1.AllowancePolicy) { p.Spec.Rules[0].Conditions = []string{"object.spec.size >"} }
}

// meshes names App Mesh's Mesh by its CRD's plural.
func meshes() policyOption {
	return func(p *v1alpha1.AllowancePolicy) {
		p.Spec.Rules[0].Policies = append(p.Spec.Rules[0].Policies, v1alpha1.PolicyEntry{
			Target: v1alpha1.Target{APIGroup: "appmesh.aws.upbound.io", Resource: "meshes"}, Verbs: []string{"Update"}})
	}
}

func withTargets(ts ...v1alpha1.ResolvedTarget) policyOption {
	return func(p *v1alpha1.AllowancePolicy) { p.Status.Targets = ts }
}

// resolverFn is a Resolver over a table: what it lacks is unresolved.
type resolverFn struct {
	served map[policy.Named]v1alpha1.ResolvedTarget
	err    error
}

func (r resolverFn) Resolve(_ context.Context, n policy.Named) (v1alpha1.ResolvedTarget, bool, error) {
	t, ok := r.served[n]
	return t, ok, r.err
}

func withReady(c metav1.Condition, observed int64) policyOption {
	return func(p *v1alpha1.AllowancePolicy) {
		p.Status.Conditions = []metav1.Condition{c}
		p.Status.ObservedGeneration = observed
	}
}

func labelled(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{labelManaged: managedBy}}
}

func service(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: "crossplane-system", Name: "provider-kausality", Path: ptr.To(path), Port: ptr.To[int32](9443)},
		CABundle: caBundle,
	}
}

func rule(group string, resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1alpha1"}, Resources: resources, Scope: ptr.To(admissionregistrationv1.AllScopes)},
	}
}

var (
	createUpdate = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	deleteOp     = admissionregistrationv1.Delete
)

func compositesHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.MutatingWebhook {
	return admissionregistrationv1.MutatingWebhook{
		Name: "composites.kausality.io", ClientConfig: cc, Rules: rules,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionregistrationv1.Fail), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
		AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy), TimeoutSeconds: ptr.To[int32](10),
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "not-from-a-stale-copy", Expression: "!(" + Stale + ")"},
			{Name: "changes-something", Expression: "!(" + Unchanged + ")"},
		},
	}
}

func managedHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.MutatingWebhook {
	return admissionregistrationv1.MutatingWebhook{
		Name: "managed.kausality.io", ClientConfig: cc, Rules: rules,
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelGated: "true"}},
		SideEffects:    ptr.To(admissionregistrationv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionregistrationv1.Fail), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
		AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy), TimeoutSeconds: ptr.To[int32](10),
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "not-from-a-stale-copy", Expression: "!(" + Stale + ")"},
			{Name: "not-only-closing-the-gate", Expression: "!(" + OnlyClosing + ")"},
			{Name: "not-only-creation-bookkeeping", Expression: "!(" + ControllerBookkeeping("") + ")"},
		},
	}
}

// restrictedHook is the managed webhook for updates of ungated resources of
// restricted kinds.
func restrictedHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.MutatingWebhook {
	h := managedHook(cc, rules...)
	h.Name = "restricted.managed.kausality.io"
	h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-from-a-stale-copy", Expression: "!(" + Stale + ")"}}
	h.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v1alpha1.LabelGated, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}}}
	return h
}

// createHook is the managed webhook for creations, of gated and ungated
// resources alike.
func createHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.MutatingWebhook {
	h := managedHook(cc, rules...)
	h.Name = "create.managed.kausality.io"
	h.ObjectSelector = nil
	h.MatchConditions = nil
	return h
}

func deletionHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: "deletion.kausality.io", ClientConfig: cc, Rules: rules,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun), FailurePolicy: ptr.To(admissionregistrationv1.Fail), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
		AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
	}
}

// managedDeletionHook is the deletion webhook for gated managed resources.
func managedDeletionHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	h := deletionHook(cc, rules...)
	h.Name = "managed-deletion.kausality.io"
	h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelGated: "true"}}
	return h
}

// restrictedDeletionHook is the deletion webhook for ungated resources of
// restricted kinds.
func restrictedDeletionHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	h := deletionHook(cc, rules...)
	h.Name = "restricted-deletion.managed.kausality.io"
	h.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v1alpha1.LabelGated, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}}}
	return h
}

// statusHook is the webhook for status writes of Claims and composites of
// the policies' kinds.
func statusHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: "status.kausality.io", ClientConfig: cc, Rules: rules,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionregistrationv1.Fail), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
		AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "not-a-controller-or-admin", Expression: "!('system:masters' in request.userInfo.groups)"}},
	}
}

// managedStatusHook is the webhook for status writes of gated managed
// resources.
func managedStatusHook(cc admissionregistrationv1.WebhookClientConfig, rules ...admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	h := statusHook(cc, rules...)
	h.Name = "managed-status.kausality.io"
	h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelGated: "true"}}
	return h
}

// The CEL of the deletion protection, spelled out.
const (
	wantAllowDelete = `(has(oldObject.metadata.annotations) && 'kausality.io/allow-delete' in oldObject.metadata.annotations && oldObject.metadata.annotations['kausality.io/allow-delete'] == 'true')` +
		` || (has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)` +
		` && request.userInfo.username in ['system:kube-controller-manager', 'system:serviceaccount:kube-system:generic-garbage-collector'])`
	wantObjectName = `oldObject.kind + ' ' + (has(oldObject.metadata.namespace) ? oldObject.metadata.namespace + '/' : '') + oldObject.metadata.name`
)

func protection(resource, group string, policies string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	name := "kausality-protect-" + resource + "." + group
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: labelled(name),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: rule(group, []string{resource}, deleteOp),
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: wantAllowDelete,
				MessageExpression: wantObjectName + ` + ' is protected from deletion by AllowancePolicy ` + policies +
					`; set the annotation kausality.io/allow-delete: "true" on it to delete it'`,
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: labelled(name),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return vap, b
}

// state is the admission configuration in the fake API server.
type state struct {
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
	// vaps and bindings are those of deletion protection; the mode
	// switch guard is always there once a Sync wrote (TestModeSwitchGuard).
	vaps     []admissionregistrationv1.ValidatingAdmissionPolicy
	bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

func observe(t *testing.T, kube client.Client) state {
	t.Helper()
	ctx := context.Background()
	var s state
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	switch err := kube.Get(ctx, client.ObjectKey{Name: DynamicName}, m); {
	case err == nil:
		s.mutating = m
	case !kerrors.IsNotFound(err):
		t.Fatal(err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	switch err := kube.Get(ctx, client.ObjectKey{Name: DynamicName}, v); {
	case err == nil:
		s.validating = v
	case !kerrors.IsNotFound(err):
		t.Fatal(err)
	}
	vl := &admissionregistrationv1.ValidatingAdmissionPolicyList{}
	if err := kube.List(ctx, vl); err != nil {
		t.Fatal(err)
	}
	s.vaps = slices.DeleteFunc(vl.Items, func(v admissionregistrationv1.ValidatingAdmissionPolicy) bool { return v.GetName() == ModeSwitchName })
	bl := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
	if err := kube.List(ctx, bl); err != nil {
		t.Fatal(err)
	}
	s.bindings = slices.DeleteFunc(bl.Items, func(b admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool {
		return b.GetName() == ModeSwitchName
	})
	return s
}

// ignoreServerFields drops what the fake API server fills in.
var ignoreServerFields = cmp.Options{
	cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion"),
	cmpopts.IgnoreTypes(metav1.TypeMeta{}),
	cmpopts.EquateEmpty(),
	cmp.AllowUnexported(state{}),
}

// noWildcards checks the invariant that no dynamic rule matches all
// groups, versions or resources.
func noWildcards(t *testing.T, s state) {
	t.Helper()
	var rs []admissionregistrationv1.RuleWithOperations
	if s.mutating != nil {
		for _, h := range s.mutating.Webhooks {
			rs = append(rs, h.Rules...)
		}
	}
	if s.validating != nil {
		for _, h := range s.validating.Webhooks {
			rs = append(rs, h.Rules...)
		}
	}
	for _, v := range s.vaps {
		if v.Labels[labelManaged] != managedBy {
			continue
		}
		for _, r := range v.Spec.MatchConstraints.ResourceRules {
			rs = append(rs, r.RuleWithOperations)
		}
	}
	for _, r := range rs {
		for _, l := range [][]string{r.APIGroups, r.APIVersions, r.Resources} {
			for _, x := range l {
				if x == "*" || x == "*/*" {
					t.Errorf("rule %+v matches %q", r.Rule, x)
				}
			}
		}
	}
}

func TestWebhooksSync(t *testing.T) {
	vapClaims, bindingClaims := protection("databaseclaims", "example.com", "claims")
	vapClaimsTwo, _ := protection("databaseclaims", "example.com", "claims, claims-strict")
	vapXDB, bindingXDB := protection("xdatabases", "example.com", "xdatabases")
	oldMutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName),
		Webhooks: []admissionregistrationv1.MutatingWebhook{compositesHook(service(PathComposites), rule("example.com", []string{"gone"}, createUpdate...))}}
	oldValidating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: labelled(DynamicName),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{deletionHook(service(PathDeletion), rule("example.com", []string{"gone"}, deleteOp))}}
	// Someone else's admission policy is not the provider's to remove.
	foreign := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}

	type args struct {
		objs    []client.Object
		managed func() []kinds.Kind
	}
	type want struct {
		err   error
		state state
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"PoliciesAndManagedKinds": {
			reason: "Rules name exactly the kinds valid policies name and the managed kinds discovered; the client config is the static one's with the handler's path; a protected kind gets a ValidatingAdmissionPolicy and binding.",
			args: args{
				objs: []client.Object{
					static(),
					allowancePolicy("claims", claimGVK, protected()),
					allowancePolicy("xdatabases", xdbGVK),
					allowancePolicy("broken", schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XBroken"}, broken(), protected()),
					allowancePolicy("not-served", schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "NotServed"}, protected()),
					allowancePolicy("bucket-edits", bucketGVK),
				},
				managed: func() []kinds.Kind { return managedKinds },
			},
			want: want{state: state{
				mutating: &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.MutatingWebhook{
					compositesHook(service(PathComposites), rule("example.com", []string{"databaseclaims", "xdatabases"}, createUpdate...)),
					managedHook(service(PathManaged), rule("nop.example.org", []string{"nopresources"}, admissionregistrationv1.Update), rule("recorder.kausality.io", []string{"buckets"}, admissionregistrationv1.Update)),
					// The broken policy names no managed kind of its own: it
					// puts none under the creation hook.
					createHook(service(PathManaged), rule("recorder.kausality.io", []string{"buckets"}, admissionregistrationv1.Create)),
					// Only Buckets are restricted (the valid policies own
					// their cloud gate); the broken policy restricts nothing
					// here.
					restrictedHook(service(PathManaged), rule("recorder.kausality.io", []string{"buckets"}, admissionregistrationv1.Update)),
				}},
				validating: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.ValidatingWebhook{
					deletionHook(service(PathDeletion), rule("example.com", []string{"databaseclaims", "xdatabases"}, deleteOp)),
					managedDeletionHook(service(PathDeletion), rule("nop.example.org", []string{"nopresources"}, deleteOp), rule("recorder.kausality.io", []string{"buckets"}, deleteOp)),
					restrictedDeletionHook(service(PathDeletion), rule("recorder.kausality.io", []string{"buckets"}, deleteOp)),
					statusHook(service(PathStatus), rule("example.com", []string{"databaseclaims/status", "xdatabases/status"}, admissionregistrationv1.Update)),
					managedStatusHook(service(PathStatus), rule("nop.example.org", []string{"nopresources/status"}, admissionregistrationv1.Update), rule("recorder.kausality.io", []string{"buckets/status"}, admissionregistrationv1.Update)),
				}},
				vaps:     []admissionregistrationv1.ValidatingAdmissionPolicy{*vapClaims},
				bindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{*bindingClaims},
			}},
		},
		"URLClientConfig": {
			reason: "A static webhook reached by URL is copied with the handler's path in the URL.",
			args:   args{objs: []client.Object{staticURL(), allowancePolicy("xdatabases", xdbGVK)}},
			want: want{state: state{
				mutating: &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.MutatingWebhook{
					compositesHook(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://provider.example.org:9443" + PathComposites), CABundle: caBundle},
						rule("example.com", []string{"xdatabases"}, createUpdate...)),
				}},
				validating: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.ValidatingWebhook{
					deletionHook(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://provider.example.org:9443" + PathDeletion), CABundle: caBundle},
						rule("example.com", []string{"xdatabases"}, deleteOp)),
					statusHook(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://provider.example.org:9443" + PathStatus), CABundle: caBundle},
						rule("example.com", []string{"xdatabases/status"}, admissionregistrationv1.Update)),
				}},
			}},
		},
		"ManagedKindsOnly": {
			reason: "Without policies only the webhook for gated resources is needed: no kind is restricted, so no creation goes through admission and the validating configuration goes.",
			args: args{
				objs:    []client.Object{static(), oldMutating, oldValidating},
				managed: func() []kinds.Kind { return managedKinds[:1] },
			},
			want: want{state: state{
				mutating: &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.MutatingWebhook{
					managedHook(service(PathManaged), rule("nop.example.org", []string{"nopresources"}, admissionregistrationv1.Update)),
				}},
			}},
		},
		"CreationOfRestrictedKindsOnly": {
			reason: "With policies that compile, only the kinds they restrict are seen on creation: while the provider is down the other providers' kinds can still be created.",
			args: args{
				objs:    []client.Object{static(), allowancePolicy("xdatabases", xdbGVK)},
				managed: func() []kinds.Kind { return managedKinds },
			},
			want: want{state: state{
				mutating: &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.MutatingWebhook{
					compositesHook(service(PathComposites), rule("example.com", []string{"xdatabases"}, createUpdate...)),
					managedHook(service(PathManaged), rule("nop.example.org", []string{"nopresources"}, admissionregistrationv1.Update), rule("recorder.kausality.io", []string{"buckets"}, admissionregistrationv1.Update)),
					createHook(service(PathManaged), rule("recorder.kausality.io", []string{"buckets"}, admissionregistrationv1.Create)),
					restrictedHook(service(PathManaged), rule("recorder.kausality.io", []string{"buckets"}, admissionregistrationv1.Update)),
				}},
				validating: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.ValidatingWebhook{
					deletionHook(service(PathDeletion), rule("example.com", []string{"xdatabases"}, deleteOp)),
					managedDeletionHook(service(PathDeletion), rule("nop.example.org", []string{"nopresources"}, deleteOp), rule("recorder.kausality.io", []string{"buckets"}, deleteOp)),
					restrictedDeletionHook(service(PathDeletion), rule("recorder.kausality.io", []string{"buckets"}, deleteOp)),
					statusHook(service(PathStatus), rule("example.com", []string{"xdatabases/status"}, admissionregistrationv1.Update)),
					managedStatusHook(service(PathStatus), rule("nop.example.org", []string{"nopresources/status"}, admissionregistrationv1.Update), rule("recorder.kausality.io", []string{"buckets/status"}, admissionregistrationv1.Update)),
				}},
			}},
		},
		"OwnedLikeThePackage": {
			reason: "What the provider writes shares the owners of the package's configuration (its ProviderRevision), without being controlled by them: deleting the package deletes it all.",
			args:   args{objs: []client.Object{ownedStatic(), allowancePolicy("xdatabases", xdbGVK, protected())}},
			want: want{state: state{
				mutating: &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: owned(labelled(DynamicName)), Webhooks: []admissionregistrationv1.MutatingWebhook{
					compositesHook(service(PathComposites), rule("example.com", []string{"xdatabases"}, createUpdate...)),
				}},
				validating: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: owned(labelled(DynamicName)), Webhooks: []admissionregistrationv1.ValidatingWebhook{
					deletionHook(service(PathDeletion), rule("example.com", []string{"xdatabases"}, deleteOp)),
					statusHook(service(PathStatus), rule("example.com", []string{"xdatabases/status"}, admissionregistrationv1.Update)),
				}},
				vaps:     []admissionregistrationv1.ValidatingAdmissionPolicy{*ownedVAP(vapXDB)},
				bindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{*ownedBinding(bindingXDB)},
			}},
		},
		"TwoPoliciesProtectOneKind": {
			reason: "One ValidatingAdmissionPolicy per protected kind names every policy protecting it; a kind no longer protected loses its policy and binding.",
			args: args{objs: []client.Object{
				static(),
				allowancePolicy("claims", claimGVK, protected()),
				allowancePolicy("claims-strict", claimGVK, protected()),
				allowancePolicy("xdatabases", xdbGVK),
				vapXDB, bindingXDB, foreign,
			}},
			want: want{state: state{
				mutating: &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.MutatingWebhook{
					compositesHook(service(PathComposites), rule("example.com", []string{"databaseclaims", "xdatabases"}, createUpdate...)),
				}},
				validating: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.ValidatingWebhook{
					deletionHook(service(PathDeletion), rule("example.com", []string{"databaseclaims", "xdatabases"}, deleteOp)),
					statusHook(service(PathStatus), rule("example.com", []string{"databaseclaims/status", "xdatabases/status"}, admissionregistrationv1.Update)),
				}},
				vaps:     []admissionregistrationv1.ValidatingAdmissionPolicy{*vapClaimsTwo, *foreign},
				bindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{*bindingClaims},
			}},
		},
		"NothingNeedsThem": {
			reason: "Without policies or managed kinds the dynamic configurations and the provider's admission policies are deleted; others' are kept.",
			args:   args{objs: []client.Object{static(), oldMutating, oldValidating, vapClaims, bindingClaims, foreign}},
			want:   want{state: state{vaps: []admissionregistrationv1.ValidatingAdmissionPolicy{*foreign}}},
		},
		"BreakGlass": {
			reason: "With the break-glass on the provider's Namespace the dynamic webhook configurations go and are not written again, whatever the policies; deletion protection, which needs no provider, stays.",
			args: args{
				objs: []client.Object{
					static(), allowancePolicy("claims", claimGVK, protected()),
					&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system", Annotations: map[string]string{v1alpha1.AnnotationBreakGlass: "webhook endpoint unreachable, INC-42"}}},
					&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName)},
					&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: labelled(DynamicName)},
					vapClaims, bindingClaims,
				},
				managed: func() []kinds.Kind { return managedKinds },
			},
			want: want{state: state{vaps: []admissionregistrationv1.ValidatingAdmissionPolicy{*vapClaims}, bindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{*bindingClaims}}},
		},
		"StaticMissing": {
			reason: "Without the package's configuration there is no client config to copy.",
			args:   args{objs: []client.Object{allowancePolicy("xdatabases", xdbGVK)}},
			want: want{err: errors.Wrapf(kerrors.NewNotFound(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, staticName),
				"cannot get ValidatingWebhookConfiguration %s from the package", staticName)},
		},
		"StaticWithoutWebhooks": {
			reason: "A static configuration without webhooks has no client config to copy.",
			args:   args{objs: []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: staticName}}}},
			want:   want{err: errors.Errorf("ValidatingWebhookConfiguration %s has no webhooks to copy the client config from", staticName)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(tc.args.objs...).Build()
			w := &Webhooks{Kube: kube, Reader: kube, Mapper: mapper(), Cache: policy.NewCache(), Static: staticName, Managed: tc.args.managed, Namespace: "crossplane-system", Log: logging.NewNopLogger()}
			err := w.Sync(context.Background())
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Fatalf("%s\nSync(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.want.err != nil {
				return
			}
			got := observe(t, kube)
			if diff := cmp.Diff(tc.want.state, got, ignoreServerFields); diff != "" {
				t.Errorf("%s\nadmission configuration: -want, +got:\n%s", tc.reason, diff)
			}
			noWildcards(t, got)

			// A second sync with nothing changed writes nothing.
			before := got
			if err := w.Sync(context.Background()); err != nil {
				t.Fatalf("second Sync(...): %v", err)
			}
			if diff := cmp.Diff(before, observe(t, kube), cmp.AllowUnexported(state{})); diff != "" {
				t.Errorf("%s\nsecond Sync(...) rewrote the configuration: -before, +after:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDeletionProtectionCEL evaluates the ValidatingAdmissionPolicy's CEL
// the way the API server does (oldObject is the object being deleted).
func TestDeletionProtectionCEL(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(static(), allowancePolicy("claims", claimGVK, protected())).Build()
	w := &Webhooks{Kube: kube, Reader: kube, Mapper: mapper(), Cache: policy.NewCache(), Static: staticName, Log: logging.NewNopLogger()}
	if err := w.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "kausality-protect-databaseclaims.example.com"}, vap); err != nil {
		t.Fatal(err)
	}
	env, err := cel.NewEnv(cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(t *testing.T, expr string, old map[string]any, user ...string) any {
		t.Helper()
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s does not compile: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		username := "alice@example.com"
		if len(user) > 0 {
			username = user[0]
		}
		out, _, err := prg.Eval(map[string]any{"oldObject": old, "request": map[string]any{"userInfo": map[string]any{"username": username}}})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return out.Value()
	}
	claim := func(annotations map[string]any) map[string]any {
		md := map[string]any{"name": "orders", "namespace": "team-a"}
		if annotations != nil {
			md["annotations"] = annotations
		}
		return map[string]any{"kind": "DatabaseClaim", "metadata": md}
	}
	composed := func() map[string]any {
		c := claim(nil)
		c["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "XPlatform", "name": "shop", "uid": "p1", "controller": true}}
		return c
	}
	const gc = "system:serviceaccount:kube-system:generic-garbage-collector"
	v := vap.Spec.Validations[0]
	cases := map[string]struct {
		reason string
		old    map[string]any
		user   string
		want   bool
	}{
		"GarbageCollectorDeletesComposed": {reason: "The garbage collector deleting a composed object carries out its controller's deletion.", old: composed(), user: gc, want: true},
		"GarbageCollectorDeletesTopLevel": {reason: "Without a controller reference the garbage collector has no business deleting it.", old: claim(nil), user: gc, want: false},
		"AliceDeletesComposed":            {reason: "A person deleting a composed object by hand is protected against.", old: composed(), want: false},
		"NoAnnotations":                   {reason: "An object without annotations is protected.", old: claim(nil), want: false},
		"OtherAnnotation":                 {reason: "Other annotations do not let it go.", old: claim(map[string]any{"jira": "INFRA-1"}), want: false},
		"AllowDeleteNo":                   {reason: "Only \"true\" lets it go.", old: claim(map[string]any{"kausality.io/allow-delete": "yes"}), want: false},
		"AllowDeleteTrue":                 {reason: "kausality.io/allow-delete: \"true\" lets it go.", old: claim(map[string]any{"kausality.io/allow-delete": "true"}), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var user []string
			if tc.user != "" {
				user = []string{tc.user}
			}
			if diff := cmp.Diff(tc.want, eval(t, v.Expression, tc.old, user...)); diff != "" {
				t.Errorf("%s\nexpression: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	want := `DatabaseClaim team-a/orders is protected from deletion by AllowancePolicy claims; set the annotation kausality.io/allow-delete: "true" on it to delete it`
	if diff := cmp.Diff(want, eval(t, v.MessageExpression, claim(nil))); diff != "" {
		t.Errorf("messageExpression: -want, +got:\n%s", diff)
	}
}

func TestReconcile(t *testing.T) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
		Message: "every CEL expression and path compiled and every target resolved", ObservedGeneration: 2}
	mesh := v1alpha1.ResolvedTarget{APIGroup: "appmesh.aws.upbound.io", Resource: "meshes", Kind: "Mesh", Versions: []string{"v1beta1", "v1beta2"}}
	unresolved := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonUnresolved,
		Message: "the API server serves no resource meshes.appmesh.aws.upbound.io (no CustomResourceDefinition of that name); every kind of its apiGroup counts as restricted until it does", ObservedGeneration: 2}
	_, compileErr := policy.Compile(allowancePolicy("broken", xdbGVK, broken()))
	notReady := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonInvalid,
		Message: compileErr.Error(), ObservedGeneration: 2}
	xdbHooks := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.MutatingWebhook{
		compositesHook(service(PathComposites), rule("example.com", []string{"xdatabases"}, createUpdate...)),
	}}
	noStatic := errors.Wrapf(kerrors.NewNotFound(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, staticName),
		"cannot get ValidatingWebhookConfiguration %s from the package", staticName)
	notInForce := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonNotInForce,
		Message: "admission is not configured for it yet: " + noStatic.Error(), ObservedGeneration: 2}

	type args struct {
		objs     []client.Object
		name     string
		resolver resolverFn
	}
	type want struct {
		err            error
		requeue        bool
		policy         *v1alpha1.AllowancePolicy
		statusUpdates  int
		mutating       *admissionregistrationv1.MutatingWebhookConfiguration
		validatingGone bool
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Compiles": {
			reason: "A policy whose CEL and paths compile is Ready, and its kind gets the webhooks.",
			args:   args{objs: []client.Object{static(), allowancePolicy("xdatabases", xdbGVK)}, name: "xdatabases"},
			want: want{
				policy:        allowancePolicy("xdatabases", xdbGVK, withReady(ready, 2)),
				statusUpdates: 1,
				mutating:      xdbHooks,
			},
		},
		"DoesNotCompile": {
			reason: "A policy whose CEL does not compile is not Ready and the condition names the expression; its kind still gets the webhook, which refuses spec changes until it is fixed (fail closed).",
			args:   args{objs: []client.Object{static(), allowancePolicy("broken", xdbGVK, broken())}, name: "broken"},
			want: want{
				policy:        allowancePolicy("broken", xdbGVK, broken(), withReady(notReady, 2)),
				statusUpdates: 1,
				mutating:      xdbHooks,
			},
		},
		"NotInForce": {
			reason: "A policy that compiles is not Ready while admission cannot be configured for it: Ready means a change of its kind needs a cause from then on.",
			args:   args{objs: []client.Object{allowancePolicy("xdatabases", xdbGVK)}, name: "xdatabases"},
			want: want{
				err:           noStatic,
				policy:        allowancePolicy("xdatabases", xdbGVK, withReady(notInForce, 2)),
				statusUpdates: 1,
			},
		},
		"Fixed": {
			reason: "A policy that compiles after a fix becomes Ready.",
			args:   args{objs: []client.Object{static(), allowancePolicy("xdatabases", xdbGVK, withReady(notReady, 1))}, name: "xdatabases"},
			want: want{
				policy:        allowancePolicy("xdatabases", xdbGVK, withReady(ready, 2)),
				statusUpdates: 1,
				mutating:      xdbHooks,
			},
		},
		"AlreadyReady": {
			reason: "A policy already reported Ready for its generation is not written again.",
			args:   args{objs: []client.Object{static(), allowancePolicy("xdatabases", xdbGVK, withReady(ready, 2))}, name: "xdatabases"},
			want: want{
				policy:   allowancePolicy("xdatabases", xdbGVK, withReady(ready, 2)),
				mutating: xdbHooks,
			},
		},
		"TargetResolved": {
			reason: "A target naming a kind by its CRD's plural is recorded with its kind and served versions, so the function and admission match by the kind, never a guessed plural.",
			args: args{objs: []client.Object{static(), allowancePolicy("xdatabases", xdbGVK, meshes())}, name: "xdatabases",
				resolver: resolverFn{served: map[policy.Named]v1alpha1.ResolvedTarget{{Group: "appmesh.aws.upbound.io", Resource: "meshes"}: mesh}}},
			want: want{
				policy:        allowancePolicy("xdatabases", xdbGVK, meshes(), withReady(ready, 2), withTargets(mesh)),
				statusUpdates: 1,
				mutating:      xdbHooks,
			},
		},
		"TargetUnresolved": {
			reason: "A target the API server does not serve makes the policy not Ready, naming it, and is looked at again.",
			args:   args{objs: []client.Object{static(), allowancePolicy("xdatabases", xdbGVK, meshes())}, name: "xdatabases"},
			want: want{
				policy:        allowancePolicy("xdatabases", xdbGVK, meshes(), withReady(unresolved, 2)),
				statusUpdates: 1,
				mutating:      xdbHooks,
				requeue:       true,
			},
		},
		"TargetNoLongerServed": {
			reason: "A resolution the API server no longer backs (its CRD deleted) is taken back.",
			args:   args{objs: []client.Object{static(), allowancePolicy("xdatabases", xdbGVK, meshes(), withReady(ready, 2), withTargets(mesh))}, name: "xdatabases"},
			want: want{
				policy:        allowancePolicy("xdatabases", xdbGVK, meshes(), withReady(unresolved, 2)),
				statusUpdates: 1,
				mutating:      xdbHooks,
				requeue:       true,
			},
		},
		"ResolveFails": {
			reason: "A failed lookup is an error and changes nothing.",
			args: args{objs: []client.Object{static(), allowancePolicy("xdatabases", xdbGVK, meshes(), withReady(ready, 2), withTargets(mesh))}, name: "xdatabases",
				resolver: resolverFn{err: errBoom}},
			want: want{
				err:    errors.Wrap(errBoom, "cannot resolve the targets of AllowancePolicy xdatabases"),
				policy: allowancePolicy("xdatabases", xdbGVK, meshes(), withReady(ready, 2), withTargets(mesh)),
			},
		},
		"Deleted": {
			reason: "A policy that is gone is no error: the configuration is resynchronised without it.",
			args: args{objs: []client.Object{static(),
				&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: labelled(DynamicName), Webhooks: []admissionregistrationv1.MutatingWebhook{
					compositesHook(service(PathComposites), rule("example.com", []string{"xdatabases"}, createUpdate...))}},
			}, name: "xdatabases"},
			want: want{validatingGone: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			statusUpdates := 0
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(tc.args.objs...).
				WithStatusSubresource(&v1alpha1.AllowancePolicy{}).
				WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					statusUpdates++
					return c.SubResource(sub).Update(ctx, obj, opts...)
				}}).Build()
			cache := policy.NewCache()
			r := &Reconciler{Kube: kube, Cache: cache, Resolver: tc.args.resolver,
				Webhooks: &Webhooks{Kube: kube, Reader: kube, Mapper: mapper(), Cache: cache, Static: staticName, Log: logging.NewNopLogger()}}

			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: tc.args.name}})
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nReconcile(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if got := res.RequeueAfter > 0; got != tc.want.requeue {
				t.Errorf("%s\nReconcile(...) requeues: %t, want %t", tc.reason, got, tc.want.requeue)
			}
			var got *v1alpha1.AllowancePolicy
			if tc.want.policy != nil {
				got = &v1alpha1.AllowancePolicy{}
				if err := kube.Get(context.Background(), client.ObjectKey{Name: tc.args.name}, got); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want.policy, got, ignoreServerFields, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s\nAllowancePolicy: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.statusUpdates, statusUpdates); diff != "" {
				t.Errorf("%s\nstatus updates: -want, +got:\n%s", tc.reason, diff)
			}
			s := observe(t, kube)
			if diff := cmp.Diff(tc.want.mutating, s.mutating, ignoreServerFields); diff != "" {
				t.Errorf("%s\nMutatingWebhookConfiguration %s: -want, +got:\n%s", tc.reason, DynamicName, diff)
			}
			if tc.want.validatingGone && s.validating != nil {
				t.Errorf("%s\nValidatingWebhookConfiguration %s exists, want it deleted", tc.reason, DynamicName)
			}
		})
	}
}

// TestStaticFoundByItsWebhook: Crossplane names the package's configuration
// after the Provider object, so without --static-webhook the provider finds
// it by its webhook, and says what it looked for when there is none.
func TestStaticFoundByItsWebhook(t *testing.T) {
	renamed := static()
	renamed.Name = "crossplane-provider-kausality-prod"
	renamed.Webhooks[0].ClientConfig.Service.Name = "kausality-prod"
	other := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-else"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "other.example.org", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://other.example.org")}}},
	}
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(other, renamed, allowancePolicy("xdatabases", xdbGVK)).Build()
	w := &Webhooks{Kube: kube, Reader: kube, Mapper: mapper(), Cache: policy.NewCache(), Log: logging.NewNopLogger()}
	if err := w.Sync(context.Background()); err != nil {
		t.Fatalf("Sync(...): %v", err)
	}
	got := observe(t, kube).mutating
	if got == nil || len(got.Webhooks) != 1 || got.Webhooks[0].ClientConfig.Service == nil || got.Webhooks[0].ClientConfig.Service.Name != "kausality-prod" {
		t.Fatalf("dynamic mutating configuration = %+v, want its client config copied from %s", got, renamed.Name)
	}

	kube = fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(other, allowancePolicy("xdatabases", xdbGVK)).Build()
	w = &Webhooks{Kube: kube, Reader: kube, Mapper: mapper(), Cache: policy.NewCache(), Log: logging.NewNopLogger()}
	want := errors.Errorf("no ValidatingWebhookConfiguration has webhook %s: is the provider-kausality package installed and healthy?", StaticWebhookName)
	if diff := cmp.Diff(want, w.Sync(context.Background()), test.EquateErrors()); diff != "" {
		t.Errorf("Sync(...) without the package's configuration: -want error, +got error:\n%s", diff)
	}
}

// TestReady: the provider is ready only once its webhook configurations are
// written, and not while it cannot keep them in line (admission would check
// nothing).
func TestReady(t *testing.T) {
	ctx := context.Background()
	missing := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(allowancePolicy("xdatabases", xdbGVK)).Build()
	w := &Webhooks{Kube: missing, Reader: missing, Mapper: mapper(), Cache: policy.NewCache(), Static: staticName, Log: logging.NewNopLogger()}
	if err := w.Ready(nil); !errors.Is(err, errNotSynced) {
		t.Errorf("Ready() before any Sync = %v, want %v", err, errNotSynced)
	}
	if err := w.Sync(ctx); err == nil {
		t.Fatal("Sync(...) without the package's configuration succeeded")
	}
	if err := w.Ready(nil); err == nil {
		t.Error("Ready() after a failed Sync = nil, want the Sync's error")
	}

	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(static(), allowancePolicy("xdatabases", xdbGVK)).Build()
	w.Kube, w.Reader = kube, kube
	// Right after a start the managed kinds are unknown: written from
	// none, the configurations would drop every managed webhook.
	discovered := false
	w.Discovered = func() bool { return discovered }
	if err := w.Sync(ctx); err == nil || !strings.Contains(err.Error(), errManagedKindsNotDiscovered) {
		t.Errorf("Sync(...) before discovery = %v, want %q", err, errManagedKindsNotDiscovered)
	}
	if l := (&admissionregistrationv1.MutatingWebhookConfigurationList{}); kube.List(ctx, l) != nil || len(l.Items) != 0 {
		t.Errorf("Sync(...) before discovery wrote %d mutating configurations, want none", len(l.Items))
	}
	discovered = true
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(nil); err != nil {
		t.Errorf("Ready() after a Sync wrote the configurations = %v, want nil", err)
	}
}

// TestOnlyTheLeaderWrites: of several replicas only the leader writes the
// configurations; the others are ready without writing, and a replica
// elected later writes them.
func TestOnlyTheLeaderWrites(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(static(), allowancePolicy("xdatabases", xdbGVK)).Build()
	leader := false
	w := &Webhooks{Kube: kube, Reader: kube, Mapper: mapper(), Cache: policy.NewCache(), Static: staticName, Writes: func() bool { return leader }, Log: logging.NewNopLogger()}
	if err := w.Sync(ctx); err != nil {
		t.Fatalf("Sync(...) on a replica that is not the leader = %v, want nil", err)
	}
	if s := observe(t, kube); s.mutating != nil || s.validating != nil {
		t.Errorf("Sync(...) on a replica that is not the leader wrote %+v, want nothing", s)
	}
	if err := w.Ready(nil); err != nil {
		t.Errorf("Ready() on a replica that is not the leader = %v, want nil: it serves admission from what the leader wrote", err)
	}
	leader = true
	if err := w.Ready(nil); !errors.Is(err, errNotSynced) {
		t.Errorf("Ready() once elected, before its first Sync = %v, want %v", err, errNotSynced)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s := observe(t, kube); s.mutating == nil || s.validating == nil {
		t.Errorf("Sync(...) on the leader wrote %+v, want both configurations", s)
	}
}

// TestControllerBookkeeping: only service accounts in Crossplane's
// namespace record a creation without the provider; a prefix that could
// break out of the CEL string, or none, admits nobody's that way.
func TestControllerBookkeeping(t *testing.T) {
	got := ControllerBookkeeping("system:serviceaccount:crossplane-system:")
	if want := "request.userInfo.username.startsWith('system:serviceaccount:crossplane-system:') &&\n" + OnlyCreationBookkeeping; got != want {
		t.Errorf("ControllerBookkeeping(...) = %q, want %q", got, want)
	}
	for _, p := range []string{"", "x') || true || ('"} {
		if got := ControllerBookkeeping(p); got != "false" {
			t.Errorf("ControllerBookkeeping(%q) = %q, want false", p, got)
		}
	}
}

// TestControllerOrAdmin: the status webhooks skip only the writers they
// admit anyway.
func TestControllerOrAdmin(t *testing.T) {
	if got, want := ControllerOrAdmin("system:serviceaccount:crossplane-system:"), "request.userInfo.username.startsWith('system:serviceaccount:crossplane-system:') || 'system:masters' in request.userInfo.groups"; got != want {
		t.Errorf("ControllerOrAdmin(...) = %q, want %q", got, want)
	}
	for _, p := range []string{"", "x') || true || ('"} {
		if got := ControllerOrAdmin(p); got != "'system:masters' in request.userInfo.groups" {
			t.Errorf("ControllerOrAdmin(%q) = %q, want only the administrators", p, got)
		}
	}
}
