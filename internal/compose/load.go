package compose

import (
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// load reads the policies, upgrade allowances and XR annotations. It
// returns the malformed input it met, one line each, every one resolved
// towards withholding.
func (r *run) load(req *fnv1.RunFunctionRequest, observed map[resource.Name]resource.ObservedComposed) []string {
	problems := slices.Concat(r.loadNamespace(req), r.loadPolicies(req), r.loadUpgrades(req), r.loadInputs(req), r.loadXR(), r.loadComposed(observed))
	r.loadBlockers(req)
	if ann := composedLogic(observed); ann != nil {
		var err error
		if r.added, err = r.upgradeOf(ann); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems
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

// loadPolicies reads the AllowancePolicies and what they say of the XR:
// its phase, mode and drift policy. It returns what it could not read.
func (r *run) loadPolicies(req *fnv1.RunFunctionRequest) (problems []string) {
	ups, ok, err := required(req, RequirementPolicies)
	switch {
	case err != nil:
		problems = append(problems, errors.Wrap(err, errReadRequiredAllowancePolicies).Error())
		r.restrictAll = true
	case !ok:
		// Crossplane has not resolved the requirement yet; it calls again.
		r.restrictAll = true
	}
	var aps []v1alpha1.AllowancePolicy
	for _, err := range decodeAll(ups, func(p *v1alpha1.AllowancePolicy) { aps = append(aps, *p) }) {
		problems = append(problems, err.Error())
		r.restrictAll = true
	}
	r.kinds = policy.KindsOf(aps)
	r.all = aps
	set, errs := r.compiled.policies.For(r.xr.GetAPIVersion(), r.xr.GetKind(), aps)
	for _, err := range errs {
		problems = append(problems, err.Error())
		r.restrictAll = true
	}
	r.set = set
	if r.phase, err = set.Phase(r.xr.Object); err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtTellLifecyclePhase, ref(r.xr.Object)).Error())
		r.phase = policy.PhaseSteady
	}
	// The policy's initializing phase (before Crossplane first reports the
	// XR reconciled) is part of the creation too: a value wired in that
	// early completes a resource as it does later, gate included.
	r.creating = r.phase != policy.PhaseDeleting && !policy.Created(r.xr.Object)
	mode, err := set.Mode(r.ns)
	if err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtReadMode, ref(r.xr.Object)).Error())
	}
	if w := policy.IgnoredMode(r.xr.Object); w != "" {
		problems = append(problems, w)
	}
	r.audit = mode == v1alpha1.ModeAudit
	nsMode, _, _ := policy.NamespaceMode(r.ns)
	r.auditable = nsMode == v1alpha1.ModeAudit || slices.ContainsFunc(r.all, func(p v1alpha1.AllowancePolicy) bool { return p.Spec.Mode == v1alpha1.ModeAudit })
	r.log = r.cfg.mode == v1beta1.ModeLog || mode == v1alpha1.ModeLog || r.audit
	r.drift = set.Drift()
	return problems
}

// loadNamespace reads the Namespace whose mode and freeze apply to the XR.
// Until Crossplane supplies it (or when crossplane render is not given it)
// the policies' mode applies, which is Enforce unless every policy says Log.
func (r *run) loadNamespace(req *fnv1.RunFunctionRequest) (problems []string) {
	nss, _, err := required(req, RequirementNamespace)
	if err != nil {
		problems = append(problems, errors.Wrap(err, errReadRequiredNamespace).Error())
	}
	if len(nss) == 1 {
		r.ns = nss[0].Object
	}
	return problems
}

// loadUpgrades reads the UpgradeAllowances, the XR's Composition
// revision and the Functions its pipeline runs. It returns what it could
// not read.
func (r *run) loadUpgrades(req *fnv1.RunFunctionRequest) (problems []string) {
	uus, _, err := required(req, RequirementUpgrades)
	if err != nil {
		problems = append(problems, errors.Wrap(err, errReadRequiredUpgradeAllowances).Error())
	}
	for _, err := range decodeAll(uus, func(u *v1alpha1.UpgradeAllowance) { r.upgrades = append(r.upgrades, *u) }) {
		problems = append(problems, err.Error())
	}
	r.revision = rollout.Revision(r.xr.Object)
	crs, _, err := required(req, RequirementRevision)
	if err != nil {
		problems = append(problems, errors.Wrap(err, errReadRequiredCompositionRevision).Error())
	}
	var cr map[string]any
	if len(crs) == 1 {
		cr = crs[0].Object
	}
	r.rev = policy.RevisionOf(r.revision, cr)
	return append(problems, r.loadFunctions(req, cr)...)
}

// loadXR reads the XR's unconsumed allowances, its trace and its freeze.
// It returns what it could not read.
func (r *run) loadXR() (problems []string) {
	ann := r.xr.GetAnnotations()
	if as, err := allowance.Parse(ann[v1alpha1.AnnotationAllowances]); err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtParseXRAllowances, v1alpha1.AnnotationAllowances, ref(r.xr.Object)).Error())
	} else {
		r.allowances = allowance.OnComposite(as, r.xr.Object)
		allowance.Sort(r.allowances)
	}
	t, err := allowance.ParseTrace(ann[v1alpha1.AnnotationTrace])
	if err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtParseAnnotation, v1alpha1.AnnotationTrace, ref(r.xr.Object)).Error())
	}
	// Admission writes the XR's own hop into its trace; without admission
	// (under crossplane render) the function adds it, so every composed
	// resource's trace still passes through its XR.
	r.unchangedSinceCreated = policy.UnchangedSinceCreated(r.xr.Object)
	r.xrTrace = t.With(allowance.HopOf(r.xr, r.xr.GetGeneration()))
	r.frozen, err = allowance.FrozenBy(ann)
	if err != nil {
		problems = append(problems, errors.Wrapf(err, errFmtParseXRFreeze, v1alpha1.AnnotationFreeze, ref(r.xr.Object)).Error())
	}
	if r.frozen == "" && r.ns != nil {
		ns := unstructured.Unstructured{Object: r.ns}
		by, err := allowance.FrozenBy(ns.GetAnnotations())
		if err != nil {
			problems = append(problems, errors.Wrapf(err, errFmtParseNamespaceFreeze, v1alpha1.AnnotationFreeze, ns.GetName()).Error())
		}
		if by != "" {
			r.frozen = by + " on Namespace " + ns.GetName()
		}
	}
	return problems
}
