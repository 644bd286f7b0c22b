package mutation

import (
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// parsePath is fieldpath.Parse without its lexer goroutine and channel,
// which cost more than the rest of matching a path. It accepts exactly the
// paths fieldpath.Parse accepts and returns the same segments; for a path
// fieldpath.Parse rejects it calls fieldpath.Parse, so the error is the
// same too (FuzzParsePath checks both).
func parsePath(path string) (fieldpath.Segments, error) {
	if segs, ok := scanPath(path); ok {
		return segs, nil
	}
	return fieldpath.Parse(path)
}

// scanPath splits path as fieldpath's lexer does: field names end at a
// period or a left bracket; a period is neither first nor last nor followed
// by a period or a left bracket; a bracket holds a non-empty field or index
// without brackets; a right bracket outside brackets is an error. It reports
// false on any error.
func scanPath(path string) (fieldpath.Segments, bool) {
	segs := make(fieldpath.Segments, 0, 1+strings.Count(path, ".")+strings.Count(path, "["))
	i := 0
	for i < len(path) {
		// A field name, possibly empty (at the start or after a bracket).
		j := i
		for j < len(path) && path[j] != '.' && path[j] != '[' && path[j] != ']' {
			j++
		}
		if j > i {
			segs = append(segs, fieldpath.Field(path[i:j]))
		}
		if j == len(path) {
			break
		}
		switch path[j] {
		case ']':
			return nil, false
		case '.':
			if j == 0 || j == len(path)-1 || path[j+1] == '.' || path[j+1] == '[' {
				return nil, false
			}
			i = j + 1
		case '[':
			rb := strings.IndexByte(path[j+1:], ']')
			if rb <= 0 {
				return nil, false // unterminated, or empty brackets
			}
			inner := path[j+1 : j+1+rb]
			if strings.IndexByte(inner, '[') >= 0 {
				return nil, false
			}
			segs = append(segs, fieldpath.FieldOrIndex(inner))
			i = j + 1 + rb + 1
		}
	}
	return segs, true
}

// formatSegments is fieldpath.Segments.String without fmt.
func formatSegments(segs fieldpath.Segments) string {
	var b strings.Builder
	for _, s := range segs {
		switch s.Type {
		case fieldpath.SegmentField:
			if s.Field == matchAll || strings.IndexByte(s.Field, '.') >= 0 {
				b.WriteByte('[')
				b.WriteString(s.Field)
				b.WriteByte(']')
				continue
			}
			b.WriteByte('.')
			b.WriteString(s.Field)
		case fieldpath.SegmentIndex:
			b.WriteByte('[')
			b.WriteString(strconv.FormatUint(uint64(s.Index), 10))
			b.WriteByte(']')
		}
	}
	return strings.TrimPrefix(b.String(), ".")
}

// Value is the value at path in obj, as fieldpath's Paved.GetValue reads
// it, and whether there is one; a path that does not parse has none. It
// parses without fieldpath's lexer goroutine, which dominated the cost of
// reading a few fields per request (policy captures, the function's
// desired values).
func Value(obj map[string]any, path string) (any, bool) {
	segs, err := parsePath(path)
	if err != nil {
		return nil, false
	}
	if len(segs) == 0 {
		return nil, true // as fieldpath has it: the empty path holds nothing
	}
	var v any = obj
	for _, s := range segs {
		switch s.Type {
		case fieldpath.SegmentField:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s.Field]; !ok {
				return nil, false
			}
		case fieldpath.SegmentIndex:
			l, ok := v.([]any)
			if !ok || int(s.Index) >= len(l) {
				return nil, false
			}
			v = l[s.Index]
		}
	}
	return v, true
}
