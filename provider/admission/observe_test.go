package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

func TestObserved(t *testing.T) {
	trace := allowance.FormatTrace(allowance.Trace{
		{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "db", Generation: 4, Field: "spec.size", User: alice},
		{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 2, Field: "spec.size", User: "crossplane"},
	})
	long := strings.Repeat("x", 2*MaxAuditTrace)
	traceOp := func(path string, v any) jsonpatch.JsonPatchOperation { return jsonpatch.NewOperation("add", path, v) }
	annotationPath := "/metadata/annotations/" + pointerEscape.Replace(v1alpha1.AnnotationTrace)

	type want struct {
		outcome, reason, policy string
		audit                   map[string]string
	}
	cases := map[string]struct {
		reason  string
		handler admission.HandlerFunc
		want    want
	}{
		"Pass": {reason: "A write with nothing to decide is allowed and says so.",
			handler: func(context.Context, admission.Request) admission.Response { return admission.Allowed("") },
			want: want{outcome: metrics.OutcomeAllowed, reason: metrics.ReasonPass,
				audit: map[string]string{AuditDecision: metrics.OutcomeAllowed, AuditReason: metrics.ReasonPass}}},
		"Stamped": {reason: "A write patched with a trace is caused: the audit log gets the trace and its origin's user as initiator.",
			handler: func(context.Context, admission.Request) admission.Response {
				return admission.Patched("", traceOp(annotationPath, trace))
			},
			want: want{outcome: metrics.OutcomePatched, reason: metrics.ReasonCaused,
				audit: map[string]string{AuditDecision: metrics.OutcomePatched, AuditReason: metrics.ReasonCaused, AuditTrace: trace, AuditInitiator: alice}}},
		"StampedInNewAnnotations": {reason: "A trace in annotations the patch adds whole is found too; the handler's own initiator is kept.",
			handler: func(context.Context, admission.Request) admission.Response {
				return withAudit(admission.Patched("", traceOp("/metadata/annotations", map[string]any{v1alpha1.AnnotationTrace: trace})),
					map[string]string{AuditInitiator: "bob", admit.AuditMode: "Enforce"})
			},
			want: want{outcome: metrics.OutcomePatched, reason: metrics.ReasonCaused,
				audit: map[string]string{AuditDecision: metrics.OutcomePatched, AuditReason: metrics.ReasonCaused, AuditTrace: trace, AuditInitiator: "bob", admit.AuditMode: "Enforce"}}},
		"LongTrace": {reason: "A trace longer than the limit is cut, and says so.",
			handler: func(context.Context, admission.Request) admission.Response {
				return admission.Patched("", traceOp("/metadata", map[string]any{"annotations": map[string]any{v1alpha1.AnnotationTrace: long}}))
			},
			want: want{outcome: metrics.OutcomePatched, reason: metrics.ReasonCaused,
				audit: map[string]string{AuditDecision: metrics.OutcomePatched, AuditReason: metrics.ReasonCaused,
					AuditTrace: long[:MaxAuditTrace-len("...(truncated, 2048 bytes)")] + "...(truncated, 2048 bytes)"}}},
		"PolicyViolation": {reason: "An Enforce-mode violation is denied for a policy violation, naming the policy.",
			handler: func(ctx context.Context, _ admission.Request) admission.Response {
				denied := admit.Deny(metrics.ReasonPolicyViolation, "no")
				noteOf(ctx).decided(policy.Decision{Violations: []policy.Violation{{Field: "spec.size", Policy: "xdatabase-policy"}},
					Decided: policy.Decided{Policy: "xdatabase-policy", Rule: "spec.rules[0]"}}, denied)
				return admission.Denied(denied.Message)
			},
			want: want{outcome: metrics.OutcomeDenied, reason: metrics.ReasonPolicyViolation, policy: "xdatabase-policy",
				audit: map[string]string{AuditDecision: metrics.OutcomeDenied, AuditReason: metrics.ReasonPolicyViolation, AuditPolicy: "xdatabase-policy", AuditRule: "spec.rules[0]"}}},
		"LogMode": {reason: "Log mode lets a violation in, and says which policy would have denied it.",
			handler: func(ctx context.Context, _ admission.Request) admission.Response {
				noteOf(ctx).decided(policy.Decision{Violations: []policy.Violation{{Field: "spec.size", Policy: "xdatabase-policy"}},
					Decided: policy.Decided{Policy: "xdatabase-policy"}}, admit.Allow())
				return admission.Allowed("")
			},
			want: want{outcome: metrics.OutcomeAllowed, reason: metrics.ReasonLogMode, policy: "xdatabase-policy",
				audit: map[string]string{AuditDecision: metrics.OutcomeAllowed, AuditReason: metrics.ReasonLogMode, AuditPolicy: "xdatabase-policy"}}},
		"Noted": {reason: "A refusal counts under the reason the handler gave.",
			handler: func(ctx context.Context, _ admission.Request) admission.Response {
				return deny(ctx, metrics.ReasonFrozenWrite, "frozen")
			},
			want: want{outcome: metrics.OutcomeDenied, reason: metrics.ReasonFrozenWrite,
				audit: map[string]string{AuditDecision: metrics.OutcomeDenied, AuditReason: metrics.ReasonFrozenWrite}}},
		"Unnoted": {reason: "A refusal without a reason still counts, as refused.",
			handler: func(context.Context, admission.Request) admission.Response { return admission.Denied("no") },
			want: want{outcome: metrics.OutcomeDenied, reason: metrics.ReasonRefused,
				audit: map[string]string{AuditDecision: metrics.OutcomeDenied, AuditReason: metrics.ReasonRefused}}},
		"Conflict": {reason: "A stale write's Conflict is a denial for conflict, whatever the handler noted.",
			handler: func(ctx context.Context, req admission.Request) admission.Response {
				_, _, _, done := write(trusted, req, false)
				return protected(ctx, *done)
			},
			want: want{outcome: metrics.OutcomeDenied, reason: metrics.ReasonConflict,
				audit: map[string]string{AuditDecision: metrics.OutcomeDenied, AuditReason: metrics.ReasonConflict}}},
		"Errored": {reason: "A failed read is an error, not a decision.",
			handler: func(context.Context, admission.Request) admission.Response {
				return admission.Errored(http.StatusInternalServerError, context.DeadlineExceeded)
			},
			want: want{outcome: metrics.OutcomeErrored, reason: metrics.ReasonInternal,
				audit: map[string]string{AuditDecision: metrics.OutcomeErrored, AuditReason: metrics.ReasonInternal}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.NewAdmission(reg)
			clock := time.Unix(0, 0)
			o := &Observed{Webhook: WebhookComposites, Handler: tc.handler, Metrics: m, Now: func() time.Time {
				clock = clock.Add(3 * time.Millisecond)
				return clock
			}}
			rsp := o.Handle(context.Background(), update(asAlice, xr(t, resourceVersion("1")), xr(t, resourceVersion("2"))))
			if diff := cmp.Diff(tc.want.audit, rsp.AuditAnnotations); diff != "" {
				t.Errorf("%s\naudit annotations: -want +got:\n%s", tc.reason, diff)
			}
			if got := testutil.ToFloat64(m.Decisions.WithLabelValues(WebhookComposites, tc.want.outcome, tc.want.reason, tc.want.policy)); got != 1 {
				t.Errorf("%s\n%s{outcome=%q,reason=%q,policy=%q} = %v, want 1", tc.reason, metrics.NameAdmissionDecision, tc.want.outcome, tc.want.reason, tc.want.policy, got)
			}
			if n := testutil.CollectAndCount(m.Decisions); n != 1 {
				t.Errorf("%s\none request makes one series, got %d", tc.reason, n)
			}
			const wantHist = `
# HELP kausality_admission_duration_seconds How long a webhook took to decide, by webhook.
# TYPE kausality_admission_duration_seconds histogram
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.0005"} 0
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.001"} 0
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.0025"} 0
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.005"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.01"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.025"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.05"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.1"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.25"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="0.5"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="1"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="2.5"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="5"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="10"} 1
kausality_admission_duration_seconds_bucket{webhook="composites",le="+Inf"} 1
kausality_admission_duration_seconds_sum{webhook="composites"} 0.003
kausality_admission_duration_seconds_count{webhook="composites"} 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(wantHist), metrics.NameAdmissionDuration); err != nil {
				t.Errorf("%s\nthe latency is the handler's, by webhook: %v", tc.reason, err)
			}
		})
	}
}

func TestHandlersNoteNothingUnobserved(t *testing.T) {
	// Called directly, as the other tests call them, handlers find no note
	// and their responses carry only their own audit annotations.
	rsp := deny(context.Background(), metrics.ReasonFrozenWrite, "frozen")
	if rsp.AuditAnnotations != nil || rsp.Allowed {
		t.Errorf("deny without Observed: got %+v", rsp)
	}
}

func resourceVersion(v string) mod {
	return func(u *unstructured.Unstructured) { u.SetResourceVersion(v) }
}
