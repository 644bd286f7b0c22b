package gatecontroller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Metrics are the gate controller's Prometheus metrics.
type Metrics struct {
	openedTotal, closedTotal, expired *prometheus.CounterVec
	openFor                           *prometheus.HistogramVec
}

// NewMetrics registers the gate metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"group", "kind"}
	m := &Metrics{
		openedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kausality_gates_opened_total", Help: "Gates seen opening, by managed resource kind."}, labels),
		closedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kausality_gates_closed_total", Help: "Gates closed after being open, by managed resource kind."}, labels),
		expired:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kausality_gates_expired_total", Help: "Gates closed because they stayed open longer than the limit."}, labels),
		openFor: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kausality_gate_open_duration_seconds", Help: "How long gates stayed open.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}, labels),
	}
	reg.MustRegister(m.openedTotal, m.closedTotal, m.expired, m.openFor)
	return m
}

// opened counts a gate seen open.
func (m *Metrics) opened(gvk schema.GroupVersionKind) {
	if m != nil {
		m.openedTotal.With(labels(gvk)).Inc()
	}
}

// closed counts a gate seen closed after it was open, since openedAt
// (zero: not known, not observed).
func (m *Metrics) closed(gvk schema.GroupVersionKind, expired bool, openedAt, now time.Time) {
	if m == nil {
		return
	}
	l := labels(gvk)
	m.closedTotal.With(l).Inc()
	if !openedAt.IsZero() {
		m.openFor.With(l).Observe(now.Sub(openedAt).Seconds())
	}
	if expired {
		m.expired.With(l).Inc()
	}
}

func labels(gvk schema.GroupVersionKind) prometheus.Labels {
	return prometheus.Labels{"group": gvk.Group, "kind": gvk.Kind}
}
