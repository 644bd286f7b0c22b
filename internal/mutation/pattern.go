package mutation

import (
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// matchAll is the pattern that covers every path, the root included.
const matchAll = "*"

// Pattern is a compiled path pattern: fieldpath syntax in which a [*] segment
// matches any one array index or map key, or the single "*" that matches
// every path. Compiling once lets the function match many mutations without
// parsing the policy's paths again.
//
// A pattern covers a path when it matches it or a prefix of it on segment
// boundaries, because a bound on a field permits changes anywhere below it:
// spec.forProvider covers spec.forProvider.tags[3] but not
// spec.forProviderX. The zero Pattern covers nothing.
type Pattern struct {
	all  bool
	segs fieldpath.Segments
}

// ParsePattern compiles s. Errors name the pattern and say what is wrong, as
// they end up in policy status conditions.
func ParsePattern(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, errors.New("path pattern is empty")
	}
	if s == matchAll {
		return Pattern{all: true}, nil
	}
	segs, err := parsePath(s)
	if err != nil {
		return Pattern{}, errors.Wrapf(err, "cannot parse path pattern %q", s)
	}
	if len(segs) == 0 {
		return Pattern{}, errors.Errorf("path pattern %q has no segments", s)
	}
	for i, sg := range segs {
		// fieldpath strips quotes, so [''] parses to an empty field name
		// that no object can have.
		if sg.Type == fieldpath.SegmentField && sg.Field == "" {
			return Pattern{}, errors.Errorf("path pattern %q: segment %d is empty", s, i)
		}
	}
	return Pattern{segs: segs}, nil
}

// String is the pattern in canonical fieldpath syntax; ParsePattern of it
// yields the same pattern. Wildcards are written [*].
func (p Pattern) String() string {
	if p.all {
		return matchAll
	}
	return formatSegments(p.segs)
}

// Covers reports whether p covers the concrete path. An unparsable path is
// never covered: a path nobody can read must not slip through a bound.
func (p Pattern) Covers(path string) bool { return p.matchPath(path, false) }

// Overlaps reports whether a change at the concrete path can touch a field p
// names: p covers path, or path is an ancestor of what p names (a whole
// map inserted at spec.parameters overlaps spec.parameters.size). Triggers
// use it; bounds use Covers, which never widens a grant to an ancestor.
func (p Pattern) Overlaps(path string) bool { return p.matchPath(path, true) }

func (p Pattern) matchPath(path string, ancestors bool) bool {
	if p.all {
		return true
	}
	if len(p.segs) == 0 {
		return false
	}
	segs, err := parsePath(path)
	if err != nil {
		return false
	}
	return p.matchSegments(segs, ancestors)
}

func (p Pattern) coversSegments(path fieldpath.Segments) bool { return p.matchSegments(path, false) }

// matchSegments matches p against path segment by segment. Without
// ancestors, path must be at least as long as p (p covers it or a prefix of
// it); with ancestors, a shorter path matches when p continues below it.
func (p Pattern) matchSegments(path fieldpath.Segments, ancestors bool) bool {
	if p.all {
		return true
	}
	if len(p.segs) == 0 || (!ancestors && len(p.segs) > len(path)) {
		return false
	}
	for i := range min(len(p.segs), len(path)) {
		if !segmentMatches(p.segs[i], path[i]) {
			return false
		}
	}
	return true
}

// segmentMatches compares one pattern segment with one path segment. A map
// key that looks like a number is written spec.tags.0 but a policy author
// may well write spec.tags[0]; an object position is either a map or an
// array, so treating the two alike cannot confuse two fields.
func segmentMatches(p, s fieldpath.Segment) bool {
	if p.Type == fieldpath.SegmentField && p.Field == matchAll {
		return true
	}
	switch {
	case p.Type == fieldpath.SegmentField && s.Type == fieldpath.SegmentField:
		return p.Field == s.Field
	case p.Type == s.Type:
		return p.Index == s.Index
	case p.Type == fieldpath.SegmentField:
		return p.Field == strconv.FormatUint(uint64(s.Index), 10)
	default:
		return s.Field == strconv.FormatUint(uint64(p.Index), 10)
	}
}

// verbMask is a set of mutation verbs.
type verbMask uint8

const (
	maskInsert verbMask = 1 << iota
	maskDelete
	maskMutate
	maskAll = maskInsert | maskDelete | maskMutate
)

// maskOf is the set a verb names; zero for an unknown verb.
func maskOf(v v1alpha1.MutationVerb) verbMask {
	switch v {
	case v1alpha1.MutationInsert:
		return maskInsert
	case v1alpha1.MutationDelete:
		return maskDelete
	case v1alpha1.MutationMutate:
		return maskMutate
	case v1alpha1.MutationAll:
		return maskAll
	}
	return 0
}

// CoveredBy reports whether some bound permits m: its pattern covers m.Path
// and its verbs include m.Verb or "*". Bounds whose pattern does not parse
// never cover anything; callers validate policies up front (CompileBounds).
// A mutation whose verb is "*" needs a bound that permits every verb, and
// one with any other verb is never covered. Use Bounds when matching many
// mutations against the same bounds.
func CoveredBy(m Mutation, bounds []v1alpha1.MutationBound) bool {
	return BoundsOf(bounds).Covers(m)
}

// BoundsOf compiles bounds leniently, as CoveredBy reads them: a bound whose
// pattern does not parse is left out and unknown verbs are ignored, where
// CompileBounds fails. BoundsOf(bs).Covers(m) is CoveredBy(m, bs), for
// matching many mutations against bounds read from annotations, such as an
// allowance's, without compiling them for each mutation.
func BoundsOf(bounds []v1alpha1.MutationBound) Bounds {
	var b Bounds
	for _, bd := range bounds {
		p, err := ParsePattern(bd.JSONPath)
		if err != nil {
			continue
		}
		var verbs verbMask
		for _, v := range bd.Verbs {
			verbs |= maskOf(v)
		}
		b.bs = append(b.bs, bound{p: p, verbs: verbs})
	}
	return b
}

// Bounds are compiled mutation bounds, for matching many mutations against
// the same policy without parsing its paths each time. The zero Bounds covers
// nothing.
type Bounds struct {
	bs []bound
}

type bound struct {
	p     Pattern
	verbs verbMask
}

// CompileBounds compiles bs. It fails on the first bound whose jsonPath does
// not parse or whose verbs are not Insert, Delete, Mutate or "*", naming the
// bound, so policy status can say what to fix.
func CompileBounds(bs []v1alpha1.MutationBound) (Bounds, error) {
	out := Bounds{bs: make([]bound, 0, len(bs))}
	for i, b := range bs {
		p, err := ParsePattern(b.JSONPath)
		if err != nil {
			return Bounds{}, errors.Wrapf(err, "mutations[%d]: invalid jsonPath %q", i, b.JSONPath)
		}
		var m verbMask
		for _, v := range b.Verbs {
			vm := maskOf(v)
			if vm == 0 {
				return Bounds{}, errors.Errorf("mutations[%d] (jsonPath %q): verb %q is not one of Insert, Delete, Mutate, *", i, b.JSONPath, v)
			}
			m |= vm
		}
		out.bs = append(out.bs, bound{p: p, verbs: m})
	}
	return out, nil
}

// Covers reports whether some bound permits m, as CoveredBy does.
func (b Bounds) Covers(m Mutation) bool {
	need := maskOf(m.Verb)
	if need == 0 {
		return false
	}
	var path fieldpath.Segments
	parsed := false
	for _, bd := range b.bs {
		if bd.verbs&need != need {
			continue
		}
		if bd.p.all {
			return true
		}
		if !parsed {
			var err error
			if path, err = parsePath(m.Path); err != nil {
				return false
			}
			parsed = true
		}
		if bd.p.coversSegments(path) {
			return true
		}
	}
	return false
}

// BoundsFor are bounds permitting exactly ms, one per mutation: how an
// External allowance names the spec fields its gate ships.
func BoundsFor(ms []Mutation) []v1alpha1.MutationBound {
	out := make([]v1alpha1.MutationBound, 0, len(ms))
	for _, m := range ms {
		out = append(out, v1alpha1.MutationBound{JSONPath: m.Path, Verbs: []v1alpha1.MutationVerb{m.Verb}})
	}
	return out
}

// Named are the mutations bounds name, one per path and verb; a bound
// without verbs names its path with every verb ("*").
func Named(bounds []v1alpha1.MutationBound) []Mutation {
	var out []Mutation
	for _, b := range bounds {
		for _, v := range b.Verbs {
			out = append(out, Mutation{Path: b.JSONPath, Verb: v})
		}
		if len(b.Verbs) == 0 {
			out = append(out, Mutation{Path: b.JSONPath, Verb: v1alpha1.MutationAll})
		}
	}
	return out
}
