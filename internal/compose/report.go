package compose

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// XR condition types the function sets.
const (
	// ConditionAllowed is False while the function withholds a mutation, and
	// says which and why.
	ConditionAllowed = v1alpha1.ConditionAllowed
	// ConditionAnnotations is False while a kausality.io annotation on the XR
	// cannot be parsed; the function then acts as if it had no allowances.
	ConditionAnnotations = "KausalityAnnotationsValid"
)

// Condition reasons.
const (
	ReasonAllAllowed = "AllMutationsAllowed"
	ReasonWithheld   = "MutationsWithheld"
	ReasonLogOnly    = v1alpha1.ReasonWouldWithhold
	// ReasonAuditOnly: Audit mode, which also closes no gate.
	ReasonAuditOnly        = v1alpha1.ReasonAuditWouldWithhold
	ReasonAnnotationsValid = "AnnotationsValid"
	ReasonMalformed        = "MalformedAnnotation"
	ReasonAllPropagated    = "AllPropagated"
	ReasonHeld             = "PropagationHeld"
	ReasonFrozen           = "Frozen"
	// ReasonComposed is the reason of v1alpha1.ConditionComposed.
	ReasonComposed = v1alpha1.ReasonComposed
	// ReasonCreated is the reason of v1alpha1.ConditionCreated.
	ReasonCreated = "Created"
	// ReasonAllRestricted and ReasonUnrestricted are the reasons of
	// v1alpha1.ConditionRestricted.
	ReasonAllRestricted = "AllKindsRestricted"
	ReasonUnrestricted  = "UnrestrictedKinds"
)

// ConditionPropagated is False while propagation control holds a change
// back from a composed resource or a freeze keeps gates shut, and says
// which and why. The XR has it when its Input configures propagation or
// it is frozen.
const ConditionPropagated = v1alpha1.ConditionPropagated

// withheld records one change the function kept from a composed resource
// (or, in Log mode, would have kept and let through).
type withheld struct {
	resource   string // composition resource name
	kind, name string
	verb, path string // what was withheld: a verb, and the field for a mutation
	reason     string
	code       string       // the reason's class, for metrics
	child      policy.Child // the resource's kind, for metrics
	logOnly    bool         // Log or Audit mode: reported, let through
	audit      bool         // Audit mode, which logOnly is
}

// String is the line the XR's results and conditions carry; its format
// is report.Withheld's, which `kubectl kausality explain` parses.
func (w withheld) String() string {
	return report.Withheld{Resource: w.resource, Kind: w.kind, Name: w.name, Verb: w.verb, Path: w.path, Reason: w.reason, LogOnly: w.logOnly, Audit: w.audit}.String()
}

// withheldOf is what is reported of verb (at path, for a mutation) kept
// from the resource m for reason.
func withheldOf(m childMeta, verb, path, code, reason string) withheld {
	return withheld{resource: m.resName, kind: m.child.Kind, name: m.name, verb: verb, path: path, code: code, child: m.child, reason: reason}
}

// withholds reports whether the change keeps something from its resource
// (Log mode's reports let everything through).
func (ch change) withholds() bool {
	return slices.ContainsFunc(ch.reports, func(w withheld) bool { return !w.logOnly })
}

// report turns what the run found (f: what it withheld, held back and
// every input problem) into results and XR conditions.
func (r *run) report(rsp *fnv1.RunFunctionResponse, f *findings) {
	for _, p := range f.problems {
		response.Warning(rsp, errors.New(p)).TargetCompositeAndClaim()
	}
	if len(f.problems) > 0 {
		response.ConditionFalse(rsp, ConditionAnnotations, ReasonMalformed).WithMessage(strings.Join(f.problems, "; ")).TargetCompositeAndClaim()
	} else {
		response.ConditionTrue(rsp, ConditionAnnotations, ReasonAnnotationsValid).TargetComposite()
	}
	lines := make([]string, 0, len(f.withheld))
	for _, w := range f.withheld {
		lines = append(lines, w.String())
		response.Warning(rsp, errors.New(w.String())).TargetCompositeAndClaim()
	}
	switch {
	case len(f.withheld) == 0:
		// The Claim too: Crossplane keeps a condition it once copied to
		// the Claim (status.claimConditionTypes), so a Claim that was told
		// a change was withheld must also be told when nothing is.
		response.ConditionTrue(rsp, ConditionAllowed, ReasonAllAllowed).TargetCompositeAndClaim()
	case r.audit:
		response.ConditionTrue(rsp, ConditionAllowed, ReasonAuditOnly).WithMessage(strings.Join(lines, "; ")).TargetCompositeAndClaim()
	case r.log:
		response.ConditionTrue(rsp, ConditionAllowed, ReasonLogOnly).WithMessage(strings.Join(lines, "; ")).TargetCompositeAndClaim()
	default:
		response.ConditionFalse(rsp, ConditionAllowed, ReasonWithheld).WithMessage(strings.Join(lines, "; ")).TargetCompositeAndClaim()
		// A withheld change waits for something Crossplane does not watch
		// (an UpgradeAllowance, a policy, a freeze lifted): come back soon.
		// A turn in a roll-out comes as a write on the XR, which Crossplane
		// watches: a fleet waiting for its turns is left at the default
		// TTL, since hundreds of XRs polling every WithheldTTL slow down
		// the batch under way.
		if !r.waitsForTurnsOnly(f) {
			if rsp.Meta == nil {
				rsp.Meta = &fnv1.ResponseMeta{}
			}
			rsp.Meta.Ttl = durationpb.New(WithheldTTL)
		}
	}
	r.reportPropagation(rsp, f)
	r.reportUpgraded(rsp, f.behind)
	r.reportCreated(rsp, f)
	r.reportComposed(rsp, f.untouched, f.recordable)
	r.reportRestricted(rsp, f.unrestricted)
}

// reportRestricted says, on an XR some policy is for, whether every
// managed resource it composes is of a kind a policy names (unrestricted:
// a line for each that is not).
func (r *run) reportRestricted(rsp *fnv1.RunFunctionResponse, unrestricted []string) {
	if r.xr == nil || r.restrictAll || len(r.set.Names()) == 0 {
		return
	}
	if len(unrestricted) == 0 {
		response.ConditionTrue(rsp, v1alpha1.ConditionRestricted, ReasonAllRestricted).TargetComposite()
		return
	}
	for _, l := range unrestricted {
		response.Warning(rsp, errors.New(l)).TargetCompositeAndClaim()
	}
	response.ConditionFalse(rsp, v1alpha1.ConditionRestricted, ReasonUnrestricted).WithMessage(strings.Join(unrestricted, "; ")).TargetComposite()
}

// reportCreated ends the XR's creation, for good, at the first run that
// finds it Ready with nothing left to add, and keeps it ended (Ready turns
// False again later; the creation must not come back with it). While the
// creation goes on, Crossplane is asked back soon, so that it ends once the
// XR is Ready although nothing it watches changes then.
func (r *run) reportCreated(rsp *fnv1.RunFunctionResponse, f *findings) {
	if r.xr == nil || r.phase == policy.PhaseDeleting {
		return
	}
	shut := slices.ContainsFunc(f.withheld, func(w withheld) bool { return w.verb == v1alpha1.VerbCreate && !w.logOnly })
	if policy.Created(r.xr.Object) || (policy.Ready(r.xr.Object) && !f.usedCreation && !r.restrictAll && !shut) {
		response.ConditionTrue(rsp, v1alpha1.ConditionCreated, ReasonCreated).
			WithMessage("the XR was Ready with nothing left to add; what the pipeline adds from now on is a change that needs a cause").TargetComposite()
		return
	}
	if rsp.Meta == nil {
		rsp.Meta = &fnv1.ResponseMeta{}
	}
	if rsp.Meta.Ttl == nil || rsp.Meta.Ttl.AsDuration() > WithheldTTL {
		rsp.Meta.Ttl = durationpb.New(WithheldTTL)
	}
}

// reportPropagation sets the Propagated condition and asks Crossplane to
// come back soon while a batch applies, and when a closed maintenance
// window opens while only windows hold changes back.
func (r *run) reportPropagation(rsp *fnv1.RunFunctionResponse, f *findings) {
	if r.cfg.plan == nil && r.frozen == "" && !r.paced() {
		return
	}
	waiting := r.waiting()
	lines := make([]string, 0, len(f.holds)+len(waiting)+1)
	lines = append(lines, waiting...)
	if r.frozen != "" {
		lines = append(lines, fmt.Sprintf("frozen by %s: no gate opens until the freeze lifts, and held changes then apply", r.frozen))
	}
	var opens time.Time
	windowsOnly := true
	for _, h := range f.holds {
		lines = append(lines, h.String())
		switch {
		case h.opens.IsZero():
			windowsOnly = false
		case opens.IsZero() || h.opens.Before(opens):
			opens = h.opens
		}
	}
	switch {
	case len(lines) == 0:
		response.ConditionTrue(rsp, ConditionPropagated, ReasonAllPropagated).TargetCompositeAndClaim()
		return
	case r.frozen != "":
		response.ConditionFalse(rsp, ConditionPropagated, ReasonFrozen).WithMessage(strings.Join(lines, "; ")).TargetCompositeAndClaim()
	default:
		response.ConditionFalse(rsp, ConditionPropagated, ReasonHeld).WithMessage(strings.Join(lines, "; ")).TargetCompositeAndClaim()
	}
	if r.waitsForTurnsOnly(f) {
		return
	}
	ttl := WithheldTTL
	if len(f.holds) > 0 && windowsOnly && r.frozen == "" {
		ttl = max(opens.Sub(r.now), time.Second)
	}
	if rsp.Meta == nil {
		rsp.Meta = &fnv1.ResponseMeta{}
	}
	if cur := rsp.GetMeta().GetTtl(); cur == nil || ttl < cur.AsDuration() || len(f.withheld) == 0 {
		rsp.Meta.Ttl = durationpb.New(ttl)
	}
}

// waitsForTurnsOnly reports whether all the run keeps back waits for the
// XR's turn in a roll-out, which the provider gives by writing the XR:
// nothing is held or frozen, and every change withheld waits for a turn
// (a halted roll-out waits for its blockers, which Crossplane does not
// watch).
func (r *run) waitsForTurnsOnly(f *findings) bool {
	if len(f.holds) > 0 || r.frozen != "" || len(f.withheld) == 0 {
		return false
	}
	return !slices.ContainsFunc(f.withheld, func(w withheld) bool { return !w.logOnly && w.code != metrics.ReasonUpgradeTurn })
}

// WithheldTTL is how soon Crossplane runs the pipeline again while a change
// is withheld, instead of the SDK's default minute.
const WithheldTTL = 15 * time.Second

// ref names an object for messages: Kind/name.
func ref(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	return fmt.Sprintf("%s/%s", u.GetKind(), u.GetName())
}
