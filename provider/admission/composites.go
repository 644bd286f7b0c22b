package admission

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/provider/parents"
)

// Composites is the mutating webhook for Claims and composite resources of
// the kinds AllowancePolicies name. It evaluates the policies with the
// request's authenticated identity, denies (Enforce) or warns about (Log)
// changes no rule permits, and injects the allowances and trace a permitted
// change earns. Writes by Crossplane to a composite that has a Claim, or
// that another composite composed (nested XRs), are checked against that
// parent's allowances and continue its trace.
type Composites struct {
	// Policies lists the AllowancePolicies and reads Namespaces (a cached
	// client).
	Policies client.Reader
	// Reader reads parents uncached, so a Claim's allowances are current.
	Reader  client.Reader
	Cache   *policy.Cache
	Trusted admit.Writers
	Now     func() time.Time
}

// Handle implements admission.Handler.
func (h *Composites) Handle(ctx context.Context, req admission.Request) admission.Response {
	old, obj, sent, done := write(h.Trusted, req, false)
	if done != nil {
		return protected(ctx, *done)
	}
	if req.UserInfo.Username == h.Trusted.Provider && admit.OnlyTurns(old, obj) {
		// The provider recording roll-out turns, hundreds a batch: write
		// already checked that nobody else changes them.
		return patched(sent, obj)
	}
	set, broken, err := policiesFor(ctx, h.Policies, h.Cache, obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if v := admit.RefuseBroken(broken, old, obj); !v.Allowed() {
		return refuse(ctx, v)
	}
	if v := h.Trusted.Freeze(identity(req.UserInfo), old, obj, set, h.Now()); !v.Allowed() {
		return refuse(ctx, v)
	}
	if v := h.Trusted.References(identity(req.UserInfo), old, obj); !v.Allowed() {
		return refuse(ctx, v)
	}
	var warnings []string
	if len(set.Names()) == 0 {
		return patched(sent, obj)
	}

	r := policy.Request{Object: obj.Object, User: identity(req.UserInfo), Now: h.Now(), WatchSelection: !h.Trusted.Has(req.UserInfo.Username)}
	if old != nil {
		r.OldObject = old.Object
	}
	ns, err := parents.Namespace(ctx, h.Policies, obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if ns != nil {
		r.Namespace = ns.Object
	}
	// The chain a Crossplane write continues: the Claim's, or that of the
	// composite that composed this one (nested XRs).
	var parentTrace allowance.Trace
	var parentNote string
	if req.UserInfo.Username == h.Trusted.Crossplane {
		parent, err := parents.Parent(ctx, h.Reader, obj)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if parent != nil {
			if parent, err = guarded(ctx, h.Policies, h.Cache, parent); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			r.Parent, parentNote, err = admit.ParentFor(parent, old, obj, requestChild(req))
			if err != nil {
				return deny(ctx, metrics.ReasonParentUncovered, err.Error())
			}
			if r.Parent != nil {
				parentTrace = r.Parent.Trace
			} else if parentTrace, err = allowance.ParseTrace(parent.GetAnnotations()[v1alpha1.AnnotationTrace]); err != nil {
				return deny(ctx, metrics.ReasonMalformed, errors.Wrapf(err, errFmtParseAnnotation, v1alpha1.AnnotationTrace, admit.Describe(parent)).Error())
			}
		}
	}

	d, v := admit.Evaluate(set, r, obj, parentNote)
	noteOf(ctx).decided(d, v)
	if !v.Allowed() {
		return refuse(ctx, v)
	}
	warnings = append(warnings, v.Warnings...)
	audit := v.Audit

	if err := admit.Inject(old, obj, d, parentTrace); err != nil {
		return deny(ctx, metrics.ReasonChain, err.Error())
	}
	if len(d.Allowances) > 0 {
		audit[AuditInitiator] = d.Allowances[0].Initiator
	}
	return withAudit(patched(sent, obj), audit).WithWarnings(warnings...)
}

// policiesFor is the compiled policy set for obj's kind, and why any policy
// for the kind does not compile (its status says so too).
func policiesFor(ctx context.Context, r client.Reader, cache *policy.Cache, obj *unstructured.Unstructured) (policy.Set, []string, error) {
	ps, err := listPolicies(ctx, r)
	if err != nil {
		return policy.Set{}, nil, err
	}
	set, errs := cache.For(obj.GetAPIVersion(), obj.GetKind(), ps)
	broken := make([]string, 0, len(errs))
	for _, err := range errs {
		broken = append(broken, err.Error())
	}
	return set, broken, nil
}

// guarded is parent as a chain may trust it: as it is when some
// AllowancePolicy is for its kind, so admission wrote its allowances;
// else without them, since no webhook guards the annotation on a kind no
// policy names and anyone who may edit the object could have written it.
func guarded(ctx context.Context, r client.Reader, cache *policy.Cache, parent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	set, broken, err := policiesFor(ctx, r, cache, parent)
	if err != nil || len(set.Names()) > 0 || len(broken) > 0 {
		return parent, err
	}
	if _, ok := parent.GetAnnotations()[v1alpha1.AnnotationAllowances]; !ok {
		return parent, nil
	}
	out := parent.DeepCopy()
	ann := out.GetAnnotations()
	delete(ann, v1alpha1.AnnotationAllowances)
	out.SetAnnotations(ann)
	return out, nil
}

// listPolicies lists every AllowancePolicy. They are only read: it skips
// the informer cache's deep copy of every policy on every admission
// request.
func listPolicies(ctx context.Context, r client.Reader) ([]v1alpha1.AllowancePolicy, error) {
	l := &v1alpha1.AllowancePolicyList{}
	if err := r.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return nil, errors.Wrap(err, errListAllowancePolicies)
	}
	return l.Items, nil
}

// audited reports whether the managed resource obj of kind child is in
// Audit mode (policy.ManagedMode, as the function decides it): admission
// then gates nothing and refuses nothing of it. Its Namespace is read from
// r (a cached client).
func audited(ctx context.Context, r client.Reader, cache *policy.Cache, child policy.Child, obj *unstructured.Unstructured) (bool, error) {
	ps, err := listPolicies(ctx, r)
	if err != nil {
		return false, err
	}
	audit := slices.ContainsFunc(ps, func(p v1alpha1.AllowancePolicy) bool { return p.Spec.Mode == v1alpha1.ModeAudit })
	if !audit && policy.ModeNamespace(obj.Object) == "" {
		return false, nil
	}
	var nsObj map[string]any
	ns, err := parents.Namespace(ctx, r, obj)
	if err != nil {
		return false, err
	}
	if ns != nil {
		nsObj = ns.Object
	}
	mode, err := cache.ManagedMode(ps, child, nsObj)
	return err == nil && mode == v1alpha1.ModeAudit, nil
}

func withAudit(r admission.Response, audit map[string]string) admission.Response {
	r.AuditAnnotations = audit
	return r
}
