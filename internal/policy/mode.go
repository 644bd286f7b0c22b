package policy

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// ModeNamespace names the Namespace whose kausality.io/mode annotation
// governs obj: its own, or for a cluster-scoped legacy XR its Claim's
// (spec.claimRef.namespace). "" when none does. Only a Namespace may switch
// the mode, because whoever may edit a Claim or XR must not be able to
// switch off enforcement of their own change; editing a Namespace is an
// administrator's right.
func ModeNamespace(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	if ns := u.GetNamespace(); ns != "" {
		return ns
	}
	ns, _, _ := unstructured.NestedString(obj, "spec", "claimRef", "namespace")
	return ns
}

// Mode is Enforce unless the Namespace ns (nil when there is none, or it is
// not known) says Log in its kausality.io/mode annotation, or it has none
// and every policy says Log. An unreadable annotation is an error and
// Enforce.
func (s Set) Mode(ns map[string]any) (v1alpha1.Mode, error) {
	if ns != nil {
		u := unstructured.Unstructured{Object: ns}
		if v, ok := u.GetAnnotations()[v1alpha1.AnnotationMode]; ok {
			switch m := v1alpha1.Mode(v); m {
			case v1alpha1.ModeEnforce, v1alpha1.ModeLog:
				return m, nil
			default:
				return v1alpha1.ModeEnforce, errors.Errorf("annotation %s on Namespace %s is %q, want %s or %s",
					v1alpha1.AnnotationMode, u.GetName(), v, v1alpha1.ModeEnforce, v1alpha1.ModeLog)
			}
		}
	}
	if len(s.policies) == 0 {
		return v1alpha1.ModeEnforce, nil
	}
	for _, p := range s.policies {
		if p.policy.Spec.Mode != v1alpha1.ModeLog {
			return v1alpha1.ModeEnforce, nil
		}
	}
	return v1alpha1.ModeLog, nil
}

// IgnoredMode is the warning for an object other than a Namespace that
// carries kausality.io/mode, "" when it carries none. Crossplane copies a
// Claim's annotations to its XR, so a Claim's user would otherwise choose
// the mode their own change is checked in.
func IgnoredMode(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	v, ok := u.GetAnnotations()[v1alpha1.AnnotationMode]
	if !ok || u.GetKind() == "Namespace" {
		return ""
	}
	where := u.GetName()
	if u.GetNamespace() != "" {
		where = u.GetNamespace() + "/" + where
	}
	return fmt.Sprintf("annotation %s=%q on %s %s is ignored: only a Namespace may set the mode (kubectl annotate namespace <name> %s=Log, as an administrator)",
		v1alpha1.AnnotationMode, v, u.GetKind(), where, v1alpha1.AnnotationMode)
}
