package report

import (
	"fmt"
	"strings"
)

// VerbOpenGate is the verb of a withheld line that kept a gate shut
// rather than a change from a composed resource's spec.
const VerbOpenGate = "open gate"

// logOnlyPrefix and auditPrefix start a line Log or Audit mode reported
// and let through.
const (
	logOnlyPrefix = "(Log mode, let through) "
	auditPrefix   = "(Audit mode, let through) "
)

// Withheld is one change the function kept from a composed resource (or,
// in Log mode, would have kept and let through), as the XR's
// KausalityAllowed condition and its results carry it. The function
// writes it and `kubectl kausality explain` reads it back, so the line's
// format has this one owner.
type Withheld struct {
	// Resource is the composition resource name.
	Resource string `json:"resource"`
	// Kind and Name are the composed resource's.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Verb is what was withheld: Create or Delete of the object, a
	// mutation verb (Insert, Delete, Mutate) of Path, or VerbOpenGate.
	Verb string `json:"verb"`
	// Path is the field of a mutation ("" for an object verb).
	Path string `json:"path,omitempty"`
	// Reason is why nothing permitted it.
	Reason string `json:"reason"`
	// LogOnly says Log or Audit mode reported it and let it through;
	// Audit says which.
	LogOnly bool `json:"logOnly,omitempty"`
	Audit   bool `json:"audit,omitempty"`
}

// String is the line the XR's results and conditions carry.
func (w Withheld) String() string {
	what := w.Verb
	if w.Path != "" {
		what += " " + w.Path
	}
	s := fmt.Sprintf("resource %s (%s %s): withheld %s: %s", w.Resource, w.Kind, w.Name, what, w.Reason)
	switch {
	case w.LogOnly && w.Audit:
		s = auditPrefix + s
	case w.LogOnly:
		s = logOnlyPrefix + s
	}
	return s
}

// ParseWithheld reads the lines of a KausalityAllowed condition's message,
// which the function joins with "; ". A reason may itself hold "; ", so a
// line ends only where the next one starts. Text that is no line (an older
// format, a hand edit) is skipped: the CLI explains what it can read.
func ParseWithheld(msg string) []Withheld {
	var out []Withheld
	for _, part := range splitLines(msg) {
		if w, ok := parseLine(part); ok {
			out = append(out, w)
		}
	}
	return out
}

// splitLines cuts msg at every "; " that starts another line.
func splitLines(msg string) []string {
	var parts []string
	start := 0
	for i := 0; i+2 <= len(msg); i++ {
		if msg[i] != ';' || msg[i+1] != ' ' {
			continue
		}
		rest := msg[i+2:]
		if strings.HasPrefix(rest, "resource ") || strings.HasPrefix(rest, logOnlyPrefix+"resource ") || strings.HasPrefix(rest, auditPrefix+"resource ") {
			parts = append(parts, msg[start:i])
			start = i + 2
		}
	}
	return append(parts, msg[start:])
}

// parseLine reads one line String wrote.
func parseLine(s string) (Withheld, bool) {
	var w Withheld
	if rest, ok := strings.CutPrefix(s, logOnlyPrefix); ok {
		w.LogOnly, s = true, rest
	} else if rest, ok := strings.CutPrefix(s, auditPrefix); ok {
		w.LogOnly, w.Audit, s = true, true, rest
	}
	s, ok := strings.CutPrefix(s, "resource ")
	if !ok {
		return Withheld{}, false
	}
	// The resource name and kind hold no spaces; the object name none.
	res, s, ok := strings.Cut(s, " (")
	if !ok {
		return Withheld{}, false
	}
	obj, s, ok := strings.Cut(s, "): withheld ")
	if !ok {
		return Withheld{}, false
	}
	kind, name, ok := strings.Cut(obj, " ")
	if !ok {
		return Withheld{}, false
	}
	w.Resource, w.Kind, w.Name = res, kind, name
	if rest, ok := strings.CutPrefix(s, VerbOpenGate); ok {
		w.Verb, s = VerbOpenGate, rest
	} else {
		i := strings.IndexAny(s, " :")
		if i <= 0 {
			return Withheld{}, false
		}
		w.Verb, s = s[:i], s[i:]
	}
	if rest, ok := strings.CutPrefix(s, " "); ok {
		// A path may hold ": " inside a quoted key: its end is the
		// first ": " outside brackets.
		end := pathEnd(rest)
		if end < 0 {
			return Withheld{}, false
		}
		w.Path, s = rest[:end], rest[end:]
	}
	w.Reason, ok = strings.CutPrefix(s, ": ")
	return w, ok
}

// pathEnd is the index of the first ": " of s outside brackets, -1 when
// there is none.
func pathEnd(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ':':
			if depth == 0 && i+1 < len(s) && s[i+1] == ' ' {
				return i
			}
		}
	}
	return -1
}
