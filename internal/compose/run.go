package compose

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// run is the state of one RunFunction call, in two parts: what the
// request says (loaded, read once by load and never written after), and
// what the run works out once and looks up many times (memos). Decisions
// and findings are values the stages return (item, change, deletion,
// verdict, findings, answer); none of them is kept here.
type run struct {
	loaded
	memos

	compiled *compiled         // the function's, read through by every run
	metrics  *metrics.Function // where its decisions are counted; nil: nowhere
}

// loaded is what the request says, as load read it: the Input, the XR and
// its allowances, trace and freeze, the policies, upgrades and the logic
// producing the composed resources now.
type loaded struct {
	cfg config
	now time.Time
	// stampedAt is now as hops record it (allowance.Timestamp).
	stampedAt string
	xr        *unstructured.Unstructured
	// blockers are the blockers Crossplane returned for the propagation
	// plan's and the UpgradeAllowances' roll-outs, by requirement name
	// (checkBlockers reads them).
	blockers map[string]blockerRead

	// restrictAll fails closed: set when the policies are unknown (not yet
	// resolved by Crossplane, or one of them cannot be read), so that every
	// composed resource counts as restricted.
	restrictAll bool
	set         policy.Set
	kinds       policy.Kinds // the resources policy targets name, as the API server serves them
	phase       policy.Phase
	log         bool // Log or Audit mode: report, do not withhold
	audit       bool // Audit mode: gate nothing either (see audited)
	// auditable: the Namespace or some policy says Audit, so some composed
	// resource may be audited.
	auditable bool
	// all are every AllowancePolicy, whatever kind each is for: whether a
	// composed resource is audited depends on all that restrict its kind.
	all       []v1alpha1.AllowancePolicy
	drift     v1alpha1.DriftPolicy
	upgrades  []v1alpha1.UpgradeAllowance
	revision  string
	rev       policy.Revision // revision with its Composition and number, when Crossplane supplied its CompositionRevision
	logic     logic.Logic     // what produces the composed resources now
	functions string          // logic.Functions, formatted for kausality.io/function-versions
	inputs    string          // logic.Inputs, formatted for kausality.io/input-versions
	// added is the upgrade a composed resource the pipeline adds is
	// compared with: that of the logic recorded on those observed (read
	// right after load, from the observed resources).
	added *upgrade

	allowances []allowance.Allowance // unconsumed allowances of the XR, sorted
	xrTrace    allowance.Trace       // the XR's trace, ending with the XR's hop
	// composed is the XR's record of the generation it was last composed
	// from and the resources that run left as stored (KausalityComposed).
	composed allowance.Composed
	// stored is, by composition resource name, the latest generation the
	// composed resources' records of the resources left as stored give
	// each (loadComposed).
	stored map[string]int64
	// unchangedSinceCreated: nobody changed the XR's spec since its
	// creation (policy.UnchangedSinceCreated).
	unchangedSinceCreated bool
	frozen                string         // who froze the XR or its Namespace, empty if not frozen
	ns                    map[string]any // the Namespace whose mode and freeze apply, nil when unknown

	// creating: the XR's creation is not over (policy.Created), so what
	// the pipeline adds belongs to its creation.
	creating bool
}

// memos are what the run works out once from what it loaded and looks up
// for many composed resources.
type memos struct {
	upgradesBy map[string]*upgrade                // upgradeOf's, by the logic recorded on a composed resource
	bounds     []mutation.Bounds                  // the XR allowances' mutation bounds, compiled by boundsOf
	chains     map[[2]int64][]allowance.Allowance // chainOf's, by allowance index and from
	// children are childOf's, by apiVersion and kind; rules rulesOf's,
	// by kind.
	children map[[2]string]policy.Child
	rules    map[policy.Child]kindRules
	viaXR    []allowance.Trace // throughXR's, by allowance index
	// childBounds are childBoundsOf's, by allowance index, from and kind.
	childBounds map[childBoundsKey]policy.ChildBounds
}
