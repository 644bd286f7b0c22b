package compose

import (
	"fmt"
	"maps"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// The gate of a composed resource: whether it is Kausality's (gated, not
// while audited), what it is set to for the change let through (gate), and
// setting it on the object answered.

// gated reports whether the resource's gate is Kausality's: not while it
// is audited.
func (r *run) gated(m childMeta) bool {
	return m.child.Class.Gated() && !policy.IsComposite(m.obj.Object) && !policy.IsClaim(m.obj.Object) && r.rulesOf(m.child).external && !r.audited(m)
}

// audited reports whether the resource is in Audit mode (policy.ManagedMode,
// as admission decides it): Kausality reports what it would withhold and
// leaves its management policies to the Composition. Never while the
// policies are unknown.
func (r *run) audited(m childMeta) bool {
	if r.restrictAll || !r.auditable {
		return false
	}
	// As admission reads it (policy.ModeNamespace): a cluster-scoped
	// managed resource answers to no Namespace, only to its policies. What
	// a namespaced XR composes is in its Namespace (Crossplane puts it
	// there; the pipeline's desired resource may name none), what a
	// cluster-scoped one composes is cluster-scoped.
	ns := r.ns
	if r.xr.GetNamespace() == "" {
		ns = nil
	}
	mode, err := r.compiled.policies.ManagedMode(r.all, m.child, ns)
	return err == nil && mode == v1alpha1.ModeAudit
}

// gate stamps the External allowances the change earns onto a gated
// resource and prunes consumed ones. It returns what the gate keeps shut,
// as reported, the managementPolicies the gate formula sets, and what the
// resource's hop leaves out (mrHop).
func (r *run) gate(cfg gate.Config, dm, om childMeta, observed, desired map[string]any, ann map[string]string, ch change, have []allowance.Allowance) (reports []withheld, policies, problems []string) {
	as, problems := r.stampExternal(dm, om, have, ch, cfg.Requested)
	if prev := recordPrevious(ch.previous, observed, ch, have, as); len(prev) > 0 {
		ann[v1alpha1.AnnotationPrevious] = prev.String()
	} else {
		delete(ann, v1alpha1.AnnotationPrevious) // none in flight, and no step may forge one
	}
	g := cfg.DecideRecording(desired, observed, func(desired map[string]any) mutation.Applied {
		// A spec rarely gains or loses fields: the approval it replaces
		// sizes its record.
		return appliedSpec(desired, observed, ch.owns, ch.desiredRecord(), mutation.SizeHint(om.ann[v1alpha1.AnnotationApproved]))
	}, as, r.now, r.frozen)
	if len(g.Withheld) > 0 {
		reports = append(reports, withheldOf(dm, "open gate", "", metrics.ReasonFrozen, fmt.Sprintf("%s is frozen by %s", ref(r.xr.Object), r.frozen)))
	}
	for _, p := range g.Uncovered {
		reports = append(reports, withheldOf(dm, "open gate", p, metrics.ReasonUncovered, fmt.Sprintf("changed since generation %d was let through to the cloud and no open allowance covers it; it would ride along with the allowed change", g.Approved.Generation)))
	}
	if g.Approves || g.Withdraws {
		// Otherwise admission keeps the stored approval.
		g.Approved.AddAnnotations(ann)
	}
	if g.Err != nil {
		reports = append(reports, withheldOf(dm, "open gate", "", metrics.ReasonGateError, g.Err.Error()))
	}
	// An observe-only import is not created: the pipeline asked so.
	if len(g.Withheld) == 0 && gate.Asks(cfg.Requested, gate.Create) && shutAtCreation(ch, observed, have, g.Policies) {
		reports = append(reports, withheldOf(dm, v1alpha1.VerbCreate, "", metrics.ReasonNoAllowance,
			fmt.Sprintf("its gate stays closed: no unconsumed External allowance grants Create of %s %s, so it is not created in the cloud", dm.child.APIGroup, dm.child.Kind)))
	}
	// Consumed allowances never reopen a gate; the function prunes them.
	kept := allowance.Unconsumed(g.Allowances, observed)
	// Those marked consumed in this run stay one write, marked: admission
	// puts back an allowance a write drops while it is stored unconsumed.
	for _, a := range ch.superseded {
		if !slices.ContainsFunc(kept, a.Same) {
			kept = append(kept, a)
		}
	}
	ann[v1alpha1.AnnotationAllowances] = allowance.Format(kept)
	trace, hopProblems := r.traceFor(dm, om, ch)
	ann[v1alpha1.AnnotationTrace] = trace
	// The logic record stays put while anything of the change is kept
	// back, the gate's own holds included.
	ch.reports = slices.Concat(ch.reports, reports)
	r.stampLogic(ann, om, ch)
	return reports, g.Policies, append(problems, hopProblems...)
}

// appliedSpec is the record of the spec Crossplane's server-side apply of
// desired leaves on observed: desired's fields, and those of observed's the
// pipeline never set (owns: what it last applied), such as defaults the
// API server filled in, which the apply does not remove. The gate compares
// it with what was approved, so those fields are not pending changes.
//
// rec is the record of desired's spec when the caller has it (see
// change.desiredRecord; it is not written), nil to record it here. size
// is how many leaves the result likely has, to make it once.
func appliedSpec(desired, observed map[string]any, owns func(string) bool, rec mutation.Applied, size int) mutation.Applied {
	if rec == nil {
		rec = gate.SpecRecord(desired)
	}
	if observed == nil {
		return rec
	}
	out := make(mutation.Applied, max(size, len(rec)))
	maps.Copy(out, rec)
	var unowned func(string) bool // nil: nothing recorded, the pipeline owns nothing yet
	if owns != nil {
		unowned = func(p string) bool { return !owns(p) }
	}
	// Only observed's leaves desired lacks are read (and hashed).
	out.Add("spec", observed["spec"], gate.IsGatePath, unowned)
	return out
}

// shutAtCreation reports whether a gated resource that does not exist in
// the cloud yet is left with a gate that does not open Create: composed
// now, or composed earlier behind a closed gate and never created by its
// provider (crossplane-runtime records a creation with
// crossplane.io/external-create-succeeded). Such a resource would wait
// for ever with nothing saying why. A creation propagation control holds
// back is reported as held, not here.
func shutAtCreation(ch change, observed map[string]any, have []allowance.Allowance, policies []string) bool {
	if slices.Contains(policies, gate.Create) || slices.Contains(policies, v1alpha1.VerbAll) || len(ch.held) > 0 {
		return false
	}
	if pendingCreate(have) != nil {
		return false
	}
	if ch.create {
		return true
	}
	if observed == nil || policy.Ready(observed) {
		return false
	}
	return !hasAnnotation(observed, annotationExternalCreateSucceeded)
}

// hasAnnotation reports whether unstructured's GetAnnotations of obj has
// key, without copying them: they read only when every value is a string
// or null.
func hasAnnotation(obj map[string]any, key string) bool {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if _, ok := ann[key]; !ok {
		return false
	}
	for _, v := range ann {
		switch v.(type) {
		case string, nil:
		default:
			return false
		}
	}
	return true
}

// annotationExternalCreateSucceeded is where crossplane-runtime's managed
// reconciler records that it created the external resource.
const annotationExternalCreateSucceeded = "crossplane.io/external-create-succeeded"

// setManagementPolicies is fieldpath's SetValue of spec.managementPolicies
// without parsing the path or a JSON round trip.
func setManagementPolicies(obj map[string]any, ps []string) error {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		if obj["spec"] != nil {
			return fieldpath.Pave(obj).SetValue(gate.PathManagementPolicies, ps)
		}
		spec = map[string]any{}
		obj["spec"] = spec
	}
	spec["managementPolicies"] = anySlice(ps)
	return nil
}

// anySlice is ss as JSON holds a list.
func anySlice(ss []string) []any {
	l := make([]any, len(ss))
	for i, s := range ss {
		l[i] = s
	}
	return l
}
