package server

import (
	"testing"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

func TestScheme(t *testing.T) {
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		v1alpha1.AllowancePolicyGroupVersionKind,
		v1alpha1.UpgradeAllowanceGroupVersionKind,
		admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"),
		admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"),
		xpv1.CompositionGroupVersionKind,
		xpv1.SchemeGroupVersion.WithKind(xpv1.CompositionRevisionKind),
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the provider's scheme does not know %s, which its controllers and webhooks read or write", gvk)
		}
	}
}

func TestServiceAccountUser(t *testing.T) {
	if got, want := ServiceAccountUser("crossplane-system:crossplane"), "system:serviceaccount:crossplane-system:crossplane"; got != want {
		t.Errorf("ServiceAccountUser() = %q, want %q: admission trusts writes by this exact username", got, want)
	}
}
