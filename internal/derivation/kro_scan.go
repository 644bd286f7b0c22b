package derivation

import (
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// Expression is one ${…} of a kro template string.
type Expression struct {
	// Start is the offset of "${", End the offset after the closing "}".
	Start, End int
	// Text is the CEL between them.
	Text string
}

// ScanExpressions returns the ${…} expressions of s in order. Braces nest
// (a CEL map literal) and braces inside CEL string literals do not count,
// so `${ {"a": "}"}.a }` is one expression. An unterminated one is an
// error: kro refuses such a template, and a policy derived from half an
// expression would be wrong.
func ScanExpressions(s string) ([]Expression, error) {
	var out []Expression
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '$' || s[i+1] != '{' {
			continue
		}
		end, ok := closing(s, i+2)
		if !ok {
			return nil, errors.Errorf("the expression at offset %d has no closing }", i)
		}
		out = append(out, Expression{Start: i, End: end + 1, Text: s[i+2 : end]})
		i = end
	}
	return out, nil
}

// closing is the offset of the } that closes a ${ whose CEL starts at i.
func closing(s string, i int) (int, bool) {
	depth := 1
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
			i = stringEnd(s, i)
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i, true
			}
		}
	}
	return 0, false
}

// stringEnd is the offset of the quote that ends the CEL string literal
// opening at i (the last offset when it does not end), triple quotes
// included.
func stringEnd(s string, i int) int {
	q := s[i : i+1]
	if strings.HasPrefix(s[i:], q+q+q) {
		if j := strings.Index(s[i+3:], q+q+q); j >= 0 {
			return i + 3 + j + 2
		}
		return len(s) - 1
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q[0]:
			return j
		}
	}
	return len(s) - 1
}

// Reference is a field an expression reads: a dotted selection from an
// identifier, such as schema.spec.name or deployment.status.replicas.
type Reference struct {
	// Root is the identifier: schema (the instance) or a resource's id.
	Root string
	// Path is the selection below the root, canonical
	// (spec.ports[0].name); empty when the root is used whole.
	Path string
	// Optional says a step of it is kro's optional access (.?x, [?0]):
	// the field may be absent, and the expression then yields nothing.
	Optional bool
}

// References are the fields expr reads. A selection stops before a
// method call (schema.spec.name.lowerAscii() reads spec.name) and before
// anything that is not a field, index or string key; identifiers inside
// CEL string literals are text, not references.
func References(expr string) []Reference {
	var out []Reference
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'':
			i = stringEnd(expr, i) + 1
		case identStart(c) && (i == 0 || !identChar(expr[i-1]) && expr[i-1] != '.'):
			j := i
			for j < len(expr) && identChar(expr[j]) {
				j++
			}
			r, next := selection(expr, expr[i:j], j)
			if r.Path != "" || next > j {
				out = append(out, r)
			}
			i = next
		default:
			i++
		}
	}
	return out
}

// selection reads the selectors after root (ending at i) and returns the
// reference and the offset after it.
func selection(expr, root string, i int) (Reference, int) {
	r := Reference{Root: root}
	var segs fieldpath.Segments
	for i < len(expr) {
		switch expr[i] {
		case '.':
			j, opt := i+1, false
			if j < len(expr) && expr[j] == '?' {
				j, opt = j+1, true
			}
			k := j
			for k < len(expr) && identChar(expr[k]) {
				k++
			}
			if k < len(expr) && expr[k] == '(' && k > j {
				// A method call ends the selection; orValue gives an
				// absent optional field a value, so the result is
				// always there.
				if expr[j:k] == "orValue" {
					r.Optional = false
				}
				return done(r, segs), i
			}
			if k == j || !nameableKey(expr[j:k]) {
				// Not a field: a stray dot, or digits.
				return done(r, segs), i
			}
			segs = append(segs, fieldpath.Field(expr[j:k]))
			r.Optional = r.Optional || opt
			i = k
		case '[':
			seg, opt, next, ok := bracket(expr, i)
			if !ok {
				return done(r, segs), i
			}
			segs = append(segs, seg)
			r.Optional = r.Optional || opt
			i = next
		default:
			return done(r, segs), i
		}
	}
	return done(r, segs), i
}

// bracket reads [0], [?0], ["key"] or ['key'] at i.
func bracket(expr string, i int) (fieldpath.Segment, bool, int, bool) {
	j, opt := i+1, false
	if j < len(expr) && expr[j] == '?' {
		j, opt = j+1, true
	}
	if j >= len(expr) {
		return fieldpath.Segment{}, false, 0, false
	}
	if q := expr[j]; q == '"' || q == '\'' {
		end := stringEnd(expr, j)
		if end >= len(expr)-1 || expr[end] != q || expr[end+1] != ']' {
			return fieldpath.Segment{}, false, 0, false
		}
		key, err := strconv.Unquote(`"` + strings.ReplaceAll(expr[j+1:end], `"`, `\"`) + `"`)
		if err != nil || !nameableKey(key) {
			return fieldpath.Segment{}, false, 0, false
		}
		return fieldpath.Field(key), opt, end + 2, true
	}
	k := j
	for k < len(expr) && expr[k] >= '0' && expr[k] <= '9' {
		k++
	}
	if k == j || k >= len(expr) || expr[k] != ']' {
		return fieldpath.Segment{}, false, 0, false
	}
	n, err := strconv.ParseUint(expr[j:k], 10, 31)
	if err != nil {
		return fieldpath.Segment{}, false, 0, false
	}
	return fieldpath.Segment{Type: fieldpath.SegmentIndex, Index: uint(n)}, opt, k + 1, true
}

func done(r Reference, segs fieldpath.Segments) Reference {
	if len(segs) > 0 {
		r.Path = segs.String()
	}
	return r
}

func identStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func identChar(c byte) bool { return identStart(c) || (c >= '0' && c <= '9') }

// nameableKey says a map key can be a fieldpath segment that parses back
// to itself: not empty, no brackets or quotes, not all digits (an index).
func nameableKey(k string) bool {
	if k == "" || strings.ContainsAny(k, "[]'\"") {
		return false
	}
	_, err := strconv.ParseUint(k, 10, 32)
	return err != nil
}
