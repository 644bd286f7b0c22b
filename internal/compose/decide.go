package compose

import (
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// The deciding stage: what may change in each composed resource, as a
// change that carries its own copy of what it keeps (verdict.go gives the
// verdict on it).

// change is what the function lets through to one composed resource.
type change struct {
	create   bool                 // the resource is being created
	passed   []mutation.Mutation  // mutations let through; Insert at "" for a creation
	covered  []mutation.Mutation  // those of passed an allowance or policy permits (not Log mode's)
	upgrades []mutation.Mutation  // those of covered an UpgradeAllowance permits
	chosen   *allowance.Allowance // the XR allowance that justifies them
	upgrade  *upgrade             // the logic change whose UpgradeAllowances let upgrades (or the creation) through
	creation bool                 // the XR's creation let some of passed through (decision.creation)
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
	// withheld), as the XR reports them (decideAll gathers them).
	reports []withheld
	// rewritten: this run kept observed values in the spec. spec is that
	// spec, a copy (the pipeline's desired resource is never edited), and
	// the resource is encoded whole. whole: spec holds every top-level
	// field but the object's meta (content), not the spec.
	rewritten, whole bool
	spec             any
	// previous are the entries of the resource's previous-values record
	// still in flight after this run (revertAbandoned), before what it
	// lets through is added (recordPrevious).
	previous mutation.Previous
	// abandoned is the resource's record of changes abandoned on it, as
	// stored; revertAbandoned works out what it records after this run.
	abandoned mutation.Previous
}

// body is the spec this change answers the resource with.
func (ch change) body() body { return body{rewritten: ch.rewritten, whole: ch.whole, spec: ch.spec} }

// object is desired as this change leaves it: with the spec it rewrote, or
// desired itself. Only the top level is copied; read it, do not write it.
func (ch change) object(desired map[string]any) map[string]any {
	if !ch.rewritten {
		return desired
	}
	return withSpec(desired, true, ch.whole, ch.spec)
}

// desiredRecord is the record of the desired spec as it leaves this run
// (gate.SpecRecord), when the run already made it: nothing was withheld
// or held, so desired is what the pipeline wanted. Nil otherwise. It is
// the change's own: read it, do not write it. Hashing every leaf again is
// the largest cost of deciding a gate.
func (ch change) desiredRecord() mutation.Applied {
	switch {
	case len(ch.withheld) > 0 || len(ch.held) > 0:
		return nil
	case ch.create:
		return ch.applied
	}
	return ch.wanted
}

// item is one desired composed resource as decide left it: what would
// change in it (ch), before propagation control paces the changes of all
// of them at once (pace) and its verdict is given (verdictOf); neither
// edits its change.
type item struct {
	resName           string
	observed, desired map[string]any
	dm, om            childMeta
	have              []allowance.Allowance // its allowances as observed
	ch                change                // what would change, before propagation control
	ok                bool                  // false: it must not be created
	// pendingCreate is its pending Create allowance: its creation was held
	// back, so it exists in Kubernetes behind a closed gate and not yet in
	// the cloud.
	pendingCreate *allowance.Allowance
	// problems are the malformed input deciding it met, one line each, for
	// the XR's report; each is resolved towards withholding. What the
	// run's shared lookups met first (its logic record, a roll-out's
	// blockers and turn), then its own annotations.
	problems []string
}

// decide works out what may change in one desired composed resource
// against its observed state (nil: not created yet). It reads both and
// writes neither: what it withholds keeps its observed value in the
// change's own copy of the spec (change.object).
func (r *run) decide(resName string, observed, desired map[string]any) *item {
	it := &item{resName: resName, observed: observed, desired: desired, dm: r.desiredMetaOf(resName, desired), ok: true}
	if observed != nil {
		it.om = r.observedMetaOf(resName, observed)
		var err error
		if it.have, err = allowance.Parse(it.om.ann[v1alpha1.AnnotationAllowances]); err != nil {
			it.problems = append(it.problems, errors.Wrapf(err, errFmtParseAllowancesGateClosed, v1alpha1.AnnotationAllowances, ref(observed)).Error())
		}
	}
	if observed == nil {
		it.ch, it.ok, it.problems = r.create(it.dm, desired)
		return it
	}
	ch, lookups, problems := r.update(it.dm, it.om, observed, desired, it.have)
	it.ch, it.problems = ch, slices.Concat(lookups, it.problems, problems)
	it.pendingCreate = pendingCreate(it.have)
	return it
}

// create decides a resource the pipeline wants and that does not exist
// yet. It returns what deciding it could not read (decision.problems).
func (r *run) create(dm childMeta, desired map[string]any) (_ change, ok bool, problems []string) {
	prefix, value := content(dm.child, desired)
	d := r.permitAdded(dm.child)
	var reports []withheld
	if !d.ok {
		w := withheldOf(dm, v1alpha1.VerbCreate, "", d.code, d.reason)
		if !r.log {
			return change{reports: []withheld{w}}, false, d.problems
		}
		w.logOnly, w.audit = true, r.audit
		reports = append(reports, w)
	}
	return change{
		reports:  reports,
		create:   true,
		passed:   []mutation.Mutation{{Path: "", Verb: v1alpha1.MutationInsert}},
		chosen:   d.by,
		upgrade:  d.upgrade,
		creation: d.creation,
		applied:  mutation.Record(prefix, value, skipManaged),
	}, true, d.problems
}

// update decides each mutation from observed to desired, keeps the observed
// value of those withheld, and records what was let through. It returns
// the malformed input it met, one line each: lookups, what the run's
// shared lookups met (upgradeOf, decision.problems), and problems, what
// the resource itself holds.
func (r *run) update(dm, om childMeta, observed, desired map[string]any, have []allowance.Allowance) (_ change, lookups, problems []string) {
	applied, abandoned, problems := records(om.ann, observed)
	// What the pipeline wants, before anything is withheld, is what the
	// applied record remembers for the fields let through.
	prefix, want := content(dm.child, desired)
	_, was := content(dm.child, observed)
	if w, ok := want.(map[string]any); ok && dm.child.Class == policy.ClassUnmanaged {
		if o, ok := was.(map[string]any); ok {
			policy.AlignContent(o, w)
		}
	}
	wanted := mutation.Record(prefix, want, skipManaged)
	var ch change
	var withheld []mutation.Mutation
	up, err := r.upgradeOf(om.ann)
	if err != nil {
		lookups = append(lookups, err.Error())
	}
	owns := applied.Owner()
	opts := []mutation.DiffOption{mutation.WithOwned(owns), mutation.WithSkip(skipManaged)}
	if policy.BuiltIn(dm.child.APIGroup) {
		opts = append(opts, mutation.WithMergedLists())
	}
	for _, m := range mutation.Diff(prefix, was, want, opts...) {
		v, present := mutation.Value(desired, m.Path)
		d := r.permitMutation(dm.child, om.from, m, applied.Unchanged(m.Path, v, present), up)
		lookups = append(lookups, d.problems...)
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
			ch.creation = ch.creation || d.creation
			if d.upgrade != nil {
				ch.upgrade = d.upgrade
				ch.upgrades = append(ch.upgrades, m)
			}
			if ch.chosen == nil {
				ch.chosen = d.by
			}
		case r.log:
			w := withheldOf(dm, string(m.Verb), m.Path, d.code, d.reason)
			w.logOnly, w.audit = true, r.audit
			ch.reports = append(ch.reports, w)
			ch.passed = append(ch.passed, m)
		default:
			if stillAbandoned(abandoned, desired, m.Path) {
				// Its cause was spent on it already: say so, not only
				// that none is left.
				d.code, d.reason = metrics.ReasonUnapplied, errUnapplied
			}
			ch.reports = append(ch.reports, withheldOf(dm, string(m.Verb), m.Path, d.code, d.reason))
			withheld = append(withheld, m)
		}
	}
	if err := keepObserved(dm.child, observed, desired, withheld, &ch); err != nil {
		problems = append(problems, err.Error())
	}
	ch.wanted, ch.withheld, ch.owned, ch.owns, ch.abandoned = wanted, withheld, applied, owns, abandoned
	return ch, lookups, problems
}

// records are the records of what was let through to a composed resource
// (kausality.io/applied) and of the changes abandoned on it, as its
// annotations ann hold them, and those it could not read.
func records(ann map[string]string, observed map[string]any) (applied mutation.Applied, abandoned mutation.Previous, problems []string) {
	applied, err := mutation.ParseApplied(ann[v1alpha1.AnnotationApplied])
	if err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtParseApplied, v1alpha1.AnnotationApplied, ref(observed)).Error())
	}
	abandoned, err = mutation.ParsePrevious(ann[v1alpha1.AnnotationAbandoned])
	if err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtParseAbandoned, v1alpha1.AnnotationAbandoned, ref(observed)).Error())
	}
	return applied, abandoned, problems
}

// keepObserved makes ch's spec (content, for a kind of c) desired's with
// the mutations ms at their observed values, in a copy: desired is what
// the pipeline wants and stays so. When it cannot keep a field as observed
// it withholds the whole resource's content rather than let the field
// through, and returns why.
func keepObserved(c policy.Child, observed, desired map[string]any, ms []mutation.Mutation, ch *change) error {
	if len(ms) == 0 {
		return nil
	}
	whole := c.Class == policy.ClassUnmanaged
	kept := map[string]any{}
	if whole {
		for k, v := range policy.Content(desired) {
			kept[k] = runtime.DeepCopyJSONValue(v)
		}
	} else if spec, ok := desired["spec"]; ok {
		kept["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	ch.rewritten, ch.whole = true, whole
	err := mutation.Revert(kept, observed, ms)
	if err != nil {
		kept = runtimeCopy(observed)
		ch.passed = nil
	}
	if whole {
		ch.spec = policy.Content(kept)
	} else {
		ch.spec = kept["spec"]
	}
	return errors.Wrapf(err, errFmtWithholdChanges, ref(observed))
}

// content is what the function compares, records and withholds of a
// composed resource of kind c, and the path prefix its mutations start
// with: the spec; or, for a kind without a gate and so perhaps without a
// spec (a Secret holds data, a Role rules), every top-level field but
// apiVersion, kind, metadata and status, and the labels and annotations
// the pipeline sets (policy.Content), at paths from the object's root.
func content(c policy.Child, obj map[string]any) (prefix string, value any) {
	if c.Class != policy.ClassUnmanaged {
		return "spec", obj["spec"]
	}
	if obj == nil {
		return "", nil
	}
	return "", policy.Content(obj)
}

// skipManaged leaves the gate out of diffs and applied records: Kausality
// owns it.
var skipManaged = gate.IsGatePath

func runtimeCopy(obj map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
}

// pendingCreate is the first of have that is a pending, unconsumed Create
// allowance (propagation control held the creation back), nil when none.
func pendingCreate(have []allowance.Allowance) *allowance.Allowance {
	for i, a := range have {
		if a.IsPending() && !a.Consumed && a.HasVerb(v1alpha1.VerbCreate) {
			return &have[i]
		}
	}
	return nil
}

// pendingCovering is the pending allowance of have that covers mutation
// m with the value desired now has at its path (v, present), or nil: the
// change it was issued for, and no other.
func pendingCovering(have []allowance.Allowance, m mutation.Mutation, v any, present bool) *allowance.Allowance {
	for i, a := range have {
		if !a.IsPending() || a.Consumed || !mutation.BoundsOf(a.Mutations).Covers(m) {
			continue
		}
		if !present {
			if a.Pending[m.Path] == allowance.Absent {
				return &have[i]
			}
			continue
		}
		rec := mutation.Applied{}
		for k, h := range a.Pending {
			if h != allowance.Absent {
				rec[k] = h
			}
		}
		if rec.Unchanged(m.Path, v, true) {
			return &have[i]
		}
	}
	return nil
}
