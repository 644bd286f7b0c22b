package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

const pathManagementPolicies = "spec.managementPolicies"

// run is the state of one RunFunction call: what the XR permits, and what the
// function withheld.
type run struct {
	cfg config
	now time.Time
	xr  map[string]any

	// restrictAll fails closed: set when the policies are unknown (not yet
	// resolved by Crossplane, or one of them cannot be read), so that every
	// composed resource counts as restricted.
	restrictAll bool
	set         policy.Set
	phase       policy.Phase
	log         bool // Log mode: report, do not withhold
	drift       v1alpha1.DriftPolicy
	upgrades    []v1alpha1.UpgradeAllowance
	revision    string
	upgrade     policy.Bound    // what the UpgradeAllowances grant the revision
	upgradeBase allowance.Trace // the trace of changes they let through

	allowances []allowance.Allowance // unconsumed allowances of the XR, sorted
	xrTrace    allowance.Trace       // the XR's trace, ending with the XR's hop
	frozen     string                // who froze the XR, empty if not frozen

	withheld []string // one line per withheld mutation
	problems []string // malformed input, one line each
}

// load reads the policies, upgrade allowances and XR annotations. Every
// problem is reported and resolved towards withholding.
func (r *run) load(cache *policy.Cache, req *fnv1.RunFunctionRequest) {
	xr := &unstructured.Unstructured{Object: r.xr}

	ups, ok, err := required(req, RequirementPolicies)
	switch {
	case err != nil:
		r.problem(errors.Wrap(err, "cannot read required AllowancePolicies"))
		r.restrictAll = true
	case !ok:
		// Crossplane has not resolved the requirement yet; it calls again.
		r.restrictAll = true
	}
	var aps []v1alpha1.AllowancePolicy
	for _, err := range decodeAll(ups, func(p *v1alpha1.AllowancePolicy) { aps = append(aps, *p) }) {
		r.problem(err)
		r.restrictAll = true
	}
	set, errs := cache.For(xr.GetAPIVersion(), xr.GetKind(), aps)
	for _, err := range errs {
		r.problem(err)
		r.restrictAll = true
	}
	r.set = set

	uus, _, err := required(req, RequirementUpgrades)
	if err != nil {
		r.problem(errors.Wrap(err, "cannot read required UpgradeAllowances"))
	}
	for _, err := range decodeAll(uus, func(u *v1alpha1.UpgradeAllowance) { r.upgrades = append(r.upgrades, *u) }) {
		r.problem(err)
	}

	if r.phase, err = set.Phase(r.xr); err != nil {
		r.problem(errors.Wrapf(err, "cannot tell the lifecycle phase of %s", ref(r.xr)))
		r.phase = policy.PhaseSteady
	}
	mode, err := set.Mode(r.xr)
	if err != nil {
		r.problem(errors.Wrapf(err, "cannot read mode of %s", ref(r.xr)))
	}
	r.log = r.cfg.mode == v1beta1.ModeLog || mode == v1alpha1.ModeLog
	r.drift = set.Drift()
	r.revision = compositionRevision(r.xr)

	ann := xr.GetAnnotations()
	if as, err := allowance.Parse(ann[v1alpha1.AnnotationAllowances]); err != nil {
		r.problem(errors.Wrapf(err, "cannot parse annotation %s on %s; treating it as no allowances", v1alpha1.AnnotationAllowances, ref(r.xr)))
	} else {
		og, ok := allowance.ObservedGeneration(r.xr)
		for _, a := range as {
			if !a.ConsumedAt(og, ok) {
				r.allowances = append(r.allowances, a)
			}
		}
		allowance.Sort(r.allowances)
	}
	t, err := allowance.ParseTrace(ann[v1alpha1.AnnotationTrace])
	if err != nil {
		r.problem(errors.Wrapf(err, "cannot parse annotation %s on %s", v1alpha1.AnnotationTrace, ref(r.xr)))
	}
	r.xrTrace = withHop(t, xrHop(xr))
	if v, ok := ann[v1alpha1.AnnotationFreeze]; ok {
		fz, err := allowance.ParseFreeze(v)
		if err != nil {
			r.problem(errors.Wrapf(err, "cannot parse annotation %s on %s; treating the XR as frozen", v1alpha1.AnnotationFreeze, ref(r.xr)))
			fz.User = "(unreadable freeze annotation)"
		}
		r.frozen = fz.User
	}
	r.upgrade = policy.UpgradeBound(r.upgrades, r.revision)
	r.upgradeBase = r.upgradeTrace()
}

func (r *run) problem(err error) { r.problems = append(r.problems, err.Error()) }

// xrHop is the XR's own hop. Admission writes it into the XR's trace; when it
// is missing (no admission, e.g. under crossplane render) the function adds it
// so every MR trace still passes through its XR.
func xrHop(xr *unstructured.Unstructured) allowance.Hop {
	return allowance.Hop{APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Name: xr.GetName(), Generation: xr.GetGeneration()}
}

// withHop returns t ending with h: t itself when its last hop is h's object at
// h's generation.
func withHop(t allowance.Trace, h allowance.Hop) allowance.Trace {
	if n := len(t); n > 0 && t[n-1].Kind == h.Kind && t[n-1].Name == h.Name && t[n-1].Generation == h.Generation {
		return t
	}
	return append(slices.Clone(t), h)
}

// compositionRevision reads the XR's composition revision, legacy or modern.
func compositionRevision(xr map[string]any) string {
	p := fieldpath.Pave(xr)
	for _, path := range []string{"spec.crossplane.compositionRevisionRef.name", "spec.compositionRevisionRef.name"} {
		if s, err := p.GetString(path); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// childMeta reads what the function needs of a composed resource.
type childMeta struct {
	child      policy.Child
	name       string // metadata.name, or the pipeline name for new resources
	generation int64
	ann        map[string]string
}

func metaOf(resName string, obj map[string]any) childMeta {
	u := unstructured.Unstructured{Object: obj}
	name := u.GetName()
	if name == "" {
		name = resName
	}
	return childMeta{child: policy.ChildOf(u.GetAPIVersion(), u.GetKind()), name: name, generation: u.GetGeneration(), ann: u.GetAnnotations()}
}

// decision is why a mutation may go through: the XR allowance that covers it,
// or another reason.
type decision struct {
	ok      bool
	by      *allowance.Allowance
	upgrade bool // let through by an UpgradeAllowance for the composition revision
	reason  string
}

// composed gates one desired composed resource against its observed state. It
// edits desired in place and returns false when the resource must not be
// created at all.
func (r *run) composed(resName string, observed, desired map[string]any) bool {
	dm := metaOf(resName, desired)
	restricted := r.restrictAll || r.set.Restricts(dm.child)
	gated := r.restrictAll || r.set.RestrictsExternal(dm.child)

	var om childMeta
	var applied mutation.Applied
	var mrAllowances []allowance.Allowance
	if observed != nil {
		om = metaOf(resName, observed)
		var err error
		if applied, err = mutation.ParseApplied(om.ann[v1alpha1.AnnotationApplied]); err != nil {
			r.problem(errors.Wrapf(err, "cannot parse annotation %s on %s; treating every change as propagation", v1alpha1.AnnotationApplied, ref(observed)))
		}
		if mrAllowances, err = allowance.Parse(om.ann[v1alpha1.AnnotationAllowances]); err != nil {
			r.problem(errors.Wrapf(err, "cannot parse annotation %s on %s; its gate stays closed", v1alpha1.AnnotationAllowances, ref(observed)))
		}
	}

	// What the pipeline wants, before anything is withheld, is what the
	// applied record remembers for the fields let through.
	wanted := runtimeCopy(desired)
	var passed []mutation.Mutation
	var chosen *allowance.Allowance
	upgraded := false
	if observed == nil {
		d := r.decideCreate(dm.child)
		if !d.ok && !r.log {
			r.withhold(resName, dm, "Create", "", d.reason)
			return false
		}
		if !d.ok {
			r.wouldWithhold(resName, dm, "Create", "", d.reason)
		}
		chosen = d.by
		passed = []mutation.Mutation{{Path: "", Verb: v1alpha1.MutationInsert}}
	} else {
		ms := mutation.Diff("spec", observed["spec"], desired["spec"], mutation.WithOwned(applied.Owns), mutation.WithSkip(skipManaged))
		var withheld []mutation.Mutation
		for _, m := range ms {
			v, present := valueAt(desired, m.Path)
			d := r.decideMutation(dm.child, m, applied.Unchanged(m.Path, v, present), observed)
			switch {
			case d.ok:
				passed = append(passed, m)
				upgraded = upgraded || d.upgrade
				if chosen == nil {
					chosen = d.by
				}
			case r.log:
				r.wouldWithhold(resName, dm, string(m.Verb), m.Path, d.reason)
				passed = append(passed, m)
			default:
				r.withhold(resName, dm, string(m.Verb), m.Path, d.reason)
				withheld = append(withheld, m)
			}
		}
		if err := mutation.Revert(desired, observed, withheld); err != nil {
			// Revert could not keep a field as observed: withhold the whole
			// resource's spec rather than let the field through.
			r.problem(errors.Wrapf(err, "cannot withhold changes to %s", ref(observed)))
			desired["spec"] = runtimeCopy(observed)["spec"]
			passed = nil
		}
		applied = nextApplied(applied, wanted, withheld)
	}
	if observed == nil {
		applied = mutation.Record("spec", wanted["spec"], skipManaged)
	}

	u := &unstructured.Unstructured{Object: desired}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if restricted || gated {
		ann[v1alpha1.AnnotationApplied] = applied.String()
	}
	if !gated {
		// The pipeline owns this resource's managementPolicies; Kausality
		// still records what it let through.
		if restricted {
			ann[v1alpha1.AnnotationTrace] = r.traceFor(dm, om, passed, chosen, upgraded)
			if r.revision != "" {
				ann[v1alpha1.AnnotationCompositionRevision] = r.revision
			}
			u.SetAnnotations(ann)
		}
		return true
	}

	gen := om.generation + 1
	mrAllowances = r.stampExternal(dm, mrAllowances, passed, gen, observed == nil, upgraded)
	og, ok := int64(0), false
	if observed != nil {
		og, ok = allowance.ObservedGeneration(observed)
	}
	g := gate.Decide(gate.Inputs{
		Allowances: mrAllowances, Observed: og, Reconciled: ok, Generation: om.generation,
		ReadOnly: r.cfg.readOnly, Now: r.now, Limit: r.cfg.maxGateOpen, Frozen: r.frozen,
	})
	// Consumed allowances never reopen a gate; the function prunes them.
	kept := slices.DeleteFunc(g.Allowances, func(a allowance.Allowance) bool { return a.Consumed })
	if len(g.Withheld) > 0 {
		r.withhold(resName, dm, "open gate", "", fmt.Sprintf("%s is frozen by %s", ref(r.xr), r.frozen))
	}
	policies := g.Policies
	if g.Err != nil {
		r.withhold(resName, dm, "open gate", "", g.Err.Error())
	}
	if err := fieldpath.Pave(desired).SetValue(pathManagementPolicies, policies); err != nil {
		r.problem(errors.Wrapf(err, "cannot set %s on %s", pathManagementPolicies, ref(desired)))
	}

	ann[v1alpha1.AnnotationAllowances] = allowance.Format(kept)
	ann[v1alpha1.AnnotationTrace] = r.traceFor(dm, om, passed, chosen, upgraded)
	rev := r.revision
	if len(passed) == 0 && om.ann[v1alpha1.AnnotationCompositionRevision] != "" && r.hasWithheld(resName) {
		// Keep the old stamp while the new revision's output is withheld, so
		// an UpgradeAllowance for the new revision still applies later.
		rev = om.ann[v1alpha1.AnnotationCompositionRevision]
	}
	if rev != "" {
		ann[v1alpha1.AnnotationCompositionRevision] = rev
	}
	u.SetAnnotations(ann)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelGated] = "true"
	u.SetLabels(labels)
	return true
}

func skipManaged(p string) bool {
	return p == pathManagementPolicies || strings.HasPrefix(p, pathManagementPolicies+"[")
}

// decideCreate decides whether a new composed resource may be created.
func (r *run) decideCreate(c policy.Child) decision {
	if !r.restrictAll && !r.set.Restricts(c) {
		return decision{ok: true}
	}
	if r.phase != policy.PhaseSteady && !r.restrictAll {
		if r.set.PhaseBound(r.phase).AllowsChild(c, v1alpha1.VerbCreate) {
			return decision{ok: true}
		}
	}
	for i, a := range r.allowances {
		if a.Relation == v1alpha1.RelationControllerChild && policy.MatchesChild(a.Target, c) && a.HasVerb(v1alpha1.VerbCreate) {
			return decision{ok: true, by: &r.allowances[i]}
		}
	}
	return decision{reason: r.noAllowance(c, "Create")}
}

// decideMutation decides whether one field mutation may go through.
func (r *run) decideMutation(c policy.Child, m mutation.Mutation, unchanged bool, observed map[string]any) decision {
	if !r.restrictAll && !r.set.Restricts(c) {
		return decision{ok: true}
	}
	if unchanged {
		// The pipeline wants what it wanted last time; the MR differs
		// because someone changed it. Correcting that is not propagation.
		if r.drift == v1alpha1.DriftAllow && !r.restrictAll {
			return decision{ok: true}
		}
		return decision{reason: "drift: the composition still wants the value it last applied and the resource was changed outside it; policy drift is Deny"}
	}
	if r.phase != policy.PhaseSteady && !r.restrictAll {
		if r.set.PhaseBound(r.phase).AllowsMutation(c, m) {
			return decision{ok: true}
		}
	}
	for i, a := range r.allowances {
		if a.Relation != v1alpha1.RelationControllerChild || !policy.MatchesChild(a.Target, c) || !a.HasVerb(v1alpha1.VerbUpdate) {
			continue
		}
		if len(a.Mutations) == 0 || mutation.CoveredBy(m, a.Mutations) {
			return decision{ok: true, by: &r.allowances[i]}
		}
	}
	prev := (&unstructured.Unstructured{Object: observed}).GetAnnotations()[v1alpha1.AnnotationCompositionRevision]
	if r.revision != "" && prev != "" && prev != r.revision {
		if r.upgrade.AllowsMutation(c, m) {
			return decision{ok: true, upgrade: true}
		}
		return decision{reason: fmt.Sprintf("Composition revision changed from %s to %s and no UpgradeAllowance for %s covers it", prev, r.revision, r.revision)}
	}
	return decision{reason: r.noAllowance(c, "Update")}
}

func (r *run) noAllowance(c policy.Child, verb string) string {
	if r.restrictAll {
		return "the AllowancePolicies are not known (not resolved yet, or unreadable), so every change is withheld"
	}
	return fmt.Sprintf("no unconsumed allowance on %s grants %s of %s; policies: %s", ref(r.xr), verb, c.Resource, strings.Join(r.set.Names(), ", "))
}

// deleted decides about a composed resource the pipeline no longer wants. It
// returns the resource to keep, or nil to let Crossplane delete it.
func (r *run) deleted(resName string, observed map[string]any) *composed.Unstructured {
	m := metaOf(resName, observed)
	if !r.restrictAll && !r.set.Restricts(m.child) {
		return nil
	}
	if r.phase != policy.PhaseSteady && !r.restrictAll && r.set.PhaseBound(r.phase).AllowsChild(m.child, v1alpha1.VerbDelete) {
		return nil
	}
	for _, a := range r.allowances {
		if a.Relation == v1alpha1.RelationControllerChild && policy.MatchesChild(a.Target, m.child) && a.HasVerb(v1alpha1.VerbDelete) {
			return nil
		}
	}
	reason := r.noAllowance(m.child, "Delete")
	if r.log {
		r.wouldWithhold(resName, m, "Delete", "", reason)
		return nil
	}
	r.withhold(resName, m, "Delete", "", reason)
	// Emit the resource as observed so Crossplane keeps it; close its gate.
	u := unstructured.Unstructured{Object: observed}
	kept := composed.New()
	kept.SetAPIVersion(u.GetAPIVersion())
	kept.SetKind(u.GetKind())
	kept.SetName(u.GetName())
	kept.SetNamespace(u.GetNamespace())
	kept.SetLabels(u.GetLabels())
	kept.SetAnnotations(u.GetAnnotations())
	if spec, ok := observed["spec"]; ok {
		kept.Object["spec"] = runtimeCopy(map[string]any{"spec": spec})["spec"]
	}
	if r.restrictAll || r.set.RestrictsExternal(m.child) {
		_ = fieldpath.Pave(kept.Object).SetValue(pathManagementPolicies, r.cfg.readOnly)
	}
	return kept
}

// stampExternal adds the External allowances the composed resource gets for
// the mutations let through: those of the XR allowances (or, during
// initialization or deletion, of the phase bound) that match it.
func (r *run) stampExternal(dm childMeta, have []allowance.Allowance, passed []mutation.Mutation, gen int64, create, upgraded bool) []allowance.Allowance {
	if len(passed) == 0 {
		return have
	}
	out := slices.Clone(have)
	hop := r.mrHop(dm, gen, passed)
	add := func(a allowance.Allowance) {
		for _, h := range out {
			if h.Relation == a.Relation && maps.Equal(h.Target.External, a.Target.External) && h.Trace.Extends(a.Trace[:len(a.Trace)-1]) {
				return // never issued twice
			}
		}
		out = append(out, a)
	}
	verb := v1alpha1.VerbUpdate
	if create {
		verb = v1alpha1.VerbCreate
	}
	found := false
	for _, xa := range r.allowances {
		if xa.Relation != v1alpha1.RelationExternal || !policy.MatchesExternal(xa.Target, dm.child) {
			continue
		}
		found = true
		t := append(withHop(xa.Trace, r.xrTrace[len(r.xrTrace)-1]), hop)
		add(allowance.Allowance{
			Relation: v1alpha1.RelationExternal, Target: xa.Target, Verbs: slices.Clone(xa.Verbs),
			Generation: gen, Initiator: xa.Initiator, Trace: t,
		})
	}
	// Without an XR allowance, a kind-wide grant: creation during
	// initialization (deletion of external resources is the gate
	// controller's and admission's call), or the composition revision's own
	// changes, which reach the cloud only when an UpgradeAllowance grants the
	// external Update; that trace starts at the UpgradeAllowance.
	if !found && r.phase == policy.PhaseInitializing && !r.restrictAll && v1alpha1.GrantsVerb(r.set.PhaseBound(r.phase).ExternalVerbs(dm.child), verb) {
		add(kindGrant(dm.child, verb, gen, append(slices.Clone(r.xrTrace), hop)))
	}
	if !found && upgraded && v1alpha1.GrantsVerb(r.upgrade.ExternalVerbs(dm.child), v1alpha1.VerbUpdate) {
		add(kindGrant(dm.child, v1alpha1.VerbUpdate, gen, append(slices.Clone(r.upgradeBase), hop)))
	}
	return out
}

// kindGrant is an External allowance for verb on the child's kind.
func kindGrant(c policy.Child, verb string, gen int64, t allowance.Trace) allowance.Allowance {
	return allowance.Allowance{
		Relation: v1alpha1.RelationExternal,
		Target:   v1alpha1.Target{External: map[string]string{"apiGroup": c.APIGroup, "kind": c.Kind}},
		Verbs:    []string{verb}, Generation: gen, Initiator: t.Initiator(), Trace: t,
	}
}

// upgradeTrace is the chain of a change the composition revision made on
// its own: the first UpgradeAllowance for the revision, then the XR.
func (r *run) upgradeTrace() allowance.Trace {
	var t allowance.Trace
	if us := policy.UpgradesFor(r.upgrades, r.revision); len(us) > 0 {
		t = append(t, allowance.Hop{APIVersion: v1alpha1.UpgradeAllowanceGroupVersionKind.GroupVersion().String(), Kind: v1alpha1.UpgradeAllowanceKind, Name: us[0].GetName(), Generation: us[0].GetGeneration()})
	}
	return append(t, r.xrTrace[len(r.xrTrace)-1])
}

func (r *run) mrHop(dm childMeta, gen int64, passed []mutation.Mutation) allowance.Hop {
	h := allowance.Hop{APIVersion: dm.child.APIGroup + "/" + dm.child.APIVersion, Kind: dm.child.Kind, Name: dm.name, Generation: gen, Timestamp: allowance.Timestamp(r.now)}
	if dm.child.APIGroup == "" {
		h.APIVersion = dm.child.APIVersion
	}
	if len(passed) > 0 {
		h.Field = passed[0].Path
	}
	h.Labels = allowance.TraceLabels(dm.ann)
	return h
}

// traceFor is the composed resource's trace annotation: the chain of the
// change let through now, or the observed chain when nothing changed.
func (r *run) traceFor(dm, om childMeta, passed []mutation.Mutation, chosen *allowance.Allowance, upgraded bool) string {
	if len(passed) == 0 {
		if t, ok := om.ann[v1alpha1.AnnotationTrace]; ok {
			if _, err := allowance.ParseTrace(t); err == nil {
				return t
			}
		}
		return allowance.FormatTrace(nil)
	}
	base := r.xrTrace
	switch {
	case chosen != nil:
		base = withHop(chosen.Trace, r.xrTrace[len(r.xrTrace)-1])
	case upgraded:
		base = r.upgradeBase
	}
	return allowance.FormatTrace(append(slices.Clone(base), r.mrHop(dm, om.generation+1, passed)))
}

func (r *run) withhold(resName string, m childMeta, verb, path, reason string) {
	r.withheld = append(r.withheld, line(resName, m, verb, path, reason))
}

func (r *run) wouldWithhold(resName string, m childMeta, verb, path, reason string) {
	r.withheld = append(r.withheld, "(Log mode, let through) "+line(resName, m, verb, path, reason))
}

func (r *run) hasWithheld(resName string) bool {
	for _, w := range r.withheld {
		if strings.HasPrefix(w, "resource "+resName+" ") {
			return true
		}
	}
	return false
}

func line(resName string, m childMeta, verb, path, reason string) string {
	what := verb
	if path != "" {
		what += " " + path
	}
	return fmt.Sprintf("resource %s (%s %s): withheld %s: %s", resName, m.child.Kind, m.name, what, reason)
}

// report turns what the run withheld and every input problem into results and
// XR conditions.
func (r *run) report(rsp *fnv1.RunFunctionResponse) {
	for _, p := range r.problems {
		response.Warning(rsp, errors.New(p)).TargetCompositeAndClaim()
	}
	if len(r.problems) > 0 {
		response.ConditionFalse(rsp, ConditionAnnotations, ReasonMalformed).WithMessage(joinLines(r.problems)).TargetCompositeAndClaim()
	} else {
		response.ConditionTrue(rsp, ConditionAnnotations, ReasonAnnotationsValid).TargetComposite()
	}
	for _, w := range r.withheld {
		response.Warning(rsp, errors.New(w)).TargetCompositeAndClaim()
	}
	switch {
	case len(r.withheld) == 0:
		response.ConditionTrue(rsp, ConditionAllowed, ReasonAllAllowed).TargetComposite()
	case r.log:
		response.ConditionTrue(rsp, ConditionAllowed, ReasonLogOnly).WithMessage(joinLines(r.withheld)).TargetCompositeAndClaim()
	default:
		response.ConditionFalse(rsp, ConditionAllowed, ReasonWithheld).WithMessage(joinLines(r.withheld)).TargetCompositeAndClaim()
	}
}

func valueAt(obj map[string]any, path string) (any, bool) {
	v, err := fieldpath.Pave(obj).GetValue(path)
	if err != nil {
		return nil, false
	}
	return v, true
}

func runtimeCopy(obj map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
}

// nextApplied is the record after this run: what the pipeline wanted for the
// fields let through, and the previous record for the fields withheld, so a
// withheld change is still recognised as propagation next time.
func nextApplied(prev mutation.Applied, wanted map[string]any, withheld []mutation.Mutation) mutation.Applied {
	next := mutation.Record("spec", wanted["spec"], skipManaged)
	for _, m := range withheld {
		for k := range next {
			if mutation.Under(k, m.Path) {
				delete(next, k)
			}
		}
		for k, v := range prev {
			if mutation.Under(k, m.Path) {
				next[k] = v
			}
		}
	}
	return next
}
