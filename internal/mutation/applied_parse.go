package mutation

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// ParseApplied parses the annotation value. An empty value is no record. It
// is strict, because a record that parses loosely could make a propagation
// look like drift: the value must be a JSON object of canonical field paths
// to 12 lowercase hex digits, without duplicate keys or trailing data.
func ParseApplied(s string) (Applied, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > MaxAppliedBytes {
		return nil, errors.Errorf("applied record has %d bytes, more than the %d an annotation can hold", len(s), MaxAppliedBytes)
	}
	if a, ok := parseAppliedPlain(s); ok {
		return a, nil
	}
	return parseAppliedJSON(s)
}

// parseAppliedJSON is ParseApplied with encoding/json's tokenizer, for any
// value parseAppliedPlain does not take.
func parseAppliedJSON(s string) (Applied, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	t, err := dec.Token()
	if err != nil {
		return nil, errors.Wrap(err, "applied record is not valid JSON")
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.Errorf("applied record must be a JSON object of path to hash, not %s", describeToken(t))
	}
	a := Applied{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, errors.Wrap(err, "applied record is not valid JSON")
		}
		k, ok := t.(string)
		if !ok {
			return nil, errors.Errorf("applied record: unexpected %s", describeToken(t))
		}
		t, err = dec.Token()
		if err != nil {
			return nil, errors.Wrapf(err, "applied record: path %q: not valid JSON", k)
		}
		v, ok := t.(string)
		if !ok {
			return nil, errors.Errorf("applied record: path %q: hash must be a string, not %s", k, describeToken(t))
		}
		if _, dup := a[k]; dup {
			return nil, errors.Errorf("applied record: path %q appears twice", k)
		}
		if err := checkPath(k); err != nil {
			return nil, errors.Wrap(err, "applied record")
		}
		if !isHash(v) {
			return nil, errors.Errorf("applied record: path %q: hash %q is not %d lowercase hex digits", k, v, hashLen)
		}
		a[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.Wrap(err, "applied record is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("applied record has trailing data after the JSON object")
	}
	return a, nil
}

// parseAppliedPlain parses the form String writes, a flat JSON object of
// valid entries whose keys and values are printable ASCII without escapes,
// without encoding/json's tokenizer, which allocates for every token. It
// reports false for anything else, valid or not, and ParseApplied then
// decodes it as before, so it accepts nothing ParseApplied rejects and
// yields the same record for what it accepts.
func parseAppliedPlain(s string) (Applied, bool) {
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return nil, false
	}
	// Sized once, not grown through every power of two of a real
	// provider's spec.
	a := make(Applied, SizeHint(s))
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return a, skipSpace(s, i+1) == len(s)
	}
	for {
		k, j, ok := plainString(s, i)
		if !ok {
			return nil, false
		}
		if i = skipSpace(s, j); i == len(s) || s[i] != ':' {
			return nil, false
		}
		v, j, ok := plainString(s, skipSpace(s, i+1))
		if !ok {
			return nil, false
		}
		if _, dup := a[k]; dup || !isHash(v) || checkPath(k) != nil {
			return nil, false
		}
		a[k] = v
		if i = skipSpace(s, j); i == len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return a, skipSpace(s, i+1) == len(s)
		default:
			return nil, false
		}
	}
}

// SizeHint is how many entries the record s, an annotation's value, holds
// at most, read off it without parsing it: one per comma and one more.
// It is capped, so a value of commas does not buy a large map.
func SizeHint(s string) int {
	return min(strings.Count(s, ",")+1, maxSizeHint)
}

// maxSizeHint bounds SizeHint.
const maxSizeHint = 256

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the JSON string starting at s[i] when it holds only
// printable ASCII and no escapes, returning its value and the index after
// its closing quote.
func plainString(s string, i int) (string, int, bool) {
	if i == len(s) || s[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

func describeToken(t json.Token) string {
	switch x := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(x))
	case string:
		return fmt.Sprintf("string %q", x)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T %v", t, t)
}

// checkPath accepts canonical paths only: Owns and Unchanged compare paths
// as strings, so spec['a'] would never match spec.a.
func checkPath(p string) error {
	if plainCanonical(p) {
		return nil
	}
	segs, err := parsePath(p)
	if err != nil {
		return errors.Wrapf(err, "cannot parse path %q", p)
	}
	if c := formatSegments(segs); c != p {
		return errors.Errorf("path %q is not canonical, want %q", p, c)
	}
	return nil
}

// plainCanonical reports whether p is certainly canonical without parsing
// it: field names of neither brackets, periods nor the wildcard, joined by
// single periods, and indices of at most nine digits without a leading zero.
// Every applied record of every composed resource is made of such paths;
// anything else is left to the full check (FuzzCheckPath compares them).
func plainCanonical(p string) bool {
	if p == "" || p[0] == '.' || p[0] == '[' {
		return false
	}
	field := 0 // length of the field name being read
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '.':
			if field == 0 && p[i-1] != ']' {
				return false
			}
			if i == len(p)-1 || p[i+1] == '.' || p[i+1] == '[' {
				return false
			}
			field = 0
		case '[':
			if field == 0 && p[i-1] != ']' {
				return false
			}
			j := i + 1
			for j < len(p) && p[j] >= '0' && p[j] <= '9' {
				j++
			}
			digits := j - i - 1
			if j == len(p) || p[j] != ']' || digits == 0 || digits > 9 || (digits > 1 && p[i+1] == '0') {
				return false
			}
			i, field = j, 0
			if i+1 < len(p) && p[i+1] != '.' && p[i+1] != '[' {
				return false
			}
		case ']', '*', '\'', '"':
			return false
		default:
			field++
		}
	}
	return true
}

func isHash(s string) bool {
	if len(s) != hashLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
