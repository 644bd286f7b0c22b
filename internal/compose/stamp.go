package compose

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// The stamping stage: from the final decision about a composed resource, the
// annotations, gated label and managementPolicies it is answered with.

// stamp is what the function writes onto a composed resource it gates or
// records: its annotations (the pipeline's and Kausality's), when gated
// the gated label, and the spec.managementPolicies the gate formula sets
// (nil: the pipeline's stay, for a resource Kausality records but does not
// gate; a gated one always has them, as gate.Compute never answers nil).
// It is kept beside the resource, not written into it, so that a resource
// answered with the request's own Struct values has only these encoded,
// from these strings.
type stamp struct {
	annotations map[string]string
	gated       bool
	policies    []string
	// writes: the run changes the resource's spec (creates it, lets a
	// change through or releases one), so it is written whatever its
	// stamp says (leaveAsStored).
	writes bool
	// closing is the resource as observed when this run closes only its
	// gate (gate.Config.Overdue): the answer is it, its spec, labels and
	// annotations unchanged, with policies as the gate.
	closing map[string]any
}

// body is the spec a composed resource is answered with (change.object):
// the desired one, or, when rewritten, spec (the whole content when
// whole).
type body struct {
	rewritten, whole bool
	spec             any
}

// labels are obj's labels with the gated label.
func (s stamp) labels(obj map[string]any) map[string]string {
	labels := (&unstructured.Unstructured{Object: obj}).GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelGated] = "true"
	return labels
}

// finish completes v, the verdict on one composed resource whose change
// (v.ch) propagation control has paced: the records the change leaves on
// the resource (applied, superseded, previous, abandoned), its stamp (nil:
// none), what its gate keeps shut, and what the XR reports of it. A
// resource whose creation is refused is not answered: nothing is stamped.
func (r *run) finish(v *verdict) {
	it, ch := v.it, &v.ch
	if !it.ok {
		return
	}
	dm, om, observed := it.dm, it.om, it.observed
	have, superseded := v.answered()
	gated := r.gated(dm)
	var abandoned []withheld
	if !ch.create {
		ch.superseded = superseded
		ch.applied = nextApplied(ch.owned, ch.wanted, append(slices.Clone(ch.withheld), ch.held...))
		if gated {
			abandoned, ch.previous, v.problems = r.revertAbandoned(it, ch)
		}
	}
	desired := ch.object(it.desired)

	// An audited resource is stamped as a restricted one is: traced, its
	// gate left to the pipeline.
	restricted := r.restricted(dm.child) || r.audited(dm)
	if !restricted && !gated {
		v.unrestricted = r.unrestrictedLine(dm)
		return
	}
	// dm.ann is metaOf's copy of desired's annotations: stamp that, with
	// the pipeline's own annotations of a kind without a gate as this run
	// leaves them (some kept as observed: policy.Content).
	ann := dm.ann
	if ch.rewritten && ch.whole {
		own, _ := ch.spec.(map[string]any)["metadata"].(map[string]any)
		ann = policy.WithOwn(ann, own["annotations"])
	}
	if ann == nil {
		ann = make(map[string]string, stampedAnnotations)
	}
	ann[v1alpha1.AnnotationApplied] = ch.applied.String()
	if g := r.composedGeneration(om, untouched(ch)); g > 0 {
		ann[v1alpha1.AnnotationComposedGeneration] = strconv.FormatInt(g, 10)
	} else {
		delete(ann, v1alpha1.AnnotationComposedGeneration) // it has none: no step may forge one
	}
	var policies, problems []string
	switch {
	case gated:
		// The gate is never wider than what the steps before asked for
		// (DESIGN §5); admission and the gate controller read the request
		// back from the annotation.
		// Without a request (every action, the providers' default) the
		// resource carries no record.
		cfg := r.cfg.gate
		cfg.Requested, cfg.RequestedErr = gate.Requested(it.desired)
		if cfg.RequestedErr != nil {
			cfg.Requested = []string{}
			cfg.RequestedErr = errors.Wrapf(cfg.RequestedErr, "the pipeline's desired %s", ref(it.desired))
		}
		if len(ch.abandoned) > 0 {
			ann[v1alpha1.AnnotationAbandoned] = ch.abandoned.String()
		} else {
			delete(ann, v1alpha1.AnnotationAbandoned) // no step may forge one
		}
		if cfg.Requested != nil {
			ann[v1alpha1.AnnotationRequestedPolicies] = gate.FormatRequested(cfg.Requested)
		} else {
			delete(ann, v1alpha1.AnnotationRequestedPolicies) // no step may forge one
		}
		var reports []withheld
		reports, policies, problems = r.gate(cfg, dm, om, observed, desired, ann, *ch, have)
		v.reports = abandoned
		v.reports = append(v.reports, reports...)
		v.problems = append(v.problems, problems...)
		if !cfg.Opens(policies) && cfg.Overdue(observed, it.have, r.now) {
			v.stamp = &stamp{gated: true, policies: policies, closing: observed}
			v.reports = append(v.reports, r.overdue(dm))
			return
		}
	case restricted:
		// Without a policy for its cloud resource the pipeline owns this
		// resource's managementPolicies; Kausality still records what it
		// let through.
		ann[v1alpha1.AnnotationTrace], problems = r.traceFor(dm, om, *ch)
		v.problems = append(v.problems, problems...)
		r.stampLogic(ann, om, *ch)
	}
	// What an earlier run recorded it left as stored stays as the
	// resource keeps it, whatever a step sets: leaveAsStored adds to it.
	if s := om.ann[v1alpha1.AnnotationLeftAsStored]; s != "" {
		ann[v1alpha1.AnnotationLeftAsStored] = s
	} else {
		delete(ann, v1alpha1.AnnotationLeftAsStored)
	}
	v.stamp = &stamp{annotations: ann, gated: gated, policies: policies, writes: ch.create || len(ch.passed) > 0 || len(ch.released) > 0}
}

// answered is the resource's allowances as the verdict answers them: the
// stored ones, with the pending ones its desired state no longer wants
// marked consumed (supersede), and those superseded; a creation has none
// to supersede.
func (v *verdict) answered() (have, superseded []allowance.Allowance) {
	if v.ch.create {
		return v.it.have, nil
	}
	return supersede(v.it.have, v.ch.wanted, v.ch.released)
}

// supersede marks consumed the pending allowances of have whose change
// desired no longer wants (the latest desired state wins, as with a
// Deployment: a revert or a newer change halts the older one), so they
// neither wait for ever nor keep the resource from counting as updated.
// Those released this run are let through instead.
//
// rec is the record of the spec the pipeline wants.
func supersede(have []allowance.Allowance, rec mutation.Applied, released []allowance.Allowance) (out, superseded []allowance.Allowance) {
	out = have
	for i, a := range have {
		if !a.IsPending() || a.Consumed || slices.ContainsFunc(released, a.Same) {
			continue
		}
		if wants(rec, a.Pending) {
			continue
		}
		if &out[0] == &have[0] { // copy on first write
			out = slices.Clone(have)
		}
		out[i].Consumed = true
		superseded = append(superseded, out[i])
	}
	return out, superseded
}

// wants reports whether rec, the record of a desired spec, still sets
// every value of a pending record.
func wants(rec mutation.Applied, pending map[string]string) bool {
	for k, h := range pending {
		if h != allowance.Absent {
			if rec[k] != h {
				return false
			}
			continue
		}
		if rec.Owns(k) {
			return false
		}
	}
	return true
}

// overdue reports a gate found open past maxGateOpen: the run answers the
// resource as observed with only its gate closed, a write the API server
// admits while the provider is down (gate.Config.Overdue), and whatever
// else this run would change of it waits for the next run.
func (r *run) overdue(dm childMeta) withheld {
	return withheldOf(dm, "close gate", "", metrics.ReasonGateOverdue,
		fmt.Sprintf("its gate stayed open longer than maxGateOpen (%s) and the provider has not closed it: this run closes only the gate, which the API server admits without the provider; the resource's other changes wait for the next run", r.cfg.gate.Defaulted().MaxOpen))
}

// unrestrictedLine is what the XR says of a composed managed resource that
// is neither restricted nor gated although some policy is for its XR: no
// policy names its kind, so nothing Kausality does holds its changes back,
// and the XR must say so rather than look protected. "" for any other
// resource.
func (r *run) unrestrictedLine(dm childMeta) string {
	if dm.child.Class != policy.ClassManaged || policy.IsComposite(dm.obj.Object) || policy.IsClaim(dm.obj.Object) || len(r.set.Names()) == 0 {
		return ""
	}
	return fmt.Sprintf("%s (%s %s) is a managed resource of a kind no AllowancePolicy for %s names (%s): Kausality does not gate it, so its changes reach the cloud without a cause; add its kind to a policy (kubectl kausality policy derive, policy check)",
		dm.resName, dm.child.Kind, dm.child.APIGroup, ref(r.xr.Object), strings.Join(r.set.Names(), ", "))
}

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

// composedGeneration is the composite generation the resource records as
// composed from (0: none). A resource the run leaves untouched keeps its
// own record: the XR's KausalityComposed condition records that this run
// composed it (reportComposed), so a write of the record alone, a watch
// event Crossplane's circuit breaker charges the XR for every composed
// resource a change leaves alone, is not needed. A resource written anyway
// records the XR's generation when some allowance of the XR was not yet
// composed for it (its generation is later than what it was composed
// from) or it was never composed, and otherwise what it was composed
// from: keeping that where no allowance needs a new one decides nothing
// differently, and Crossplane's own writes to the XR (recording resource
// references raises its generation) then do not rewrite the resource. A
// record ahead of the XR (an XR recreated under the same name) is
// replaced either way.
func (r *run) composedGeneration(om childMeta, untouched bool) int64 {
	gen := r.xr.GetGeneration()
	if untouched && om.own <= gen {
		return om.own
	}
	if om.from <= 0 || om.from > gen || slices.ContainsFunc(r.allowances, func(a allowance.Allowance) bool { return a.Generation > om.from }) {
		return gen
	}
	return om.from
}

// untouched reports whether ch leaves its resource's spec and gate to the
// stored ones: nothing let through, held back or released, no creation.
// Its answer changes at most Kausality's records of it.
func untouched(ch *change) bool {
	return !ch.create && len(ch.passed) == 0 && len(ch.held) == 0 && len(ch.released) == 0
}
