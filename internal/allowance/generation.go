package allowance

import (
	"slices"
	"strconv"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// ObservedGeneration reads an object's observed generation the way
// crossplane-runtime v2 reports it: status.observedGeneration when present,
// else the observedGeneration of the Synced condition. ok is false when the
// object reports neither, i.e. no controller has reconciled it yet, or
// when the Synced condition is not True: crossplane-runtime stamps the
// generation on a failed (ReconcileError) or paused (ReconcilePaused)
// reconcile too, but nothing of that generation was applied, so it must
// not consume an allowance.
func ObservedGeneration(content map[string]any) (int64, bool) {
	status, _ := content["status"].(map[string]any)
	if g, ok := asInt(status["observedGeneration"]); ok {
		return g, true
	}
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["type"] != "Synced" {
			continue
		}
		if cm["status"] != "True" {
			return 0, false
		}
		if g, ok := asInt(cm["observedGeneration"]); ok {
			return g, true
		}
	}
	return 0, false
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

// ComposedGeneration is the composite generation a composed resource was
// last composed from (annotation kausality.io/composed-generation); 0 when
// it was never composed by the function or the annotation does not parse.
func ComposedGeneration(composed map[string]any) int64 {
	md, _ := composed["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[v1alpha1.AnnotationComposedGeneration].(string)
	if s == "" {
		// Never composed: not worth ParseInt's error, which allocates.
		return 0
	}
	g, err := strconv.ParseInt(s, 10, 64)
	if err != nil || g < 0 {
		return 0
	}
	return g
}

// ApprovedGeneration is the generation whose spec a gated managed
// resource's open gate last let through (annotation
// kausality.io/approved-generation); ok is false without a readable one.
func ApprovedGeneration(carrier map[string]any) (int64, bool) {
	md, _ := carrier["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, ok := ann[v1alpha1.AnnotationApprovedGeneration].(string)
	if !ok {
		return 0, false
	}
	g, err := strconv.ParseInt(s, 10, 64)
	if err != nil || g < 0 {
		return 0, false
	}
	return g, true
}

// OnComposite are the allowances of a composite (XR) still to be
// propagated: all but those marked consumed and those of a generation
// the composite has observed a later one than.
//
// A composite's observed generation alone does not say its allowance was
// propagated: Crossplane marks a composite Synced at the generation it
// reads back after composing, which a write that landed while it composed
// (the claim controller syncing a Claim's change, a user's edit) has
// already raised. The next reconcile, the one that composes from that
// generation, first records its resource references on the composite,
// which raises the generation again before it creates what it composed.
// So an allowance stays until the composite has observed a later
// generation, and whether it was used for a composed resource is read off
// that resource and its composite's record (UncomposedSince,
// ComposedFrom).
func OnComposite(as []Allowance, xr map[string]any) []Allowance {
	og, ok := ObservedGeneration(xr)
	return slices.DeleteFunc(slices.Clone(as), func(a Allowance) bool {
		return a.Consumed || (ok && og > a.Generation)
	})
}

// UncomposedSince are the composite allowances of as that a composed
// resource last composed from composite generation from (ComposedFrom)
// was not yet composed from: an allowance of generation g is used up for
// it once the function composed it from generation g or later.
func UncomposedSince(as []Allowance, from int64) []Allowance {
	return slices.DeleteFunc(slices.Clone(as), func(a Allowance) bool { return a.Generation <= from })
}
