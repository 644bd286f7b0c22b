package allowance

import (
	"encoding/json"
	"slices"
	"strconv"
	"unsafe"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// The annotation encoders below write exactly the bytes encoding/json's
// Marshal writes for the same values (fuzzed against it in
// FuzzFormatIsMarshal). The function encodes an allowance and a trace for
// every composed resource on every reconcile; doing that by reflection was
// a tenth of its cost.

// bytesString is b as a string without copying it, as strings.Builder
// does: b is never written again. The function formats two annotations for
// every composed resource; the copy was a tenth of what they allocate.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// The sizes below are what the appenders write for values that need no
// escaping, so one allocation usually holds the encoding; a value that
// needs escaping only makes append grow the buffer.

func allowanceSize(a *Allowance) int {
	n := 96 + len(a.Relation) + len(a.Target.APIGroup) + len(a.Target.APIVersion) + len(a.Target.Resource) + mapSize(a.Target.External) +
		len(a.Initiator) + traceSize(a.Trace) + mapSize(a.Pending) + mapSize(a.Values)
	for _, v := range a.Verbs {
		n += len(v) + 3
	}
	for _, m := range a.Mutations {
		n += 28 + len(m.JSONPath)
		for _, v := range m.Verbs {
			n += len(v) + 3
		}
	}
	return n
}

func traceSize(t Trace) int {
	n := 2
	for i := range t {
		n += hopSize(&t[i])
	}
	return n
}

func hopSize(h *Hop) int {
	return 112 + len(h.APIVersion) + len(h.Kind) + len(h.Name) + len(h.Field) + len(h.User) + len(h.Timestamp) + mapSize(h.Attestations) + mapSize(h.Labels)
}

func mapSize(m map[string]string) int {
	n := 2
	for k, v := range m {
		n += len(k) + len(v) + 6
	}
	return n
}

func appendAllowances(b []byte, as []Allowance) []byte { return appendArray(b, as, appendAllowance) }

// appendArray appends xs as a JSON array, each element by appendElem.
func appendArray[T any](b []byte, xs []T, appendElem func([]byte, *T) []byte) []byte {
	b = append(b, '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendElem(b, &xs[i])
	}
	return append(b, ']')
}

func appendAllowance(b []byte, a *Allowance) []byte {
	b = append(b, `{"relation":`...)
	b = appendString(b, string(a.Relation))
	b = append(b, `,"target":`...)
	b = appendTarget(b, &a.Target)
	if len(a.Verbs) > 0 {
		b = append(b, `,"verbs":`...)
		b = appendStrings(b, a.Verbs)
	}
	if len(a.Mutations) > 0 {
		b = append(b, `,"mutations":[`...)
		for i, m := range a.Mutations {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"jsonPath":`...)
			b = appendString(b, m.JSONPath)
			b = append(b, `,"verbs":`...)
			if m.Verbs == nil {
				b = append(b, "null"...)
			} else {
				b = appendStrings(b, m.Verbs)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, a.Generation, 10)
	if a.Initiator != "" {
		b = append(b, `,"initiator":`...)
		b = appendString(b, a.Initiator)
	}
	if len(a.Trace) > 0 {
		b = append(b, `,"trace":`...)
		b = appendTrace(b, a.Trace)
	}
	if a.Consumed {
		b = append(b, `,"consumed":true`...)
	}
	if len(a.Pending) > 0 {
		b = append(b, `,"pending":`...)
		b = appendStringMap(b, a.Pending)
	}
	if len(a.Values) > 0 {
		b = append(b, `,"values":`...)
		b = appendStringMap(b, a.Values)
	}
	if a.Held {
		b = append(b, `,"held":true`...)
	}
	return append(b, '}')
}

func appendTarget(b []byte, t *v1alpha1.Target) []byte {
	b = append(b, '{')
	first := true
	field := func(name, v string) {
		if v == "" {
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, name...)
		b = appendString(b, v)
	}
	field(`"apiGroup":`, t.APIGroup)
	field(`"apiVersion":`, t.APIVersion)
	field(`"resource":`, t.Resource)
	if len(t.External) > 0 {
		if !first {
			b = append(b, ',')
		}
		b = append(b, `"external":`...)
		b = appendStringMap(b, t.External)
	}
	return append(b, '}')
}

func appendTrace(b []byte, t Trace) []byte { return appendArray(b, t, appendHop) }

func appendHop(b []byte, h *Hop) []byte {
	b = append(b, `{"apiVersion":`...)
	b = appendString(b, h.APIVersion)
	b = append(b, `,"kind":`...)
	b = appendString(b, h.Kind)
	b = append(b, `,"name":`...)
	b = appendString(b, h.Name)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, h.Generation, 10)
	if h.Field != "" {
		b = append(b, `,"field":`...)
		b = appendString(b, h.Field)
	}
	if h.User != "" {
		b = append(b, `,"user":`...)
		b = appendString(b, h.User)
	}
	if h.Timestamp != "" {
		b = append(b, `,"timestamp":`...)
		b = appendString(b, h.Timestamp)
	}
	if len(h.Attestations) > 0 {
		b = append(b, `,"attestations":`...)
		b = appendStringMap(b, h.Attestations)
	}
	if len(h.Labels) > 0 {
		b = append(b, `,"labels":`...)
		b = appendStringMap(b, h.Labels)
	}
	return append(b, '}')
}

func appendStrings[S ~string](b []byte, ss []S) []byte {
	return appendArray(b, ss, func(b []byte, s *S) []byte { return appendString(b, string(*s)) })
}

func appendStringMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

// appendString quotes s as encoding/json does. Strings of printable ASCII
// that JSON and HTML need not escape, all that Kubernetes names, paths and
// timestamps are made of, are copied; anything else is left to
// encoding/json, so its escaping rules stay the only ones.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
