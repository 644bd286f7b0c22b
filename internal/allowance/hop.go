package allowance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// A Hop is one object in a causal chain.
type Hop struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// Field whose change caused the next hop, with concrete indices.
	Field string `json:"field,omitempty"`
	// User is the authenticated user that made this hop's change: the
	// initiator at the origin, a service account for controllers.
	User string `json:"user,omitempty"`
	// Timestamp in RFC 3339, UTC.
	Timestamp string `json:"timestamp,omitempty"`
	// Attestations are values captured from the object by a policy rule.
	Attestations map[string]string `json:"attestations,omitempty"`
	// Labels come from the object's own kausality.io/trace-* annotations.
	Labels map[string]string `json:"labels,omitempty"`
}

// HopOf is the hop naming obj at generation gen. Every hop of every trace
// is built here, so hops name objects one way; callers add what only they
// know (field, user, timestamp, labels).
func HopOf(obj *unstructured.Unstructured, gen int64) Hop {
	return Hop{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), Generation: gen}
}

// By is h made by user at t.
func (h Hop) By(user string, t time.Time) Hop {
	h.User, h.Timestamp = user, Timestamp(t)
	return h
}

// Key identifies the hop within a chain: kind/name/field, the order traces are
// chosen by when several could justify a mutation.
func (h Hop) Key() string {
	return h.Kind + "/" + h.Name + "/" + h.Field
}

// SameObject reports whether h and o name the same object at the same
// generation. Whether the field, user or time of the change agree is not
// asked: the function, which has no admission request, names an object's
// hop without them.
func (h Hop) SameObject(o Hop) bool {
	return h.Kind == o.Kind && h.Name == o.Name && h.Generation == o.Generation
}

// Same reports whether h and o are the same hop of a chain: the same object
// at the same generation, changed in the same field. Timestamps, users and
// attestations describe a hop but do not identify it.
func (h Hop) Same(o Hop) bool {
	return h.SameObject(o) && h.APIVersion == o.APIVersion && h.Field == o.Field
}

// A Trace is the causal chain of an object's current generation, origin first.
type Trace []Hop

// Initiator is the user of the trace's origin hop.
func (t Trace) Initiator() string {
	if len(t) == 0 {
		return ""
	}
	return t[0].User
}

// UpgradeHop is the origin hop of a change new logic made on its own: the
// UpgradeAllowance that lets it through, at its generation.
func UpgradeHop(name string, generation int64) Hop {
	return Hop{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.UpgradeAllowanceKind, Name: name, Generation: generation}
}

// FromUpgrade reports whether the chain starts at an UpgradeAllowance.
func (t Trace) FromUpgrade() bool {
	return len(t) > 0 && t[0].Kind == v1alpha1.UpgradeAllowanceKind
}

// Last is the trace's last hop: the object that carries it.
func (t Trace) Last() Hop {
	if len(t) == 0 {
		return Hop{}
	}
	return t[len(t)-1]
}

// Parent is the trace without its last hop: the chain the carrying object
// continues.
func (t Trace) Parent() Trace {
	if len(t) == 0 {
		return nil
	}
	return t[:len(t)-1]
}

// With is a new trace: t followed by h, or t itself (a copy) when it already
// ends with h's object. The generation is not compared: an object's hop is
// the change that caused what follows, and Crossplane's own bookkeeping
// writes (resource references, the composition revision) raise a
// composite's generation without being another hop of the chain.
func (t Trace) With(h Hop) Trace {
	if n := len(t); n > 0 && t[n-1].Kind == h.Kind && t[n-1].Name == h.Name {
		return slices.Clone(t)
	}
	return t.Then(h)
}

// Then is a new trace: t followed by h. It allocates once: the function
// extends a trace for every composed resource it stamps.
func (t Trace) Then(h Hop) Trace {
	out := make(Trace, len(t)+1)
	copy(out, t)
	out[len(t)] = h
	return out
}

// Extends reports whether t is parent followed by exactly one hop.
func (t Trace) Extends(parent Trace) bool {
	return len(t) == len(parent)+1 && t.Parent().Same(parent)
}

// Same reports whether t and o are the same chain, hop by hop.
func (t Trace) Same(o Trace) bool {
	return slices.EqualFunc(t, o, Hop.Same)
}

// Continues reports whether t, the chain before an object's own hop,
// continues parent: parent's hops, object by object, followed by at most
// one more hop (the parent object's own, when parent does not already end
// with it).
func (t Trace) Continues(parent Trace) bool {
	if len(t) < len(parent) || len(t) > len(parent)+1 {
		return false
	}
	return slices.EqualFunc(t[:len(parent)], parent, Hop.SameObject)
}

// Validate checks every hop names an object and carries a valid timestamp.
func (t Trace) Validate() error {
	for i, h := range t {
		switch {
		case h.Kind == "":
			return errors.Errorf("hop [%d]: kind is empty", i)
		case h.Name == "":
			return errors.Errorf("hop [%d]: name is empty", i)
		case h.Generation < 0:
			return errors.Errorf("hop [%d]: generation %d is negative", i, h.Generation)
		}
		if h.Timestamp != "" {
			if _, err := time.Parse(time.RFC3339, h.Timestamp); err != nil {
				return errors.Errorf("hop [%d]: timestamp %q is not RFC 3339", i, h.Timestamp)
			}
		}
	}
	return nil
}

// Timestamp formats t the way hops store it.
func Timestamp(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// Bounds on what an object puts into its own hop. Every allowance a
// change earns copies the hop, on the composite and on each composed
// resource, so an unbounded trace label or captured value would push a
// later write past the API server's 256 KiB annotation limit and refuse a
// permitted change.
const (
	// MaxHopValue is the most bytes one trace label or attestation may
	// hold.
	MaxHopValue = 1024
	// MaxHopValues is the most bytes all of a hop's trace labels and
	// attestations, keys and values, may hold together.
	MaxHopValues = 4096
)

// SizeErrors says which of the hop's trace labels and attestations are
// past MaxHopValue, and whether they are past MaxHopValues together, each
// as the field of obj it came from: the annotation of a label, the path of
// an attestation. Nil when the hop is within bounds.
func (h Hop) SizeErrors() map[string]string {
	var out map[string]string // made at the first error: the function asks of every hop it stamps
	total := 0
	for _, m := range []struct {
		values map[string]string
		field  func(string) string
	}{
		{h.Labels, func(k string) string { return "metadata.annotations[" + v1alpha1.AnnotationTraceLabelPrefix + k + "]" }},
		{h.Attestations, func(k string) string { return k }},
	} {
		for k, v := range m.values {
			total += len(k) + len(v)
			if len(v) > MaxHopValue {
				if out == nil {
					out = map[string]string{}
				}
				out[m.field(k)] = fmt.Sprintf("%d bytes, more than the %d a trace label or attestation may hold: every allowance of the chain copies it", len(v), MaxHopValue)
			}
		}
	}
	if len(out) == 0 && total > MaxHopValues {
		out = map[string]string{}
		out["metadata.annotations["+v1alpha1.AnnotationTraceLabelPrefix+"*]"] = fmt.Sprintf("the trace labels and attestations hold %d bytes together, more than %d: every allowance of the chain copies them", total, MaxHopValues)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// TraceLabels returns the kausality.io/trace-<label> annotations as hop
// labels, nil if there are none.
func TraceLabels(annotations map[string]string) map[string]string {
	var out map[string]string
	for k, v := range annotations {
		l, ok := strings.CutPrefix(k, v1alpha1.AnnotationTraceLabelPrefix)
		if !ok || l == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[l] = v
	}
	return out
}
