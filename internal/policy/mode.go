package policy

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// ModeNamespace names the Namespace whose kausality.io/mode annotation
// governs obj: its own, or for a cluster-scoped legacy XR its Claim's
// (spec.claimRef.namespace). "" when none does: a cluster-scoped managed
// resource answers to no Namespace, since whoever may write one could
// name any (its labels, its controller reference at creation). Only a Namespace may switch
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

// Mode is the Namespace ns's kausality.io/mode annotation (ns nil when
// there is none, or it is not known), else the strictest of the policies'
// modes (Enforce, then Log, then Audit; Enforce without policies). An
// unreadable annotation is an error and Enforce.
func (s Set) Mode(ns map[string]any) (v1alpha1.Mode, error) {
	if m, ok, err := NamespaceMode(ns); ok || err != nil {
		return m, err
	}
	if len(s.policies) == 0 {
		return v1alpha1.ModeEnforce, nil
	}
	m := v1alpha1.ModeAudit
	for _, p := range s.policies {
		if pm := modeOf(&p.policy); pm.Stricter(m) {
			m = pm
		}
	}
	return m, nil
}

// modeOf is p's mode, Enforce when it names none.
func modeOf(p *v1alpha1.AllowancePolicy) v1alpha1.Mode {
	if p.Spec.Mode == "" {
		return v1alpha1.ModeEnforce
	}
	return p.Spec.Mode
}

// ManagedMode is the mode of a managed resource of kind child: the one its
// Namespace sets (ns, see ModeNamespace), else the strictest mode of the
// policies that restrict its kind, whatever kind each is for: Audit only
// when every one of them says Audit, Enforce when none restricts it or one
// that might does not compile. The function and admission both decide
// whether a composed resource is gated by it, so they never disagree.
func (c *Cache) ManagedMode(ps []v1alpha1.AllowancePolicy, child Child, ns map[string]any) (v1alpha1.Mode, error) {
	if m, ok, err := NamespaceMode(ns); ok || err != nil {
		return m, err
	}
	m, restricted := v1alpha1.ModeAudit, false
	for i := range ps {
		cp, err := c.Compile(&ps[i])
		if err != nil {
			return v1alpha1.ModeEnforce, nil
		}
		s := Set{policies: []*Compiled{cp}}
		s.unresolve(&ps[i])
		if !s.Restricts(child) && !s.RestrictsExternal(child) {
			continue
		}
		restricted = true
		if pm := modeOf(&ps[i]); pm.Stricter(m) {
			m = pm
		}
	}
	if !restricted {
		return v1alpha1.ModeEnforce, nil
	}
	return m, nil
}

// NamespaceMode is the mode the Namespace ns sets in its kausality.io/mode
// annotation; ok is false when it sets none (or ns is nil). An unreadable
// annotation is an error and Enforce.
func NamespaceMode(ns map[string]any) (_ v1alpha1.Mode, ok bool, _ error) {
	if ns == nil {
		return "", false, nil
	}
	u := unstructured.Unstructured{Object: ns}
	v, ok := u.GetAnnotations()[v1alpha1.AnnotationMode]
	if !ok {
		return "", false, nil
	}
	switch m := v1alpha1.Mode(v); m {
	case v1alpha1.ModeEnforce, v1alpha1.ModeLog, v1alpha1.ModeAudit:
		return m, true, nil
	default:
		return v1alpha1.ModeEnforce, true, errors.Errorf("annotation %s on Namespace %s is %q, want %s, %s or %s",
			v1alpha1.AnnotationMode, u.GetName(), v, v1alpha1.ModeEnforce, v1alpha1.ModeLog, v1alpha1.ModeAudit)
	}
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
