package compose

import (
	"maps"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// loadComposed reads what earlier runs recorded they left as stored
// (allowance.Composed): the XR's KausalityComposed condition into
// r.composed, and the latest generation the observed resources'
// kausality.io/left-as-stored give each resource into r.stored. A record
// that does not read says nothing; the problem names it.
func (r *run) loadComposed(observed map[resource.Name]resource.ObservedComposed) []string {
	var problems []string
	rec, err := allowance.ComposedOf(r.xr.Object)
	if err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtParseXRComposed, ref(r.xr.Object)).Error())
	}
	r.composed = rec
	for _, n := range slices.Sorted(maps.Keys(observed)) {
		o := observed[n].Resource.Object
		rec, err := allowance.LeftAsStored(o)
		if err != nil {
			problems = append(problems, errors.Wrapf(err, errFmtParseLeftAsStored, n, ref(o)).Error())
			continue
		}
		r.noteStored(rec)
	}
	return problems
}

// noteStored adds rec to r.stored.
func (r *run) noteStored(rec allowance.Composed) {
	for _, n := range rec.Untouched {
		if r.stored == nil {
			r.stored = map[string]int64{}
		}
		r.stored[n] = max(r.stored[n], rec.Generation)
	}
}

// leaveAsStored copies this run's record of the resources it leaves as
// stored (untouched, sorted) onto the composed resources it writes anyway
// (kausality.io/left-as-stored), merged with what each records of the same
// generation. Crossplane applies them before it writes the XR's status,
// where the same record (reportComposed) is lost when the reconcile fails
// after the apply, or when a concurrent write of the XR, which anyone who
// may edit it can repeat, makes that status update fail: the allowance
// would then count as not yet composed for the resources left as stored.
//
// When the run writes none of them while an allowance of the XR could ride
// on a lost record (rideable: it is later than what a resource left as
// stored records elsewhere), the first resource left as stored carries the
// record: at most one write a generation, and none where no allowance
// could ride.
func (r *run) leaveAsStored(out map[resource.Name]answer, untouched []string, rideable bool) {
	if r.xr == nil || r.phase == policy.PhaseDeleting || len(untouched) == 0 {
		return
	}
	rec := allowance.Composed{Generation: r.xr.GetGeneration(), Untouched: slices.Sorted(slices.Values(untouched))}
	carriers := make([]*stamp, 0, len(out))
	for _, a := range out {
		if st := a.stamp; st != nil && st.closing == nil && st.writes {
			carriers = append(carriers, st)
		}
	}
	if len(carriers) == 0 && rideable {
		if st := out[resource.Name(rec.Untouched[0])].stamp; st != nil && st.closing == nil {
			carriers = append(carriers, st)
		}
	}
	for _, st := range carriers {
		// An unreadable record of its own is replaced: loadComposed
		// reported it.
		own, _ := allowance.ParseComposed(st.annotations[v1alpha1.AnnotationLeftAsStored])
		st.annotations[v1alpha1.AnnotationLeftAsStored] = own.Merge(rec).String()
	}
}

// reportComposed records on the XR the generation this run composed from
// and the resources it left untouched (allowance.Composed): once
// Crossplane has applied every composed resource it writes the condition,
// and an allowance of the XR is used up for those resources as their own
// record of the composed generation would use it. The runs at one
// generation add to one record.
//
// The record changes only when it has something new to say (recordable):
// an allowance of the XR not yet composed for an untouched resource by any
// record. Otherwise the run answers the record as the XR holds it, so the
// XR's generations that carry no allowance (Crossplane's own writes of
// its spec while it creates the XR) and a later run at one generation
// rewrite nothing. A condition Crossplane writes is a watch event it
// charges the XR's circuit breaker for, and it writes a changed one twice
// when its cache is behind (its status apply puts back the cached one).
func (r *run) reportComposed(rsp *fnv1.RunFunctionResponse, untouched []string, recordable bool) {
	if r.xr == nil || r.phase == policy.PhaseDeleting {
		return
	}
	rec := r.composed
	if recordable {
		rec = allowance.Composed{Generation: r.xr.GetGeneration(), Untouched: slices.Sorted(slices.Values(untouched))}
		if r.composed.Generation == rec.Generation {
			rec = rec.Merge(r.composed)
		}
	} else if rec.Generation == 0 {
		// Nothing to record, and no readable record to keep: the XR keeps
		// whatever it has.
		return
	}
	response.ConditionTrue(rsp, v1alpha1.ConditionComposed, ReasonComposed).WithMessage(rec.String()).TargetComposite()
}
