package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/provider/parents"
)

// Managed is the mutating webhook for gated managed resources. It is where
// the race of DESIGN §4.6 is settled: whoever writes the resource, the
// stored object decides which allowances are consumed, and the gate written
// is the gate formula over the allowances as they will be stored, so a
// stale pipeline run can never reopen a consumed gate and a new allowance
// opens its gate in the same write that stamps it. Crossplane's writes must
// chain every new allowance to an unconsumed allowance of the composite.
type Managed struct {
	// Reader reads composites and UpgradeAllowances uncached.
	Reader client.Reader
	// Policies lists AllowancePolicies (a cached client); a policy may
	// name a managed resource kind and let users change it by hand.
	Policies client.Reader
	Cache    *policy.Cache
	Trusted  admit.Writers
	// Gate is how gates behave, as for the gate controller.
	Gate gate.Config
	Now  func() time.Time
}

// composite is obj's controlling composite as a chain may trust it
// (guarded), nil when it has none.
func (h *Managed) composite(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	xr, err := parents.Composite(ctx, h.Reader, obj)
	if err != nil || xr == nil {
		return xr, err
	}
	return guarded(ctx, h.Policies, h.Cache, xr)
}

// freezePolicies are the policies whose initiators may lift a freeze on
// obj: those for its kind, or, when they name none of the user's
// identities, those for its composite's kind. A freeze on a composed
// resource holds its composite's changes, so whoever that composite's
// policies let start them may lift it (docs/DESIGN.md §3); the controller
// reference it is read through is one only Crossplane may set (Identity).
func (h *Managed) freezePolicies(ctx context.Context, req admission.Request, obj *unstructured.Unstructured) (policy.Set, error) {
	set, _, err := policiesFor(ctx, h.Policies, h.Cache, obj)
	if err != nil || set.NamesInitiator(identity(req.UserInfo)) {
		return set, err
	}
	xr, err := parents.Composite(ctx, h.Reader, obj)
	if err != nil || xr == nil {
		return set, errors.Wrapf(err, errFmtReadComposite, admit.Describe(obj))
	}
	xset, _, err := policiesFor(ctx, h.Policies, h.Cache, xr)
	if err != nil || !xset.NamesInitiator(identity(req.UserInfo)) {
		return set, err
	}
	return xset, nil
}

// Handle implements admission.Handler.
func (h *Managed) Handle(ctx context.Context, req admission.Request) admission.Response {
	old, obj, sent, done := write(h.Trusted, req, true)
	if done != nil {
		return protected(ctx, *done)
	}
	if r := h.auditOnly(ctx, req, obj, sent); r != nil {
		return *r
	}
	var warnings []string
	if obj.GetLabels()[v1alpha1.LabelGated] != "true" {
		gated, warning, err := h.gates(ctx, req, old, obj)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if !gated {
			// A patch, in case write restored protected annotations.
			return patched(sent, obj)
		}
		if warning != "" {
			warnings = append(warnings, warning)
		}
	}
	// What the resource acts on and answers to is part of what its gate
	// ships: retargeting it would aim the next open gate elsewhere.
	if v := h.Trusted.Identity(identity(req.UserInfo), old, obj); !v.Allowed() {
		return refuse(ctx, v)
	}
	if !h.Trusted.Has(req.UserInfo.Username) && admit.FreezeChanged(old, obj) {
		set, err := h.freezePolicies(ctx, req, obj)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if v := h.Trusted.Freeze(identity(req.UserInfo), old, obj, set, h.Now()); !v.Allowed() {
			return refuse(ctx, v)
		}
	}
	as, err := allowance.Parse(obj.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil {
		return deny(ctx, metrics.ReasonMalformed, errors.Wrapf(err, errFmtParseAnnotation, v1alpha1.AnnotationAllowances, admit.Describe(obj)).Error())
	}
	lateInit := h.Trusted.LateInitialized(req.UserInfo.Username, old, obj)
	if h.handEdited(req, old, obj, lateInit) {
		var logged []string
		var denied *admission.Response
		if as, logged, denied = h.handEdit(ctx, req, old, obj, as); denied != nil {
			return *denied
		}
		warnings = append(warnings, logged...)
	}
	if req.UserInfo.Username == h.Trusted.Crossplane {
		c := admit.Chain{Old: old, Obj: obj, Child: requestChild(req), Now: h.Now(),
			Composite: func() (*unstructured.Unstructured, error) { return h.composite(ctx, obj) },
			Upgrades:  func(name string) (bool, error) { return h.upgrade(ctx, name, old, obj) }}
		if v, err := c.Refuse(as); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		} else if !v.Allowed() {
			return refuse(ctx, v)
		}
	}

	n := len(as)
	as, msg, err := h.build(ctx, req.UserInfo, requestChild(req), old, obj, as, lateInit)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	} else if msg != "" {
		return deny(ctx, metrics.ReasonBuild, msg)
	}
	upgraded := len(as) > n // the write gained an allowance of its controller's new build

	// The stored object's observed generation decides consumption (status
	// is not written through this request); the closed gate is the one the
	// writer keeps the resource on.
	as, reconsumed := admit.AgainstStored(as, old)
	frozen, err := parents.FrozenFor(ctx, h.Reader, obj, as)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	w := admit.GateWrite{Obj: obj, Old: old, Allowances: as, Rewrite: reconsumed || upgraded, LateInitialized: lateInit,
		Trusted: h.Trusted.Has(req.UserInfo.Username), Now: h.Now(), Frozen: frozen}
	gateWarnings, err := w.Decide(h.Gate.For(obj.Object))
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	warnings = append(warnings, gateWarnings...)
	return patched(sent, obj).WithWarnings(warnings...)
}

// auditOnly answers a write of a resource in Audit mode as it came, nil
// when the resource is not in Audit mode: the gate is the Composition's
// (the function sets none), and the function reports what Enforce would
// withhold.
func (h *Managed) auditOnly(ctx context.Context, req admission.Request, obj *unstructured.Unstructured, sent map[string]any) *admission.Response {
	audit, err := audited(ctx, h.Policies, h.Cache, requestChild(req), obj)
	switch {
	case err != nil:
		return refOf(admission.Errored(http.StatusInternalServerError, err))
	case audit:
		return refOf(patched(sent, obj))
	}
	return nil
}

// gates decides whether a write of a resource without the gated label is
// gated all the same, and labels it so (DESIGN §4a: a gated managed
// resource stays gated; a restricted kind is evaluated on CREATE too):
//   - one that was gated: Crossplane applying a pipeline without the
//     kausality step (a switched composition) drops the label, and would
//     leave the resource to the provider with whatever managementPolicies
//     the new pipeline sets;
//   - a new one of a kind some AllowancePolicy restricts, created outside a
//     gate-aware pipeline: by hand, say with crossplane.io/external-name
//     naming a production resource and managementPolicies ["*"]. It gets a
//     closed gate and an origin trace naming its creator;
//   - one created before a policy came to restrict its kind, on its next
//     write (the webhook for ungated resources of restricted kinds).
//
// warning is for the writer.
func (h *Managed) gates(ctx context.Context, req admission.Request, old, obj *unstructured.Unstructured) (gated bool, warning string, err error) {
	if old != nil && old.GetLabels()[v1alpha1.LabelGated] == "true" {
		admit.SetLabel(obj, v1alpha1.LabelGated, "true")
		return true, "", nil
	}
	ps, err := listPolicies(ctx, h.Policies)
	if err != nil {
		return false, "", err
	}
	child := requestChild(req)
	if old != nil {
		// One that existed before a policy came to restrict its kind is
		// gated by its next write, closed: from then on a spec change needs
		// a cause, like any other's.
		if !h.Cache.RestrictingCompiled(ps, child) {
			return false, "", nil
		}
		admit.SetLabel(obj, v1alpha1.LabelGated, "true")
		if _, ok := old.GetAnnotations()[v1alpha1.AnnotationTrace]; !ok {
			admit.SetAnnotation(obj, v1alpha1.AnnotationTrace, allowance.FormatTrace(allowance.Trace{allowance.HopOf(obj, old.GetGeneration()).By(req.UserInfo.Username, h.Now())}))
		}
		return true, fmt.Sprintf("%s is gated from now on: AllowancePolicies restrict its kind, so it reaches the cloud only as far as allowances open its gate", admit.Describe(obj)), nil
	}
	restricted, errs := h.Cache.Restricting(ps, child)
	if !restricted {
		return false, "", nil
	}
	admit.SetLabel(obj, v1alpha1.LabelGated, "true")
	u := identity(req.UserInfo)
	admit.SetAnnotation(obj, v1alpha1.AnnotationTrace, allowance.FormatTrace(allowance.Trace{allowance.HopOf(obj, 1).By(u.Username, h.Now())}))
	why := "AllowancePolicies restrict its kind"
	if len(errs) > 0 {
		why = fmt.Sprintf("an AllowancePolicy that does not compile might restrict its kind (%v)", errs[0])
	}
	return true, fmt.Sprintf("%s is gated: %s, so it reaches the cloud only as far as allowances open its gate; compose it with function-kausality", admit.Describe(obj), why), nil
}

// upgrade reports whether the named UpgradeAllowance names the logic change
// the write records on the managed resource: every part of it when the
// resource was stored (old), produced by other logic; some part of the
// logic that produces it when it is being created, which no earlier logic
// produced.
func (h *Managed) upgrade(ctx context.Context, name string, old, mr *unstructured.Unstructured) (bool, error) {
	u := &v1alpha1.UpgradeAllowance{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return false, client.IgnoreNotFound(errors.Wrapf(err, errFmtGetUpgradeAllowance, name))
	}
	next, err := logic.Of(mr.GetAnnotations())
	if err != nil {
		return false, nil
	}
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("apiextensions.crossplane.io/v1")
	cr.SetKind("CompositionRevision")
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: next.Revision}, cr); client.IgnoreNotFound(err) != nil {
		return false, errors.Wrapf(err, errFmtGetCompositionRevision, next.Revision)
	}
	rev := policy.RevisionOf(next.Revision, cr.Object)
	us := []v1alpha1.UpgradeAllowance{*u}
	if old == nil {
		for _, p := range logic.Parts(next) {
			if len(policy.UpgradesFor(us, policy.Upgrade{Revision: rev, Changes: []logic.Change{p}})) > 0 {
				return true, nil
			}
		}
		return false, nil
	}
	prev, err := logic.Of(old.GetAnnotations())
	if err != nil {
		return false, nil
	}
	return len(policy.UpgradesFor(us, policy.Upgrade{Revision: rev, Changes: logic.Changes(prev, next)})) > 0, nil
}

// handEdited reports whether a write is a user's hand edit: of the spec
// (a provider's late initialization is none), or of the metadata in
// Crossplane's domain (policy.CrossplaneMetadata).
func (h *Managed) handEdited(req admission.Request, old, obj *unstructured.Unstructured, lateInit bool) bool {
	if h.Trusted.Has(req.UserInfo.Username) || old == nil || lateInit {
		return false
	}
	return admit.SpecChanged(old, obj) || len(policy.CrossplaneMetadata(old.Object, obj.Object)) > 0
}

// handEdit is a hand edit of a gated managed resource's spec: it starts
// its own chain, an origin trace naming the user, and whatever a policy for
// this kind lets them initiate. Every field it changes must be permitted,
// watched or not: one left in the spec would reach the cloud with the next
// change an allowance opens the gate for. It returns the write's
// allowances with those the edit earns, the warnings of Log mode, or the
// response that denies it.
func (h *Managed) handEdit(ctx context.Context, req admission.Request, old, obj *unstructured.Unstructured, as []allowance.Allowance) ([]allowance.Allowance, []string, *admission.Response) {
	set, broken, err := policiesFor(ctx, h.Policies, h.Cache, obj)
	if err != nil {
		return nil, nil, refOf(admission.Errored(http.StatusInternalServerError, err))
	}
	if v := admit.RefuseBroken(broken, old, obj); !v.Allowed() {
		return nil, nil, refOf(refuse(ctx, v))
	}
	// The gate is Kausality's to set, below: it is no part of the edit.
	edited := obj.DeepCopy()
	if mp, ok, _ := unstructured.NestedFieldCopy(old.Object, "spec", "managementPolicies"); ok {
		_ = unstructured.SetNestedField(edited.Object, mp, "spec", "managementPolicies")
	} else {
		unstructured.RemoveNestedField(edited.Object, "spec", "managementPolicies")
	}
	r := policy.Request{Object: edited.Object, OldObject: old.Object, User: identity(req.UserInfo), Now: h.Now(), WatchAll: true}
	ns, err := parents.Namespace(ctx, h.Policies, obj)
	if err != nil {
		return nil, nil, refOf(admission.Errored(http.StatusInternalServerError, err))
	}
	if ns != nil {
		r.Namespace = ns.Object
	}
	d, v := admit.Evaluate(set, r, obj, "")
	noteOf(ctx).decided(d, v)
	if !v.Allowed() {
		return nil, nil, refOf(refuse(ctx, v))
	}
	hop := d.Hop
	if hop.Field == "" && len(d.Changed) > 0 {
		hop.Field = d.Changed[0].Path
	}
	admit.SetAnnotation(obj, v1alpha1.AnnotationTrace, allowance.FormatTrace(allowance.Trace{hop}))
	// What the edit's External allowances ship: the fields the
	// policies permit, not those Log mode lets in regardless, at the
	// values the edit sets: a stale pipeline run that reverts the edit
	// while the gate is open is not shipped under it.
	permitted := d.Permitted()
	ships := mutation.BoundsFor(permitted)
	values := allowance.ValuesOf(edited.Object, permitted, gate.IsGatePath)
	for _, a := range d.Allowances {
		if a.Relation == v1alpha1.RelationExternal {
			as = append(as, a.Shipping(ships).Pinned(values))
		}
	}
	if len(d.Allowances) > 0 {
		admit.SetAnnotation(obj, v1alpha1.AnnotationAllowances, allowance.Format(as))
	}
	return as, v.Warnings, nil
}

// refOf is a response the caller returns.
func refOf(r admission.Response) *admission.Response { return &r }
