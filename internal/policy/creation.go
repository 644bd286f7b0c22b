package policy

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// Created reports whether a composite's creation is over: it carries
// ConditionCreated, which the function sets at the first run that finds it
// Ready with nothing left to add (Ready alone is not enough: a resource
// composed once what it needs exists is emitted only after the rest was
// Ready, and Ready turns False again later). It is status, which only
// Crossplane writes. The condition counts whatever its status: the
// function only ever sets it True, and a reconcile that fails (a step's
// fatal result, a composed resource that does not apply) has Crossplane
// mark every condition its pipeline did not answer Unknown, which a user
// able to make a step fail could otherwise use to reopen the creation.
func Created(obj map[string]any) bool {
	return Condition(obj, v1alpha1.ConditionCreated) != nil
}

// UnchangedSinceCreated reports whether nobody changed a composite's spec
// since its creation, as its trace tells: admission writes the trace at
// its creation and rewrites it for every change a rule permits, and every
// hop of a change names the field changed, the hops of a creation none. A
// composite without a readable trace tells nothing, and counts as changed.
// While a composite is created and unchanged, a value its pipeline
// changes is part of the creation (docs/COMPOSITIONS.md, "An XR's two
// phases"); the function and admission both ask here.
func UnchangedSinceCreated(xr map[string]any) bool {
	md, _ := xr["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[v1alpha1.AnnotationTrace].(string)
	t, err := allowance.ParseTrace(s)
	if err != nil || len(t) == 0 {
		return false
	}
	return !slices.ContainsFunc(t, func(h allowance.Hop) bool { return h.Field != "" })
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
