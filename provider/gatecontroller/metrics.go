package gatecontroller

import (
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Metrics are the gate controller's Prometheus metrics.
type Metrics struct {
	opened, closed, expired *prometheus.CounterVec
	openFor                 *prometheus.HistogramVec
}

// NewMetrics registers the gate metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"group", "kind"}
	m := &Metrics{
		opened:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kausality_gates_opened_total", Help: "Gates seen opening, by managed resource kind."}, labels),
		closed:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kausality_gates_closed_total", Help: "Gates closed after being open, by managed resource kind."}, labels),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kausality_gates_expired_total", Help: "Gates closed because they stayed open longer than the limit."}, labels),
		openFor: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kausality_gate_open_duration_seconds", Help: "How long gates stayed open.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}, labels),
	}
	reg.MustRegister(m.opened, m.closed, m.expired, m.openFor)
	return m
}

// transition counts a change of the GateOpen condition.
func (m *Metrics) transition(gvk schema.GroupVersionKind, prev, next xpv2.Condition, now time.Time) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"group": gvk.Group, "kind": gvk.Kind}
	wasOpen, isOpen := prev.Status == corev1.ConditionTrue, next.Status == corev1.ConditionTrue
	switch {
	case !wasOpen && isOpen:
		m.opened.With(l).Inc()
	case wasOpen && !isOpen:
		m.closed.With(l).Inc()
		m.openFor.With(l).Observe(now.Sub(prev.LastTransitionTime.Time).Seconds())
		if next.Reason == ReasonExpired {
			m.expired.With(l).Inc()
		}
	}
}
