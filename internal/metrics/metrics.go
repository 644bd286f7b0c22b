// Package metrics owns the Prometheus vocabulary of the function and of
// admission: metric names, label names and outcome values, each defined once.
// It holds collectors only and does no I/O (serving them is the binaries'
// job), so it belongs in internal/ with the other pure logic; keeping it out
// of fn (package main) lets the dashboard test build the same collectors the
// binaries register.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names. The gate controller's (kausality_gate*) live with it in
// provider/gatecontroller.
const (
	NameFunctionDecisions = "kausality_function_decisions_total"
	NameRolloutComposites = "kausality_upgrade_rollout_composites"
	NameRolloutTurns      = "kausality_upgrade_rollout_turns_total"
	NameAdmissionDecision = "kausality_admission_decisions_total"
	NameAdmissionDuration = "kausality_admission_duration_seconds"
)

// Label names. Every value is bounded: kinds, policy and UpgradeAllowance
// names, webhook names and the constants below, never the name of an XR or
// composed resource, which would make a series per object.
const (
	LabelXRKind           = "xr_kind"
	LabelOutcome          = "outcome"
	LabelReason           = "reason"
	LabelPolicy           = "policy"
	LabelUpgradeAllowance = "upgrade_allowance"
	LabelState            = "state"
	LabelWebhook          = "webhook"
)

// Outcomes of the function's decision about one composed resource in one
// run. A resource gets the first that applies, in this order: withheld,
// pending, held, log_only, let_through.
const (
	// OutcomeWithheld: a change needs a cause no allowance or policy gives.
	OutcomeWithheld = "withheld"
	// OutcomePending: an UpgradeAllowance permits the change, and it waits
	// for the XR's turn in the roll-out.
	OutcomePending = "pending"
	// OutcomeHeld: propagation control (propagateWhen, a blocker) holds a
	// permitted change back.
	OutcomeHeld = "held"
	// OutcomeLogOnly: Log mode let through what it would have withheld.
	OutcomeLogOnly = "log_only"
	// OutcomeLetThrough: every change to the resource went through.
	OutcomeLetThrough = "let_through"
)

// Outcomes of an admission request.
const (
	OutcomeAllowed = "allowed"
	OutcomePatched = "patched"
	OutcomeDenied  = "denied"
	// OutcomeErrored: the webhook could not decide (a failed read, an
	// undecodable object); the API server's failurePolicy decides instead.
	OutcomeErrored = "errored"
)

// States of the roll-out gauge.
const (
	StateUpdated = "updated" // composites that applied the upgrade and are Ready
	StateTotal   = "total"   // composites the roll-out counts
)

// Outcomes of an XR's turn in an upgrade roll-out.
const (
	TurnTaken   = "taken"
	TurnWaiting = "waiting"
	TurnHalted  = "halted" // a blocker halts the roll-out
	TurnFailed  = "failed" // the roll-out rule does not compile or evaluate
)

// Function are the composition function's metrics.
type Function struct {
	// Decisions is kausality_function_decisions_total.
	Decisions *prometheus.CounterVec
	// Rollout is kausality_upgrade_rollout_composites.
	Rollout *prometheus.GaugeVec
	// Turns is kausality_upgrade_rollout_turns_total.
	Turns *prometheus.CounterVec
}

// NewFunction registers the function's metrics with reg.
func NewFunction(reg prometheus.Registerer) *Function {
	m := &Function{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameFunctionDecisions,
			Help: "Decisions about a composed resource's changes, one per resource with changes and run, by XR kind, outcome, reason and the AllowancePolicy that restricts its kind."},
			[]string{LabelXRKind, LabelOutcome, LabelReason, LabelPolicy}),
		Rollout: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameRolloutComposites,
			Help: "Composites an UpgradeAllowance's roll-out counts (state total) and those that applied it and are Ready (state updated), as the last XR deciding its turn saw them."},
			[]string{LabelUpgradeAllowance, LabelState}),
		Turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameRolloutTurns,
			Help: "XRs deciding whether it is their turn in an UpgradeAllowance's roll-out, by outcome."},
			[]string{LabelUpgradeAllowance, LabelOutcome}),
	}
	reg.MustRegister(m.Decisions, m.Rollout, m.Turns)
	return m
}

// Decision counts one decision about a composed resource. A nil Function
// records nothing, so tests and renders need no registry.
func (m *Function) Decision(xrKind, outcome, reason, policy string) {
	if m == nil {
		return
	}
	m.Decisions.WithLabelValues(xrKind, outcome, reason, policy).Inc()
}

// Turn counts an XR's turn decision in the roll-out of UpgradeAllowance ua,
// and records how far the roll-out got when it was counted (total < 0: not
// counted, as when the rule failed before counting).
func (m *Function) Turn(ua, outcome string, updated, total int) {
	if m == nil {
		return
	}
	m.Turns.WithLabelValues(ua, outcome).Inc()
	if total >= 0 {
		m.Rollout.WithLabelValues(ua, StateUpdated).Set(float64(updated))
		m.Rollout.WithLabelValues(ua, StateTotal).Set(float64(total))
	}
}

// Admission are the admission webhooks' metrics.
type Admission struct {
	// Decisions is kausality_admission_decisions_total.
	Decisions *prometheus.CounterVec
	// Duration is kausality_admission_duration_seconds.
	Duration *prometheus.HistogramVec
}

// NewAdmission registers the admission metrics with reg.
func NewAdmission(reg prometheus.Registerer) *Admission {
	m := &Admission{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameAdmissionDecision,
			Help: "Admission decisions by webhook, outcome, reason and the AllowancePolicy that decided (empty when none did)."},
			[]string{LabelWebhook, LabelOutcome, LabelReason, LabelPolicy}),
		// Webhooks answer in milliseconds unless they read the API
		// server; the API server gives up after 10 seconds by default.
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameAdmissionDuration,
			Help:    "How long a webhook took to decide, by webhook.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
			[]string{LabelWebhook}),
	}
	reg.MustRegister(m.Decisions, m.Duration)
	return m
}

// Observe counts one admission decision and how long it took. A nil
// Admission records nothing.
func (m *Admission) Observe(webhook, outcome, reason, policy string, took time.Duration) {
	if m == nil {
		return
	}
	m.Decisions.WithLabelValues(webhook, outcome, reason, policy).Inc()
	m.Duration.WithLabelValues(webhook).Observe(took.Seconds())
}
