package compose

import (
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// run is the state of one RunFunction call, in three parts: what the
// request says (loaded, read once by load and never written after), what
// the run works out once and looks up many times (memos), and what it
// reports (findings). Decisions are values passed between the stages
// (item, change, deletion, answer); none of them is kept here.
type run struct {
	loaded
	memos
	findings

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
}

// findings are what the run reports on the XR: what it withheld and
// held back, malformed input, and how far an upgrade got.
type findings struct {
	withheld []withheld
	holds    []hold   // changes propagation control holds back
	problems []string // malformed input, one line each
	// behind: some composed resource still records older logic (its
	// upgrade is withheld, held, or waits for its turn).
	behind bool
	// usedCreation: this run let something through as part of the XR's
	// creation (loaded.creating).
	usedCreation bool
	// unrestricted are the composed managed resources of kinds no policy
	// for the XR names, one line each.
	unrestricted []string
}

// load reads the policies, upgrade allowances and XR annotations. Every
// problem is reported and resolved towards withholding.
func (r *run) load(req *fnv1.RunFunctionRequest, observed map[resource.Name]resource.ObservedComposed) {
	r.loadNamespace(req)
	r.loadPolicies(req)
	r.loadUpgrades(req)
	r.loadInputs(req)
	r.loadXR()
	r.loadBlockers(req)
	if ann := composedLogic(observed); ann != nil {
		r.added = r.upgradeOf(ann)
	}
}

// blockerRead is one blocker's required resource as Crossplane returned
// it, or why it could not be read.
type blockerRead struct {
	objs []*unstructured.Unstructured
	err  error
}

// loadBlockers reads every blocker Crossplane returned, of the
// propagation plan and of the UpgradeAllowances' roll-outs alike.
func (r *run) loadBlockers(req *fnv1.RunFunctionRequest) {
	names := map[string]bool{}
	for n := range req.GetRequiredResources() {
		names[n] = true
	}
	for n := range req.GetExtraResources() { //nolint:staticcheck // read for Crossplane before v2, which knows no required resources
		names[n] = true
	}
	for n := range names {
		if !strings.HasPrefix(n, RequirementBlockerPrefix) && !strings.HasPrefix(n, RequirementUpgradeBlockerPrefix) {
			continue
		}
		if r.blockers == nil {
			r.blockers = map[string]blockerRead{}
		}
		objs, _, err := required(req, n)
		r.blockers[n] = blockerRead{objs: objs, err: err}
	}
}

func (r *run) loadPolicies(req *fnv1.RunFunctionRequest) {
	ups, ok, err := required(req, RequirementPolicies)
	switch {
	case err != nil:
		r.problem(errors.Wrap(err, errReadRequiredAllowancePolicies))
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
	r.kinds = policy.KindsOf(aps)
	r.all = aps
	set, errs := r.compiled.policies.For(r.xr.GetAPIVersion(), r.xr.GetKind(), aps)
	for _, err := range errs {
		r.problem(err)
		r.restrictAll = true
	}
	r.set = set
	if r.phase, err = set.Phase(r.xr.Object); err != nil {
		r.problem(errors.Wrapf(err, errFmtTellLifecyclePhase, ref(r.xr.Object)))
		r.phase = policy.PhaseSteady
	}
	// The policy's initializing phase (before Crossplane first reports the
	// XR reconciled) is part of the creation too: a value wired in that
	// early completes a resource as it does later, gate included.
	r.creating = r.phase != policy.PhaseDeleting && !policy.Created(r.xr.Object)
	mode, err := set.Mode(r.ns)
	if err != nil {
		r.problem(errors.Wrapf(err, errFmtReadMode, ref(r.xr.Object)))
	}
	if w := policy.IgnoredMode(r.xr.Object); w != "" {
		r.problem(errors.New(w))
	}
	r.audit = mode == v1alpha1.ModeAudit
	nsMode, _, _ := policy.NamespaceMode(r.ns)
	r.auditable = nsMode == v1alpha1.ModeAudit || slices.ContainsFunc(r.all, func(p v1alpha1.AllowancePolicy) bool { return p.Spec.Mode == v1alpha1.ModeAudit })
	r.log = r.cfg.mode == v1beta1.ModeLog || mode == v1alpha1.ModeLog || r.audit
	r.drift = set.Drift()
}

// loadNamespace reads the Namespace whose mode and freeze apply to the XR.
// Until Crossplane supplies it (or when crossplane render is not given it)
// the policies' mode applies, which is Enforce unless every policy says Log.
func (r *run) loadNamespace(req *fnv1.RunFunctionRequest) {
	nss, _, err := required(req, RequirementNamespace)
	if err != nil {
		r.problem(errors.Wrap(err, errReadRequiredNamespace))
	}
	if len(nss) == 1 {
		r.ns = nss[0].Object
	}
}

func (r *run) loadUpgrades(req *fnv1.RunFunctionRequest) {
	uus, _, err := required(req, RequirementUpgrades)
	if err != nil {
		r.problem(errors.Wrap(err, errReadRequiredUpgradeAllowances))
	}
	for _, err := range decodeAll(uus, func(u *v1alpha1.UpgradeAllowance) { r.upgrades = append(r.upgrades, *u) }) {
		r.problem(err)
	}
	r.revision = rollout.Revision(r.xr.Object)
	crs, _, err := required(req, RequirementRevision)
	if err != nil {
		r.problem(errors.Wrap(err, errReadRequiredCompositionRevision))
	}
	var cr map[string]any
	if len(crs) == 1 {
		cr = crs[0].Object
	}
	r.rev = policy.RevisionOf(r.revision, cr)
	r.loadFunctions(req, cr)
}

// loadXR reads the XR's unconsumed allowances, its trace and its freeze.
func (r *run) loadXR() {
	ann := r.xr.GetAnnotations()
	if as, err := allowance.Parse(ann[v1alpha1.AnnotationAllowances]); err != nil {
		r.problem(errors.Wrapf(err, errFmtParseXRAllowances, v1alpha1.AnnotationAllowances, ref(r.xr.Object)))
	} else {
		r.allowances = allowance.OnComposite(as, r.xr.Object)
		allowance.Sort(r.allowances)
	}
	t, err := allowance.ParseTrace(ann[v1alpha1.AnnotationTrace])
	if err != nil {
		r.problem(errors.Wrapf(err, errFmtParseAnnotation, v1alpha1.AnnotationTrace, ref(r.xr.Object)))
	}
	// Admission writes the XR's own hop into its trace; without admission
	// (under crossplane render) the function adds it, so every composed
	// resource's trace still passes through its XR.
	r.unchangedSinceCreated = policy.UnchangedSinceCreated(r.xr.Object)
	r.xrTrace = t.With(allowance.HopOf(r.xr, r.xr.GetGeneration()))
	r.frozen, err = allowance.FrozenBy(ann)
	if err != nil {
		r.problem(errors.Wrapf(err, errFmtParseXRFreeze, v1alpha1.AnnotationFreeze, ref(r.xr.Object)))
	}
	if r.frozen == "" && r.ns != nil {
		ns := unstructured.Unstructured{Object: r.ns}
		by, err := allowance.FrozenBy(ns.GetAnnotations())
		if err != nil {
			r.problem(errors.Wrapf(err, errFmtParseNamespaceFreeze, v1alpha1.AnnotationFreeze, ns.GetName()))
		}
		if by != "" {
			r.frozen = by + " on Namespace " + ns.GetName()
		}
	}
}

func (r *run) problem(err error) { r.problems = append(r.problems, err.Error()) }

// xrHop is the XR's own hop, the last of its trace.
func (r *run) xrHop() allowance.Hop { return r.xrTrace.Last() }
