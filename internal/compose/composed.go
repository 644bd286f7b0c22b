package compose

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// childMeta reads what the function needs of a composed resource.
type childMeta struct {
	resName    string // the composition resource name
	obj        *unstructured.Unstructured
	child      policy.Child
	name       string // metadata.name, or the pipeline name for new resources
	generation int64
	ann        map[string]string
	// from is, for an observed resource, the XR generation it was last
	// composed from: XR allowances of that generation or earlier are used
	// up for it. 0 for a resource not yet composed.
	from int64
}

func (r *run) metaOf(resName string, obj map[string]any) childMeta {
	u := unstructured.Unstructured{Object: obj}
	name := u.GetName()
	if name == "" {
		name = resName
	}
	return childMeta{resName: resName, obj: &u, child: r.childOf(u.GetAPIVersion(), u.GetKind()), name: name, generation: u.GetGeneration(), ann: u.GetAnnotations()}
}

// childOf is the kind's Child as the policies' status resolved it
// (policy.Kinds), worked out once a run for each kind: an XR composes many
// resources of few kinds.
func (r *run) childOf(apiVersion, kind string) policy.Child {
	key := [2]string{apiVersion, kind}
	if c, ok := r.children[key]; ok {
		return c
	}
	if r.children == nil {
		r.children = map[[2]string]policy.Child{}
	}
	c := r.kinds.ChildOf(apiVersion, kind)
	r.children[key] = c
	return c
}

// change is what the function lets through to one composed resource.
type change struct {
	create   bool                 // the resource is being created
	passed   []mutation.Mutation  // mutations let through; Insert at "" for a creation
	covered  []mutation.Mutation  // those of passed an allowance or policy permits (not Log mode's)
	upgrades []mutation.Mutation  // those of covered an UpgradeAllowance permits
	chosen   *allowance.Allowance // the XR allowance that justifies them
	upgrade  *upgrade             // the logic change whose UpgradeAllowances let upgrades (or the creation) through
	applied  mutation.Applied     // the record of what was let through, after this run
	owned    mutation.Applied     // the record before this run: what Crossplane's apply owns
	owns     func(string) bool    // owned.Owner(), indexed once for the diff and the gate

	wanted   mutation.Applied      // what the pipeline wants, before anything is withheld
	withheld []mutation.Mutation   // mutations no allowance covers
	released []allowance.Allowance // the resource's pending allowances that cover passed
	// superseded are its pending allowances this run marked consumed.
	superseded []allowance.Allowance
	// held are the covered mutations propagation control holds back, and
	// pending the values they set (Allowance.Pending).
	held    []mutation.Mutation
	pending map[string]string
	// reports are the changes it withholds (or, in Log mode, would have
	// withheld), as the XR reports them; decideAll adds them to the run's.
	reports []withheld
	// rewritten: this run kept observed values in the spec. spec is that
	// spec, a copy (the pipeline's desired resource is never edited), and
	// the resource is encoded whole.
	rewritten bool
	spec      any
}

// object is desired as this change leaves it: with the spec it rewrote, or
// desired itself. Only the top level is copied; read it, do not write it.
func (ch change) object(desired map[string]any) map[string]any {
	if !ch.rewritten {
		return desired
	}
	obj := maps.Clone(desired)
	obj["spec"] = ch.spec
	if ch.spec == nil {
		delete(obj, "spec")
	}
	return obj
}

// desiredRecord is a copy of the record of the desired spec as it leaves
// this run (gate.SpecRecord), when the run already made it: nothing was
// withheld or held, so desired is what the pipeline wanted. Nil otherwise.
// Hashing every leaf again is the largest cost of deciding a gate.
func (ch change) desiredRecord() mutation.Applied {
	switch {
	case len(ch.withheld) > 0 || len(ch.held) > 0:
		return nil
	case ch.create:
		return maps.Clone(ch.applied)
	case ch.wanted != nil:
		return maps.Clone(ch.wanted)
	}
	return nil
}

// item is one desired composed resource between deciding its change and
// stamping its gate, so propagation control can see all of them at once.
type item struct {
	resName           string
	observed, desired map[string]any
	dm, om            childMeta
	have              []allowance.Allowance // its allowances as observed
	ch                change
	ok                bool // false: it must not be created
	// pendingCreate is its pending Create allowance: its creation was held
	// back, so it exists in Kubernetes behind a closed gate and not yet in
	// the cloud.
	pendingCreate *allowance.Allowance
}

// decide works out what may change in one desired composed resource
// against its observed state (nil: not created yet). It reads both and
// writes neither: what it withholds keeps its observed value in the
// change's own copy of the spec (change.object).
func (r *run) decide(resName string, observed, desired map[string]any) *item {
	it := &item{resName: resName, observed: observed, desired: desired, dm: r.metaOf(resName, desired), ok: true}
	if observed != nil {
		it.om = r.metaOf(resName, observed)
		it.om.from = allowance.ComposedGeneration(observed)
		var err error
		if it.have, err = allowance.Parse(it.om.ann[v1alpha1.AnnotationAllowances]); err != nil {
			r.problem(errors.Wrapf(err, errFmtParseAllowancesGateClosed, v1alpha1.AnnotationAllowances, ref(observed)))
		}
	}
	if observed == nil {
		it.ch, it.ok = r.create(it.dm, desired)
	} else {
		it.ch = r.update(it.dm, it.om, observed, desired, it.have)
		for i, a := range it.have {
			if a.IsPending() && !a.Consumed && a.HasVerb(v1alpha1.VerbCreate) {
				it.pendingCreate = &it.have[i]
				break
			}
		}
	}
	return it
}

// finish works out the stamp the change earns for one decided composed
// resource (nil: none) and what its gate keeps shut, as reported, and
// returns false when it must not be created at all.
func (r *run) finish(it *item) (_ *stamp, reports []withheld, ok bool) {
	if !it.ok {
		return nil, nil, false
	}
	dm, om, observed, desired, ch := it.dm, it.om, it.observed, it.ch.object(it.desired), it.ch
	if !ch.create {
		it.have, ch.superseded = supersede(it.have, ch.wanted, ch.released)
		ch.applied = nextApplied(ch.owned, ch.wanted, append(slices.Clone(ch.withheld), ch.held...))
	}

	restricted := r.restricted(dm.child)
	gated := r.gated(dm)
	if !restricted && !gated {
		return nil, nil, true
	}
	// dm.ann is metaOf's copy of desired's annotations: stamp that.
	ann := dm.ann
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v1alpha1.AnnotationApplied] = ch.applied.String()
	ann[v1alpha1.AnnotationComposedGeneration] = strconv.FormatInt(r.xr.GetGeneration(), 10)
	var policies []string
	switch {
	case gated:
		reports, policies = r.gate(dm, om, observed, desired, ann, ch, it.have)
	case restricted:
		// Without a policy for its cloud resource the pipeline owns this
		// resource's managementPolicies; Kausality still records what it
		// let through.
		ann[v1alpha1.AnnotationTrace] = r.traceFor(dm, om, ch)
		r.stampLogic(ann, om, ch)
	}
	return &stamp{annotations: ann, gated: gated, policies: policies}, reports, true
}

// create decides a resource the pipeline wants and that does not exist yet.
func (r *run) create(dm childMeta, desired map[string]any) (change, bool) {
	d := r.permitAdded(dm.child)
	var reports []withheld
	if !d.ok {
		w := withheldOf(dm, v1alpha1.VerbCreate, "", d.code, d.reason)
		if !r.log {
			return change{reports: []withheld{w}}, false
		}
		w.logOnly = true
		reports = append(reports, w)
	}
	return change{
		reports: reports,
		create:  true,
		passed:  []mutation.Mutation{{Path: "", Verb: v1alpha1.MutationInsert}},
		chosen:  d.by,
		upgrade: d.upgrade,
		applied: mutation.Record("spec", desired["spec"], skipManaged),
	}, true
}

// update decides each mutation from observed to desired, keeps the observed
// value of those withheld, and records what was let through.
func (r *run) update(dm, om childMeta, observed, desired map[string]any, have []allowance.Allowance) change {
	applied, err := mutation.ParseApplied(om.ann[v1alpha1.AnnotationApplied])
	if err != nil {
		r.problem(errors.Wrapf(err, errFmtParseApplied, v1alpha1.AnnotationApplied, ref(observed)))
	}
	// What the pipeline wants, before anything is withheld, is what the
	// applied record remembers for the fields let through.
	wanted := mutation.Record("spec", desired["spec"], skipManaged)
	var ch change
	var withheld []mutation.Mutation
	up := r.upgradeOf(om.ann)
	owns := applied.Owner()
	for _, m := range mutation.Diff("spec", observed["spec"], desired["spec"], mutation.WithOwned(owns), mutation.WithSkip(skipManaged)) {
		v, present := mutation.Value(desired, m.Path)
		d := r.permitMutation(dm.child, om.from, m, applied.Unchanged(m.Path, v, present), up)
		if !d.ok {
			if p := pendingCovering(have, m, v, present); p != nil {
				// Its chain, up to the XR, is what the trace continues.
				by := *p
				by.Trace = p.Trace.Parent()
				d = decision{ok: true, by: &by}
				if !slices.ContainsFunc(ch.released, p.Same) {
					ch.released = append(ch.released, *p)
				}
			}
		}
		switch {
		case d.ok:
			ch.passed = append(ch.passed, m)
			ch.covered = append(ch.covered, m)
			if d.upgrade != nil {
				ch.upgrade = d.upgrade
				ch.upgrades = append(ch.upgrades, m)
			}
			if ch.chosen == nil {
				ch.chosen = d.by
			}
		case r.log:
			w := withheldOf(dm, string(m.Verb), m.Path, d.code, d.reason)
			w.logOnly = true
			ch.reports = append(ch.reports, w)
			ch.passed = append(ch.passed, m)
		default:
			ch.reports = append(ch.reports, withheldOf(dm, string(m.Verb), m.Path, d.code, d.reason))
			withheld = append(withheld, m)
		}
	}
	keepObserved(r, observed, desired, withheld, &ch)
	ch.wanted, ch.withheld, ch.owned, ch.owns = wanted, withheld, applied, owns
	return ch
}

// keepObserved makes ch's spec desired's with the mutations ms at their
// observed values, in a copy: desired is what the pipeline wants and stays
// so. When it cannot keep a field as observed it withholds the whole
// resource's spec rather than let the field through.
func keepObserved(r *run, observed, desired map[string]any, ms []mutation.Mutation, ch *change) {
	if len(ms) == 0 {
		return
	}
	kept := map[string]any{}
	if spec, ok := desired["spec"]; ok {
		kept["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	ch.rewritten = true
	if err := mutation.Revert(kept, observed, ms); err != nil {
		r.problem(errors.Wrapf(err, errFmtWithholdChanges, ref(observed)))
		kept = runtimeCopy(observed)
		ch.passed = nil
	}
	ch.spec = kept["spec"]
}

// gate stamps the External allowances the change earns onto a gated
// resource and prunes consumed ones. It returns what the gate keeps shut,
// as reported, and the managementPolicies the gate formula sets.
func (r *run) gate(dm, om childMeta, observed, desired map[string]any, ann map[string]string, ch change, have []allowance.Allowance) ([]withheld, []string) {
	as := r.stampExternal(dm, om, have, ch)
	g := r.cfg.gate.DecideRecording(desired, observed, func(desired map[string]any) mutation.Applied {
		return appliedSpec(desired, observed, ch.owns, ch.desiredRecord())
	}, as, r.now, r.frozen)
	var reports []withheld
	if len(g.Withheld) > 0 {
		reports = append(reports, withheldOf(dm, "open gate", "", metrics.ReasonFrozen, fmt.Sprintf("%s is frozen by %s", ref(r.xr.Object), r.frozen)))
	}
	for _, p := range g.Uncovered {
		reports = append(reports, withheldOf(dm, "open gate", p, metrics.ReasonUncovered, fmt.Sprintf("changed since generation %d was let through to the cloud and no open allowance covers it; it would ride along with the allowed change", g.Approved.Generation)))
	}
	if g.Approves {
		// Otherwise admission keeps the stored approval.
		maps.Copy(ann, g.Approved.Annotations())
	}
	if g.Err != nil {
		reports = append(reports, withheldOf(dm, "open gate", "", metrics.ReasonGateError, g.Err.Error()))
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
	ann[v1alpha1.AnnotationTrace] = r.traceFor(dm, om, ch)
	// The logic record stays put while anything of the change is kept
	// back, the gate's own holds included.
	ch.reports = slices.Concat(ch.reports, reports)
	r.stampLogic(ann, om, ch)
	return reports, g.Policies
}

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

// appliedSpec is the record of the spec Crossplane's server-side apply of
// desired leaves on observed: desired's fields, and those of observed's the
// pipeline never set (owns: what it last applied), such as defaults the
// API server filled in, which the apply does not remove. The gate compares
// it with what was approved, so those fields are not pending changes.
//
// rec is the record of desired's spec when the caller has it (see
// change.desiredRecord), nil to record it here.
func appliedSpec(desired, observed map[string]any, owns func(string) bool, rec mutation.Applied) mutation.Applied {
	if rec == nil {
		rec = gate.SpecRecord(desired)
	}
	if observed == nil {
		return rec
	}
	if owns == nil { // nothing recorded: the pipeline owns nothing yet
		owns = mutation.Applied(nil).Owns
	}
	// Only observed's leaves desired lacks are read (and hashed).
	kept := mutation.Record("spec", observed["spec"], func(p string) bool {
		_, set := rec[p]
		return set || gate.IsGatePath(p)
	})
	for k, h := range kept {
		if !owns(k) {
			rec[k] = h
		}
	}
	return rec
}

// skipManaged leaves the gate out of diffs and applied records: Kausality
// owns it.
var skipManaged = gate.IsGatePath

// nextApplied is the record after this run: what the pipeline wanted for the
// fields let through, and the previous record for the fields withheld, so a
// withheld change is still recognised as propagation next time. next is
// the decision's and stays as it is; what is withheld is edited in a copy.
func nextApplied(prev mutation.Applied, next mutation.Applied, withheld []mutation.Mutation) mutation.Applied {
	if len(withheld) > 0 {
		next = maps.Clone(next)
	}
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

func runtimeCopy(obj map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
}
