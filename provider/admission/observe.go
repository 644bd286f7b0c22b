package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Webhook names: the webhook label of the admission metrics.
const (
	WebhookPolicies   = "policies"
	WebhookComposites = "composites"
	WebhookManaged    = "managed"
	WebhookDeletion   = "deletion"
	WebhookStatus     = "status"
)

// Audit annotation keys Observed adds; the API server prefixes them with
// the webhook's name. A handler's own keys (initiator, violations, mode)
// are kept as the handler set them.
const (
	AuditDecision  = "decision"  // allowed, patched, denied or errored
	AuditReason    = "reason"    // the decision's class (metrics.Reason*)
	AuditPolicy    = "policy"    // the AllowancePolicy that decided, when one did
	AuditRule      = "rule"      // its rule that decided, spec.rules[i], when one did
	AuditInitiator = "initiator" // who started the chain the write continues
	AuditTrace     = "trace"     // the causal trace the write was stamped with
)

// MaxAuditTrace bounds the trace annotation: audit backends keep every
// event, and a trace grows a hop per level of composition. A longer trace
// is cut and says by how much; the object keeps it whole.
const MaxAuditTrace = 1024

// Observed decorates a webhook's handler: it counts each decision and its
// latency and adds audit annotations, so every webhook is measured and
// audited alike without each handler doing it.
type Observed struct {
	// Webhook names the webhook in metrics (one of the Webhook* names).
	Webhook string
	Handler admission.Handler
	// Metrics are where decisions are counted; nil counts nothing.
	Metrics *metrics.Admission
	// Now is the clock latency is measured with; time.Now when nil.
	Now func() time.Time
}

// Handle implements admission.Handler.
func (o *Observed) Handle(ctx context.Context, req admission.Request) admission.Response {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	n := &note{}
	rsp := o.Handler.Handle(context.WithValue(ctx, noteKey{}, n), req)
	outcome, reason := classify(rsp, n)
	audit(&rsp, outcome, reason, n)
	o.Metrics.Observe(o.Webhook, outcome, reason, n.policy, now().Sub(start))
	return rsp
}

// note is what a handler tells Observed about its decision beyond the
// response: a refusal's reason and the policy and rule that decided. Handlers
// reach it through the request's context; called directly (as unit tests
// do), they find none and note nothing.
type note struct {
	reason, policy, rule string
	logMode              bool // Log mode let in what it would deny
}

type noteKey struct{}

func noteOf(ctx context.Context) *note {
	n, _ := ctx.Value(noteKey{}).(*note)
	return n
}

func (n *note) because(reason string) {
	if n != nil {
		n.reason = reason
	}
}

// decided notes a policy evaluation and its verdict.
func (n *note) decided(d policy.Decision, v admit.Verdict) {
	if n == nil {
		return
	}
	n.policy, n.rule = d.Decided.Policy, d.Decided.Rule
	n.logMode = v.Allowed() && len(d.Violations) > 0
	if !v.Allowed() {
		n.reason = v.Reason
	}
}

// deny is admission.Denied, noting why for metrics and the audit log.
func deny(ctx context.Context, reason, msg string) admission.Response {
	return refuse(ctx, admit.Deny(reason, "%s", msg))
}

// refuse answers a verdict that denies, noting its reason for the
// decision's metric and audit annotation.
func refuse(ctx context.Context, v admit.Verdict) admission.Response {
	noteOf(ctx).because(v.Reason)
	return withAudit(admission.Denied(v.Message), v.Audit).WithWarnings(v.Warnings...)
}

// protected notes why write answered early: a refusal there is a
// protected annotation (a stale write is told by its Conflict code).
func protected(ctx context.Context, rsp admission.Response) admission.Response {
	if !rsp.Allowed {
		noteOf(ctx).because(metrics.ReasonProtected)
	}
	return rsp
}

// classify is a response's outcome and reason.
func classify(rsp admission.Response, n *note) (outcome, reason string) {
	var code int32
	if rsp.Result != nil {
		code = rsp.Result.Code
	}
	switch {
	case !rsp.Allowed && code == http.StatusConflict:
		return metrics.OutcomeDenied, metrics.ReasonConflict
	case !rsp.Allowed && code == http.StatusBadRequest:
		return metrics.OutcomeErrored, metrics.ReasonBadRequest
	case !rsp.Allowed && code >= http.StatusInternalServerError:
		return metrics.OutcomeErrored, metrics.ReasonInternal
	case !rsp.Allowed:
		if n.reason != "" {
			return metrics.OutcomeDenied, n.reason
		}
		return metrics.OutcomeDenied, metrics.ReasonRefused
	}
	outcome = metrics.OutcomeAllowed
	if len(rsp.Patches) > 0 {
		outcome = metrics.OutcomePatched
	}
	switch {
	case n.logMode:
		return outcome, metrics.ReasonLogMode
	case rsp.AuditAnnotations[AuditInitiator] != "" || stampedTrace(rsp) != "":
		return outcome, metrics.ReasonCaused
	}
	return outcome, metrics.ReasonPass
}

// audit adds Observed's annotations to rsp, keeping any the handler set.
func audit(rsp *admission.Response, outcome, reason string, n *note) {
	add := map[string]string{AuditDecision: outcome, AuditReason: reason, AuditPolicy: n.policy, AuditRule: n.rule}
	if t := stampedTrace(*rsp); t != "" {
		add[AuditTrace] = truncate(t, MaxAuditTrace)
		if tr, err := allowance.ParseTrace(t); err == nil && len(tr) > 0 {
			// The origin hop's user started the chain.
			add[AuditInitiator] = tr[0].User
		}
	}
	for k, v := range add {
		if v == "" {
			continue
		}
		if _, ok := rsp.AuditAnnotations[k]; ok {
			continue
		}
		if rsp.AuditAnnotations == nil {
			rsp.AuditAnnotations = map[string]string{}
		}
		rsp.AuditAnnotations[k] = v
	}
}

// stampedTrace is the kausality.io/trace annotation the response's patch
// writes, or "". diffPatch writes it as the annotation itself, or inside
// the annotations or metadata it adds whole.
func stampedTrace(rsp admission.Response) string {
	const annotations = "/metadata/annotations"
	for _, op := range rsp.Patches {
		if op.Operation == "remove" {
			continue
		}
		switch op.Path {
		case annotations + "/" + pointerEscape.Replace(v1alpha1.AnnotationTrace):
			s, _ := op.Value.(string)
			return s
		case annotations:
			if m, ok := op.Value.(map[string]any); ok {
				s, _ := m[v1alpha1.AnnotationTrace].(string)
				return s
			}
		case "/metadata":
			md, _ := op.Value.(map[string]any)
			if m, ok := md["annotations"].(map[string]any); ok {
				s, _ := m[v1alpha1.AnnotationTrace].(string)
				return s
			}
		}
	}
	return ""
}

// truncate cuts s to at most max bytes, saying how much it left out.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	suffix := fmt.Sprintf("...(truncated, %d bytes)", len(s))
	cut := limit - len(suffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}
