package mutation

import (
	"strconv"
	"strings"
	"unsafe"
)

// pathBuf holds the path of the field a walk (Diff, Record) is at, built
// in one buffer as the walk descends and cut back as it returns. A path
// becomes a string of its own only where the walk keeps it, a recorded
// leaf or a reported mutation: a real provider's spec has dozens of fields
// a diff visits and keeps none of, and a string for each was most of what
// a diff allocated.
type pathBuf []byte

// field appends map key k the way fieldpath.Segments.String formats a field
// segment: in brackets when it contains a period or is the wildcard, after
// a period otherwise. k must be nameable. It returns the length to cut back
// to.
func (p *pathBuf) field(k string) int {
	n := len(*p)
	switch {
	case k == "*" || strings.IndexByte(k, '.') >= 0:
		*p = append(append(append(*p, '['), k...), ']')
	case n == 0:
		*p = append(*p, k...)
	default:
		*p = append(append(*p, '.'), k...)
	}
	return n
}

// index appends array index i and returns the length to cut back to.
func (p *pathBuf) index(i int) int {
	n := len(*p)
	*p = append(strconv.AppendInt(append(*p, '['), int64(i), 10), ']')
	return n
}

// cut returns to the parent whose length field or index returned.
func (p *pathBuf) cut(n int) { *p = (*p)[:n] }

// String is the path as a string of its own, to keep.
func (p pathBuf) String() string { return string(p) }

// view is the path for a predicate to read during its call (a skip or
// owned function, a lookup): it shares the buffer, which the walk
// overwrites as it moves on, so it must not be kept. Every predicate Diff
// and Record are given reads the path and returns; none stores it.
func (p pathBuf) view() string {
	return unsafe.String(unsafe.SliceData(p), len(p))
}

// newPath is a walk's buffer, starting at prefix, with room for the paths
// of a typical spec (spec.forProvider.vpcSecurityGroupIds[0] is 39 bytes)
// so it rarely grows.
func newPath(prefix string) pathBuf {
	return append(make(pathBuf, 0, max(64, 2*len(prefix))), prefix...)
}
