package compose

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// upgrade is a logic change of composed resources (a new Composition
// revision, a new Function package) and what the UpgradeAllowances naming
// every part of it grant.
type upgrade struct {
	changes []logic.Change
	bound   policy.Bound
	// base is the trace of a change it lets through: the first
	// UpgradeAllowance naming it, then the XR.
	base allowance.Trace
	// by are the UpgradeAllowances naming it.
	by []v1alpha1.UpgradeAllowance
	// turn's verdict: whether this XR may take it now (a rollout paces it
	// across XRs), and why not.
	turnDecided, turnOK bool
	turnWhy             string
	turnCode            string // turnWhy's class, a metrics.Reason* constant
	// turnWait is what the XR reports of a turn it waits for, or of a
	// halted roll-out (the Propagated condition): no counts of the fleet.
	turnWait string
}

// loadFunctions reads the package each Function of the pipeline runs:
// the Functions and FunctionRevisions Crossplane supplies, narrowed to the
// steps of the CompositionRevision's pipeline when it has one (under
// crossplane render it may not; then every Function supplied counts). It
// returns what it could not read.
func (r *run) loadFunctions(req *fnv1.RunFunctionRequest, cr map[string]any) (problems []string) {
	fns, _, err := required(req, RequirementFunctions)
	if err != nil {
		problems = append(problems, errors.Wrap(err, errReadRequiredFunctions).Error())
	}
	revs, _, err := required(req, RequirementFunctionRevisions)
	if err != nil {
		problems = append(problems, errors.Wrap(err, errReadRequiredFunctionRevisions).Error())
	}
	var steps map[string]bool
	if pipeline, err := fieldpath.Pave(cr).GetValue("spec.pipeline"); err == nil {
		steps = map[string]bool{}
		for _, s := range asList(pipeline) {
			if name, err := fieldpath.Pave(asMap(s)).GetString("functionRef.name"); err == nil {
				steps[name] = true
			}
		}
	}
	out := map[string]string{}
	for _, f := range fns {
		if steps != nil && !steps[f.GetName()] {
			continue
		}
		if pkg := packageOf(f, revs); pkg != "" {
			out[f.GetName()] = pkg
		}
	}
	r.logic = logic.Logic{Revision: r.revision, Functions: out}
	r.functions = logic.FormatFunctions(out)
	return problems
}

// packageOf is the package a Function runs: its active FunctionRevision's
// image, else the package its status says it resolved, else the one its
// spec asks for.
func packageOf(f *unstructured.Unstructured, revs []*unstructured.Unstructured) string {
	for _, rev := range revs {
		p := fieldpath.Pave(rev.Object)
		if rev.GetLabels()["pkg.crossplane.io/package"] != f.GetName() {
			continue
		}
		if state, _ := p.GetString("spec.desiredState"); state != "Active" {
			continue
		}
		if image, _ := p.GetString("spec.image"); image != "" {
			return image
		}
	}
	p := fieldpath.Pave(f.Object)
	if id, _ := p.GetString("status.currentIdentifier"); id != "" {
		return id
	}
	pkg, _ := p.GetString("spec.package")
	return pkg
}

// upgradeOf is the logic change of a composed resource whose annotations
// record the logic that last produced it, or nil when nothing changed.
// Resources produced by the same logic share one, worked out once a run;
// err is the record it could not read, returned by the call that works
// the upgrade out and by no later one, so that the XR reports it once.
func (r *run) upgradeOf(ann map[string]string) (_ *upgrade, err error) {
	key := ann[v1alpha1.AnnotationCompositionRevision] + "\x00" + ann[v1alpha1.AnnotationFunctionVersions] + "\x00" + ann[v1alpha1.AnnotationInputVersions]
	if up, ok := r.upgradesBy[key]; ok {
		return up, nil
	}
	// Unreadable, it is compared by the revision alone: only Kausality
	// writes it.
	prev, err := logic.Of(ann)
	var up *upgrade
	if cs := logic.Changes(prev, r.logic); len(cs) > 0 {
		pu := policy.Upgrade{Revision: r.rev, Changes: cs}
		by := policy.UpgradesFor(r.upgrades, pu)
		up = &upgrade{changes: cs, bound: policy.UpgradeBound(r.upgrades, pu), base: r.upgradeTrace(by), by: by}
	}
	if r.upgradesBy == nil {
		r.upgradesBy = map[string]*upgrade{}
	}
	r.upgradesBy[key] = up
	return up, err
}

// upgradeTrace is the chain of a change the new logic made on its own: the
// first UpgradeAllowance naming it, then the XR.
func (r *run) upgradeTrace(us []v1alpha1.UpgradeAllowance) allowance.Trace {
	var t allowance.Trace
	if len(us) > 0 {
		t = append(t, allowance.UpgradeHop(us[0].GetName(), us[0].GetGeneration()))
	}
	return append(t, r.xrHop())
}

// composedLogic is the logic that produced the XR's composed resources as
// observed: that of the first, by name, that records one. A resource the
// pipeline adds is compared with it.
func composedLogic(observed map[resource.Name]resource.ObservedComposed) map[string]string {
	var first resource.Name
	var found *resource.ObservedComposed
	for name, o := range observed {
		// Read in place: copying every resource's annotations to choose
		// one was a thirtieth of a run.
		md, _ := o.Resource.Object["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if rev, _ := ann[v1alpha1.AnnotationCompositionRevision].(string); rev == "" || (found != nil && name > first) {
			continue
		}
		first, found = name, &o
	}
	if found == nil {
		return nil
	}
	return found.Resource.GetAnnotations()
}

// stampLogic records on a composed resource the logic that produced it:
// the run's, unless nothing was let through and the resource's change is
// withheld or held, when it keeps its old record, so that an
// UpgradeAllowance made later still applies to the change.
func (r *run) stampLogic(ann map[string]string, om childMeta, ch change) {
	rev, fns, ins := r.revision, r.functions, r.inputs
	if len(ch.passed) == 0 && om.ann[v1alpha1.AnnotationCompositionRevision] != "" && (len(ch.held) > 0 || ch.withholds()) {
		rev, fns, ins = om.ann[v1alpha1.AnnotationCompositionRevision], om.ann[v1alpha1.AnnotationFunctionVersions], om.ann[v1alpha1.AnnotationInputVersions]
	}
	// What this run does not know (no Functions supplied, say) keeps the
	// record it has: dropping it would hide the next upgrade.
	if rev == "" {
		rev = om.ann[v1alpha1.AnnotationCompositionRevision]
	}
	if fns == "" {
		fns = om.ann[v1alpha1.AnnotationFunctionVersions]
	}
	if ins == "" {
		ins = om.ann[v1alpha1.AnnotationInputVersions]
	}
	if ins != "" {
		ann[v1alpha1.AnnotationInputVersions] = ins
	}
	if rev != "" {
		ann[v1alpha1.AnnotationCompositionRevision] = rev
	}
	if fns != "" {
		ann[v1alpha1.AnnotationFunctionVersions] = fns
	}
}

// olderLogic reports whether ann, a composed resource's annotations as
// stamped (stampLogic), record other logic than the run's: its change is
// withheld or held, so the XR is behind its logic.
func (r *run) olderLogic(ann map[string]string) bool {
	rev, fns, ins := ann[v1alpha1.AnnotationCompositionRevision], ann[v1alpha1.AnnotationFunctionVersions], ann[v1alpha1.AnnotationInputVersions]
	return rev != r.revision || (r.functions != "" && fns != r.functions) || (r.inputs != "" && ins != r.inputs)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
