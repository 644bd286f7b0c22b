package envtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// TestModeSwitchGuard: a namespace administrator (or a GitOps controller)
// with every right on Namespaces and none on AllowancePolicies cannot
// switch a Namespace to Audit or Log, nor take the switch off, by
// creating or updating the Namespace; every other write of it is theirs as
// before. The cluster's administrator, who may write AllowancePolicies,
// switches modes. The guard is a ValidatingAdmissionPolicy the provider
// writes, so it holds while the provider is down.
func TestModeSwitchGuard(t *testing.T) {
	ctx := context.Background()
	admin := as(t, "admin")
	const nsAdmin = "namespace-admin@example.com"
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kausality-test-namespaces"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"*"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kausality-test-namespaces"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kausality-test-namespaces"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: nsAdmin}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	fixture.Eventually(t, 20*time.Second, "the provider's mode switch guard", func() (bool, string) {
		v := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		err := admin.Get(ctx, client.ObjectKey{Name: policycontroller.ModeSwitchName}, v)
		return err == nil, fmt.Sprint(err)
	})
	ns := as(t, nsAdmin)
	withMode := func(name, mode string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if mode != "" {
			n.Annotations = map[string]string{v1alpha1.AnnotationMode: mode}
		}
		return n
	}
	// The API server loads a new policy within seconds.
	fixture.Eventually(t, 20*time.Second, "a Namespace created in Audit by the namespace administrator refused", func() (bool, string) {
		err := ns.Create(ctx, withMode("mode-guard-audit", string(v1alpha1.ModeAudit)))
		return err != nil, fmt.Sprint(err)
	})
	fixture.ErrorContains(t, ns.Create(ctx, withMode("mode-guard-audit", string(v1alpha1.ModeAudit))), v1alpha1.AnnotationMode, nsAdmin, "AllowancePolicies")

	plain := withMode("mode-guard", "")
	if err := ns.Create(ctx, plain); err != nil {
		t.Fatalf("the namespace administrator creates a Namespace without a mode: %v", err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), plain) })
	setMode := func(c client.Client, mode string) error {
		return controlplane.Update(c, plain, func() {
			ann := plain.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			if mode == "" {
				delete(ann, v1alpha1.AnnotationMode)
			} else {
				ann[v1alpha1.AnnotationMode] = mode
			}
			plain.SetAnnotations(ann)
		})
	}
	for _, m := range []v1alpha1.Mode{v1alpha1.ModeAudit, v1alpha1.ModeLog} {
		fixture.ErrorContains(t, setMode(ns, string(m)), v1alpha1.AnnotationMode)
	}
	if err := controlplane.Update(ns, plain, func() { plain.SetLabels(map[string]string{"team": "a"}) }); err != nil {
		t.Errorf("the namespace administrator's write that leaves the mode alone was refused: %v", err)
	}
	if err := setMode(admin, string(v1alpha1.ModeAudit)); err != nil {
		t.Fatalf("the cluster administrator switches the Namespace to Audit: %v", err)
	}
	fixture.ErrorContains(t, setMode(ns, ""), v1alpha1.AnnotationMode)
	if err := controlplane.Update(ns, plain, func() { plain.SetLabels(map[string]string{"team": "b"}) }); err != nil {
		t.Errorf("the namespace administrator's write of a Namespace in Audit that leaves the mode alone was refused: %v", err)
	}
	if err := setMode(admin, ""); err != nil {
		t.Errorf("the cluster administrator switches the Namespace back: %v", err)
	}
}
