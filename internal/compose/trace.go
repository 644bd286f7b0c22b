package compose

import (
	"maps"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// The traces the stamping stage writes: the chain of the change let
// through, from the XR's allowance (or an UpgradeAllowance) to the composed
// resource's own hop.

// chainOf are the XR's unconsumed allowances issued along the chain of its
// i-th allowance: the ControllerChild allowances beside an External one
// bound what it ships. They are the same for every composed resource last
// composed from the same generation, so each is worked out once a run.
func (r *run) chainOf(i int, from int64) []allowance.Allowance {
	key := [2]int64{int64(i), from}
	if c, ok := r.chains[key]; ok {
		return c
	}
	var out []allowance.Allowance
	for _, a := range r.allowances {
		if a.Generation > from && a.Trace.Same(r.allowances[i].Trace) {
			out = append(out, a)
		}
	}
	if r.chains == nil {
		r.chains = map[[2]int64][]allowance.Allowance{}
	}
	r.chains[key] = out
	return out
}

// childBoundsOf is policy.ChildBoundsOf the chain of the XR's i-th
// allowance from generation from (chainOf) for child c, compiled once a
// run for each: every composed resource of the kind under that allowance
// asks it.
func (r *run) childBoundsOf(i int, from int64, c policy.Child) policy.ChildBounds {
	key := childBoundsKey{i: i, from: from, child: c}
	if b, ok := r.childBounds[key]; ok {
		return b
	}
	b := policy.ChildBoundsOf(r.chainOf(i, from), c)
	if r.childBounds == nil {
		r.childBounds = map[childBoundsKey]policy.ChildBounds{}
	}
	r.childBounds[key] = b
	return b
}

// childBoundsKey is what childBoundsOf compiles bounds for.
type childBoundsKey struct {
	i     int
	from  int64
	child policy.Child
}

// throughXR is the trace of the XR's i-th allowance continued through the
// XR, which every composed resource's trace under it starts with: made once
// a run, never modified (Trace.Then copies it).
func (r *run) throughXR(i int) allowance.Trace {
	if r.viaXR == nil {
		r.viaXR = make([]allowance.Trace, len(r.allowances))
	}
	if r.viaXR[i] == nil {
		r.viaXR[i] = r.allowances[i].Trace.With(r.xrHop())
	}
	return r.viaXR[i]
}

// mrHop is the composed resource's own hop for the change let through,
// and the trace labels it leaves out, one line each for the XR's report.
func (r *run) mrHop(dm childMeta, gen int64, ch change) (_ allowance.Hop, problems []string) {
	h := allowance.HopOf(dm.obj, gen)
	h.Name = dm.name
	h.Timestamp = r.stampedAt
	switch {
	case len(ch.passed) > 0:
		h.Field = ch.passed[0].Path
	case len(ch.held) > 0:
		h.Field = ch.held[0].Path
	}
	h.Labels = allowance.TraceLabels(dm.ann)
	if errs := h.SizeErrors(); errs != nil {
		// A pipeline step set them: the resource's hop goes without its
		// labels rather than carry them into every later write.
		for _, f := range slices.Sorted(maps.Keys(errs)) {
			problems = append(problems, errors.Errorf("composed resource %s: %s: %s; its trace labels are left out", dm.resName, f, errs[f]).Error())
		}
		h.Labels = nil
	}
	return h, problems
}

// traceFor is the composed resource's trace annotation: the chain of the
// change let through now, or the observed chain when nothing changed; and
// what its hop leaves out (mrHop).
func (r *run) traceFor(dm, om childMeta, ch change) (string, []string) {
	// A held update keeps the chain of the spec it keeps; a held creation
	// is traced as the creation it is.
	if len(ch.passed) == 0 && (!ch.create || len(ch.held) == 0) {
		if t, ok := om.ann[v1alpha1.AnnotationTrace]; ok {
			if _, err := allowance.ParseTrace(t); err == nil {
				return t, nil
			}
		}
		return allowance.FormatTrace(nil), nil
	}
	base := r.xrTrace
	switch {
	case ch.chosen != nil:
		base = ch.chosen.Trace.With(r.xrHop())
	case ch.upgrade != nil:
		base = ch.upgrade.base
	}
	hop, problems := r.mrHop(dm, allowance.NextGeneration(om.generation), ch)
	return allowance.FormatTraceThen(base, hop), problems
}

// xrHop is the XR's own hop, the last of its trace.
func (r *run) xrHop() allowance.Hop { return r.xrTrace.Last() }
