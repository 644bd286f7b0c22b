package mutation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxAppliedBytes bounds what ParseApplied reads. The API server caps all of
// an object's annotations at 256 KiB together, so anything larger did not come
// from a stored object.
const MaxAppliedBytes = 256 << 10

// hashLen is the number of hex digits of a leaf hash: 48 bits tell a changed
// value from an unchanged one with ample margin while keeping the annotation
// small.
const hashLen = 12

// Applied is the record of what the function last let through for a managed
// resource, so that propagation (desired changed since last time) can be told
// from drift correction (desired unchanged, observed differs). It maps each
// leaf path to a short hash of the leaf's value and is stored as JSON in the
// annotation kausality.io/applied. Hashes, not values, keep the annotation
// small and keep secrets in specs out of it.
//
// A nil or empty Applied means no record: nothing is owned, nothing is
// unchanged.
type Applied map[string]string

// Record returns the record of desired, the value at prefix: one entry per
// leaf, where leaves are scalars and empty maps and arrays. A map with a key
// the fieldpath syntax cannot name is recorded as one leaf, as Diff treats
// it as one value. Paths for which skip is true are left out; skip may be
// nil, and reads the path during its call only (see Add). A nil desired
// (absent) records nothing.
func Record(prefix string, desired any, skip func(string) bool) Applied {
	a := Applied{}
	a.Add(prefix, desired, skip, nil)
	return a
}

// Add records into a the leaves of v, the value at prefix, as Record
// does, leaving out those keep rejects (nil: none) or a already has. It
// is how a record grows by the leaves of another value without a record
// of its own for them.
//
// skip and keep read the path they are given during the call only: it
// shares a buffer the walk reuses.
func (a Applied) Add(prefix string, v any, skip, keep func(string) bool) {
	// Only what a held before can be met again: a walk of one value
	// visits each path once, and never below a leaf it recorded.
	w := recorder{out: a, had: len(a) > 0, skip: skip, keep: keep, path: newPath(prefix)}
	if v == nil || w.skipped() {
		return
	}
	w.record(v)
}

// recorder walks a value for Record and Add; path is the field it is at.
type recorder struct {
	out        Applied
	had        bool // out held entries before the walk
	skip, keep func(string) bool
	path       pathBuf
}

func (w *recorder) skipped() bool {
	if w.skip != nil && w.skip(w.path.view()) {
		return true
	}
	if !w.had {
		return false
	}
	_, have := w.out[w.path.view()]
	return have
}

func (w *recorder) record(v any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 || !allNameable(x) {
			break
		}
		for k, e := range x {
			parent := w.path.field(k)
			if !w.skipped() {
				w.record(e)
			}
			w.path.cut(parent)
		}
		return
	case []any:
		if len(x) == 0 {
			break
		}
		for i, e := range x {
			parent := w.path.index(i)
			if !w.skipped() {
				w.record(e)
			}
			w.path.cut(parent)
		}
		return
	}
	if w.keep == nil || w.keep(w.path.view()) {
		w.out[w.path.String()] = hashOf(v)
	}
}

func allNameable(m map[string]any) bool {
	for k := range m {
		if !nameable(k) {
			return false
		}
	}
	return true
}

// String is the annotation value: compact JSON with sorted keys, so that
// applying the same record again does not change the object.
func (a Applied) String() string {
	if a == nil {
		return "{}"
	}
	// Keys sorted by byte order, strings escaped, as encoding/json encodes
	// a map of strings.
	// The keys of most records fit in an array on the stack.
	var small [64]string
	keys := small[:0]
	n := 2
	for k, v := range a {
		keys = append(keys, k)
		n += len(k) + len(v) + 6
	}
	slices.Sort(keys)
	// A strings.Builder hands over the bytes it was grown to: the value is
	// allocated once, where a bytes.Buffer would copy it. Each string is
	// quoted in a buffer on the stack first.
	var b strings.Builder
	b.Grow(n)
	var quoted [256]byte
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendString(quoted[:0], k))
		b.WriteByte(':')
		b.Write(appendString(quoted[:0], a[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// Owns reports whether path is a recorded leaf or lies above one on segment
// boundaries: whether the last apply set something at or below path, which
// server-side apply will remove if the next apply does not set it.
func (a Applied) Owns(path string) bool {
	for k := range a {
		if Under(k, path) {
			return true
		}
	}
	return false
}

// Owner is a's Owns for many questions: it indexes a once, so each answer
// is a lookup instead of a pass over the record. A composed resource's
// diff asks once for every field the provider late-initialized, and a
// real provider's spec has dozens.
func (a Applied) Owner() func(path string) bool {
	if len(a) <= smallRecord {
		return a.Owns
	}
	// Every path some leaf is Under: the leaf itself and each of its
	// prefixes that ends on a segment boundary, as Under decides it.
	above := make(map[string]struct{}, 3*len(a))
	for k := range a {
		above[k] = struct{}{}
		open, closed := -1, -1 // the last '[' and ']' before i
		for i := 0; i < len(k); i++ {
			switch c := k[i]; c {
			case '.', '[':
				if open <= closed {
					above[k[:i]] = struct{}{}
				}
				if c == '[' {
					open = i
				}
			case ']':
				closed = i
			}
		}
	}
	return func(path string) bool {
		if path == "" {
			return true
		}
		_, ok := above[path]
		return ok
	}
}

// smallRecord is the size up to which a pass over a record answers Owns
// faster than building an index.
const smallRecord = 8

// Unchanged reports whether desired's value at path (present false when
// desired lacks it) is exactly what was last applied there: every recorded
// leaf under path matches desired's leaves there, and desired has no others.
// A difference from observed at an unchanged path is drift, not
// propagation. Without a record (nil or empty) nothing is unchanged.
//
// value is compared whole, as Unchanged has no skip function: for a path
// above a skipped one (an Insert of a whole spec, say) the skipped fields
// count too, and since Record left them out, such a path counts as changed
// whenever desired sets a skipped field below it.
func (a Applied) Unchanged(path string, value any, present bool) bool {
	if len(a) == 0 {
		return false
	}
	var now Applied
	if present {
		now = Applied{}
		now.Add(path, value, nil, nil)
	}
	n := 0
	for k, h := range a {
		if !Under(k, path) {
			continue
		}
		n++
		if now[k] != h {
			return false
		}
	}
	return n == len(now)
}

// hashOf is the short hash of the canonical JSON of v.
func hashOf(v any) string {
	// Most leaves are short scalars: write them into a buffer on the
	// stack, not one allocated for each leaf.
	var small [128]byte
	b := bytes.NewBuffer(small[:0])
	writeCanonical(b, v)
	sum := sha256.Sum256(b.Bytes())
	// Encoded on the stack: the string is the one allocation of a leaf.
	var h [hashLen]byte
	hex.Encode(h[:], sum[:hashLen/2])
	return string(h[:])
}

// writeCanonical writes v as JSON with sorted keys and numbers in one form
// per value, so the hash does not depend on Go types or map order.
func writeCanonical(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		b.Write(appendString(b.AvailableBuffer(), x))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(appendString(b.AvailableBuffer(), k))
			b.WriteByte(':')
			writeCanonical(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	default:
		if n, ok := toNumber(v); ok {
			b.WriteString(n.String())
			return
		}
		// Not JSON-shaped: encoding/json's view, or Go's, is still
		// deterministic for the same value.
		if j, err := json.Marshal(v); err == nil {
			b.Write(j)
			return
		}
		// Sprintf, not Fprintf: a writer behind an interface would move
		// every hash's buffer to the heap (hashOf).
		b.WriteString(fmt.Sprintf("%#v", v)) //nolint:staticcheck // see above
	}
}

// appendString appends s to dst as encoding/json encodes a string.
func appendString(dst []byte, s string) []byte {
	if jsonSafe(s) {
		return append(append(append(dst, '"'), s...), '"')
	}
	j, _ := json.Marshal(s) //nolint:errchkjson // a string cannot fail to encode
	return append(dst, j...)
}

// jsonSafe reports whether encoding/json writes s between quotes unchanged:
// printable ASCII that it neither escapes nor, as HTML, replaces.
func jsonSafe(s string) bool {
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Changed are the leaf paths at which a and b differ, sorted: recorded in
// one and not the other, or with different hashes.
func (a Applied) Changed(b Applied) []string {
	var out []string
	for k, h := range a {
		if b[k] != h {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
