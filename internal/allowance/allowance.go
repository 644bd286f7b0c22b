// Package allowance holds the allowance and trace types of the kausality.io
// annotations and their codecs: strict parsing, compact output in a stable key
// order, so repeated applies of the same allowances never flap.
package allowance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// MaxAnnotationBytes bounds what the codecs parse. The API server caps all of
// an object's annotations at 256 KiB together, so anything larger did not come
// from a stored object.
const MaxAnnotationBytes = 256 << 10

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

// Key identifies the hop within a chain: kind/name/field, the order traces are
// chosen by when several could justify a mutation.
func (h Hop) Key() string {
	return h.Kind + "/" + h.Name + "/" + h.Field
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

// Extends reports whether t is parent followed by exactly one hop, comparing
// the hops' objects and generations (not timestamps).
func (t Trace) Extends(parent Trace) bool {
	if len(t) != len(parent)+1 {
		return false
	}
	for i := range parent {
		if !sameHop(t[i], parent[i]) {
			return false
		}
	}
	return true
}

func sameHop(a, b Hop) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name &&
		a.Generation == b.Generation && a.Field == b.Field
}

// An Allowance permits one layer to mutate the next. It is stored in the
// kausality.io/allowances annotation of the object whose controller may make
// the mutation.
type Allowance struct {
	Relation v1alpha1.Relation `json:"relation"`
	Target   v1alpha1.Target   `json:"target"`
	// Verbs permitted on the target object.
	Verbs []string `json:"verbs,omitempty"`
	// Mutations permitted on the target's fields (ControllerChild).
	Mutations []v1alpha1.MutationBound `json:"mutations,omitempty"`
	// Generation of the carrying object this allowance is for; it is consumed
	// once the carrying object's observed generation reaches it.
	Generation int64  `json:"generation"`
	Initiator  string `json:"initiator,omitempty"`
	Trace      Trace  `json:"trace,omitempty"`
	// Consumed marks an allowance whose change has been applied. A consumed
	// allowance is never reopened.
	Consumed bool `json:"consumed,omitempty"`
}

// ConsumedAt reports whether the allowance is used up for a carrying object
// whose observed generation is observed (ok=false: none observed yet).
// An External allowance for Delete alone is the exception: the provider
// deletes only once the object itself is deleted, which observing a
// generation says nothing about, so it is used up by the deletion (the
// object goes) or by its time limit, never by a generation.
func (a Allowance) ConsumedAt(observed int64, ok bool) bool {
	if a.Relation == v1alpha1.RelationExternal && len(a.Verbs) == 1 && a.Verbs[0] == v1alpha1.VerbDelete {
		return a.Consumed
	}
	return a.Consumed || (ok && observed >= a.Generation)
}

// HasVerb reports whether the allowance grants verb, directly or through "*".
func (a Allowance) HasVerb(verb string) bool {
	return v1alpha1.GrantsVerb(a.Verbs, verb)
}

// SortKey orders allowances deterministically (trace linearity): by the
// kind/name/field of each hop, then generation and relation.
func (a Allowance) SortKey() string {
	keys := make([]string, 0, len(a.Trace)+2)
	for _, h := range a.Trace {
		keys = append(keys, h.Key())
	}
	keys = append(keys, fmt.Sprintf("%020d", a.Generation), string(a.Relation))
	return strings.Join(keys, "|")
}

// Sort orders allowances by SortKey, in place, stably.
func Sort(as []Allowance) {
	sort.SliceStable(as, func(i, j int) bool { return as[i].SortKey() < as[j].SortKey() })
}

// Parse decodes the kausality.io/allowances annotation value strictly: unknown
// fields, an invalid relation, a missing target, a negative generation or a
// malformed hop are errors. The empty string is no allowances.
func Parse(s string) ([]Allowance, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var as []Allowance
	if err := decodeStrict(s, &as); err != nil {
		return nil, err
	}
	for i := range as {
		if err := as[i].Validate(); err != nil {
			return nil, errors.Wrapf(err, "allowance [%d]", i)
		}
	}
	return as, nil
}

// Format encodes allowances compactly; the key order is fixed by the struct
// and maps are sorted, so the same allowances always give the same string.
func Format(as []Allowance) string {
	if as == nil {
		as = []Allowance{}
	}
	return mustCompact(as)
}

// Validate checks what Parse cannot check by decoding alone.
func (a Allowance) Validate() error {
	switch a.Relation {
	case v1alpha1.RelationControllerChild:
		if a.Target.Resource == "" {
			return errors.New("relation ControllerChild needs target.resource")
		}
		for _, v := range a.Verbs {
			switch v {
			case v1alpha1.VerbCreate, v1alpha1.VerbUpdate, v1alpha1.VerbDelete, v1alpha1.VerbAll:
			default:
				return errors.Errorf("verb %q is not one of Create, Update, Delete, *", v)
			}
		}
	case v1alpha1.RelationExternal:
		if len(a.Target.External) == 0 {
			return errors.New("relation External needs target.external")
		}
		if len(a.Mutations) > 0 {
			return errors.New("relation External takes no mutations")
		}
	default:
		return errors.Errorf("relation %q is not ControllerChild or External", a.Relation)
	}
	for i, m := range a.Mutations {
		if m.JSONPath == "" {
			return errors.Errorf("mutations[%d].jsonPath is empty", i)
		}
		for _, v := range m.Verbs {
			switch v {
			case v1alpha1.MutationInsert, v1alpha1.MutationDelete, v1alpha1.MutationMutate, v1alpha1.MutationAll:
			default:
				return errors.Errorf("mutations[%d].verbs: %q is not one of Insert, Delete, Mutate, *", i, v)
			}
		}
	}
	if a.Generation < 0 {
		return errors.Errorf("generation %d is negative", a.Generation)
	}
	return errors.Wrap(a.Trace.Validate(), "trace")
}

// ParseTrace decodes the kausality.io/trace annotation value strictly. The
// empty string is no trace.
func ParseTrace(s string) (Trace, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var t Trace
	if err := decodeStrict(s, &t); err != nil {
		return nil, err
	}
	return t, t.Validate()
}

// FormatTrace encodes a trace compactly in a stable key order.
func FormatTrace(t Trace) string {
	if t == nil {
		t = Trace{}
	}
	return mustCompact(t)
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

// Freeze is the value of the kausality.io/freeze annotation: while present no
// gate opens below the object.
type Freeze struct {
	User    string `json:"user"`
	Message string `json:"message,omitempty"`
	At      string `json:"at,omitempty"`
}

// ParseFreeze decodes a kausality.io/freeze value strictly. A freeze must say
// who set it, so that whoever finds the gate closed knows whom to ask.
func ParseFreeze(s string) (Freeze, error) {
	var f Freeze
	if err := decodeStrict(s, &f); err != nil {
		return Freeze{}, err
	}
	if f.User == "" {
		return Freeze{}, errors.New("user is empty")
	}
	if f.At != "" {
		if _, err := time.Parse(time.RFC3339, f.At); err != nil {
			return Freeze{}, errors.Errorf("at %q is not RFC 3339", f.At)
		}
	}
	return f, nil
}

func decodeStrict(s string, into any) error {
	if len(s) > MaxAnnotationBytes {
		return errors.Errorf("value is %d bytes, more than the %d an object's annotations can hold", len(s), MaxAnnotationBytes)
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(into); err != nil {
		return errors.Wrap(err, "invalid JSON")
	}
	if d.More() {
		return errors.New("invalid JSON: trailing data after the value")
	}
	// Decode stops after one value; anything but white space after it is an
	// error the caller must hear about, or an edit that appended text would
	// silently lose it.
	var rest bytes.Buffer
	if _, err := rest.ReadFrom(d.Buffered()); err == nil && strings.TrimSpace(rest.String()) != "" {
		return errors.New("invalid JSON: trailing data after the value")
	}
	return nil
}

func mustCompact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types reach here; they always marshal.
		panic(errors.Wrap(err, "cannot marshal kausality annotation"))
	}
	return string(b)
}

// ExpiredAt reports whether the allowance's gate has been open longer than
// limit at now, counting from its last hop (when it was stamped on the
// carrying object). Without a readable timestamp it never expires: the
// consumption rule still closes the gate. The function and the gate
// controller both close gates by this rule, so they agree on when.
func (a Allowance) ExpiredAt(now time.Time, limit time.Duration) bool {
	if len(a.Trace) == 0 || limit <= 0 {
		return false
	}
	ts, err := time.Parse(time.RFC3339, a.Trace[len(a.Trace)-1].Timestamp)
	if err != nil {
		return false
	}
	return now.Sub(ts) > limit
}

// FrozenBy names who froze an object through its kausality.io/freeze
// annotation, "" when nobody did. An unreadable freeze still freezes: a
// freeze must never be lost to a typo.
func FrozenBy(annotations map[string]string) string {
	v, ok := annotations[v1alpha1.AnnotationFreeze]
	if !ok {
		return ""
	}
	f, err := ParseFreeze(v)
	if err != nil {
		return "an unreadable " + v1alpha1.AnnotationFreeze + " annotation"
	}
	return f.User
}
