package policy

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Created reports whether a composite's creation is over: it carries
// ConditionCreated, which the function sets at the first run that finds it
// Ready with nothing left to add (Ready alone is not enough: a resource
// composed once what it needs exists is emitted only after the rest was
// Ready, and Ready turns False again later). It is status, which only
// Crossplane writes.
func Created(obj map[string]any) bool {
	return ConditionTrue(obj, v1alpha1.ConditionCreated)
}

// Ready reports whether obj's Ready condition is True.
func Ready(obj map[string]any) bool { return ConditionTrue(obj, "Ready") }

// ConditionTrue reports whether obj's condition of type t is True.
func ConditionTrue(obj map[string]any, t string) bool {
	return Condition(obj, t)["status"] == "True"
}

// Condition is obj's status condition of type t, nil when it has none.
// Conditions are read from the object as served, not through a typed
// copy: Kausality reads them on every kind, known or not.
func Condition(obj map[string]any, t string) map[string]any {
	cs, _, _ := unstructured.NestedFieldNoCopy(obj, "status", "conditions")
	l, _ := cs.([]any)
	for _, c := range l {
		if m, _ := c.(map[string]any); m["type"] == t {
			return m
		}
	}
	return nil
}

// CreationCovers reports whether a composite's creation covers creating a
// composed resource of kind c, or inserting a field into one: what the
// bound of the initializing phase lets be created may be completed until
// the composite has been Ready once (docs/DESIGN.md §3b).
func (s Set) CreationCovers(c Child) bool {
	return s.PhaseBound(PhaseInitializing).AllowsChild(c, v1alpha1.VerbCreate)
}

// CreationGrantsExternal reports whether a composite's creation lets the
// external resource of a composed resource of kind c be created, and
// fields inserted into it before the composite has been Ready once.
func (s Set) CreationGrantsExternal(c Child) bool {
	return v1alpha1.GrantsVerb(s.PhaseBound(PhaseInitializing).ExternalVerbs(c), v1alpha1.VerbCreate)
}
