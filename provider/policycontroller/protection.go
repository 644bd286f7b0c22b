package policycontroller

import (
	"context"
	"fmt"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// allowDelete is the deletion protection rule in the CEL of
// ValidatingAdmissionPolicy: the annotation, or the garbage collector
// deleting a composite composed by another (admit.ComposedDeletion).
var allowDelete = "(has(oldObject.metadata.annotations) && '" + v1alpha1.AnnotationAllowDelete + "' in oldObject.metadata.annotations && oldObject.metadata.annotations['" + v1alpha1.AnnotationAllowDelete + "'] == 'true')" +
	" || (has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r, has(r.controller) && r.controller) && request.userInfo.username in [" + celStrings(admit.GarbageCollectors()) + "])"

// objectName is the CEL for how messages name an object: Kind namespace/name.
const objectName = "oldObject.kind + ' ' + (has(oldObject.metadata.namespace) ? oldObject.metadata.namespace + '/' : '') + oldObject.metadata.name"

// syncDeletionPolicies keeps one ValidatingAdmissionPolicy and binding per
// protected kind; they work inside the API server, so deletion protection
// holds while the provider is down.
func (w *Webhooks) syncDeletionPolicies(ctx context.Context, t target) error {
	want := map[string]bool{ModeSwitchName: true}
	if err := w.syncModeSwitch(ctx, t); err != nil {
		return err
	}
	for _, r := range t.protected {
		name := fmt.Sprintf("kausality-protect-%s.%s", r.Resource, r.Group)
		want[name] = true
		msg := policy.DeletionMessage("\x00", t.protectedBy[r])
		_, suffix, _ := strings.Cut(msg, "\x00")
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := w.apply(ctx, vap, "ValidatingAdmissionPolicy", t.owners, func() {
			vap.Spec = admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: failClosed,
				MatchConstraints: &admissionregistrationv1.MatchResources{
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rules([]schema.GroupVersionResource{r}, admissionregistrationv1.Delete)[0]}},
				},
				Validations: []admissionregistrationv1.Validation{{
					Expression: allowDelete, MessageExpression: objectName + " + " + celString(suffix), Reason: ptr.To(metav1.StatusReasonForbidden),
				}},
			}
		}); err != nil {
			return err
		}
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := w.apply(ctx, b, "ValidatingAdmissionPolicyBinding", t.owners, func() {
			b.Spec = admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			}
		}); err != nil {
			return err
		}
	}
	l := &admissionregistrationv1.ValidatingAdmissionPolicyList{}
	if err := w.Reader.List(ctx, l, client.MatchingLabels{labelManaged: managedBy}); err != nil {
		return errors.Wrap(err, errListValidatingAdmissionPolicies)
	}
	for i := range l.Items {
		name := l.Items[i].GetName()
		if want[name] {
			continue
		}
		if err := w.remove(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}, "ValidatingAdmissionPolicyBinding"); err != nil {
			return err
		}
		if err := w.remove(ctx, &l.Items[i], "ValidatingAdmissionPolicy"); err != nil {
			return err
		}
	}
	return nil
}

// ModeSwitchName names the ValidatingAdmissionPolicy and binding that guard
// the switches on Namespaces: kausality.io/mode and kausality.io/break-glass.
const ModeSwitchName = "kausality-mode-switch"

// guardedSwitches are the Namespace annotations only who may write
// AllowancePolicies may set, change or remove.
var guardedSwitches = []string{v1alpha1.AnnotationMode, v1alpha1.AnnotationBreakGlass}

// annotationOf is the CEL of an object's annotation key, "" when it has
// none.
func annotationOf(o, key string) string {
	return "(has(" + o + ".metadata.annotations) && '" + key + "' in " + o + ".metadata.annotations ? " + o + ".metadata.annotations['" + key + "'] : '')"
}

// ModeSwitch is the CEL that admits a Namespace write: it leaves the
// guarded switches (kausality.io/mode, kausality.io/break-glass) as stored
// (none on CREATE), or its writer may write AllowancePolicies. Audit and
// Log let through every change Enforce withholds, and the break-glass
// takes admission out of the write path, so throwing either switch is a
// policy decision: one a namespace's own administrators, a GitOps
// controller with rights on Namespaces or a self-service portal must not
// make alone.
var ModeSwitch = func() string {
	var created, kept []string
	for _, k := range guardedSwitches {
		created = append(created, annotationOf("object", k)+" == ''")
		kept = append(kept, annotationOf("object", k)+" == "+annotationOf("oldObject", k))
	}
	return "(request.operation == 'CREATE' ? (" + strings.Join(created, " && ") + ") : (" + strings.Join(kept, " && ") + "))" +
		" || authorizer.group('" + v1alpha1.Group + "').resource('allowancepolicies').check('update').allowed()"
}()

// syncModeSwitch keeps the ValidatingAdmissionPolicy that guards the mode
// switch on Namespaces: it works inside the API server, so it holds while
// the provider is down.
func (w *Webhooks) syncModeSwitch(ctx context.Context, t target) error {
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ModeSwitchName}}
	if err := w.apply(ctx, vap, "ValidatingAdmissionPolicy", t.owners, func() {
		vap.Spec = admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: failClosed,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rules([]schema.GroupVersionResource{{Version: "v1", Resource: "namespaces"}}, admissionregistrationv1.Create, admissionregistrationv1.Update)[0]}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: ModeSwitch,
				MessageExpression: "'annotations " + strings.Join(guardedSwitches, ", ") + " of Namespace ' + object.metadata.name + ': user ' + request.userInfo.username + " +
					celString(" may not switch Kausality's mode or break-glass; only who may write AllowancePolicies may (docs/OPERATIONS.md, Who may switch modes)"),
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		}
	}); err != nil {
		return err
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: ModeSwitchName}}
	return w.apply(ctx, b, "ValidatingAdmissionPolicyBinding", t.owners, func() {
		b.Spec = admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: ModeSwitchName, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		}
	})
}

// celStrings quotes each of ss as a CEL string literal, comma-separated.
func celStrings(ss []string) string {
	q := make([]string, 0, len(ss))
	for _, s := range ss {
		q = append(q, celString(s))
	}
	return strings.Join(q, ", ")
}

// celString quotes s as a CEL string literal.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
