package mutation

import (
	"slices"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Revert withholds the mutations ms: it edits desired in place so that at
// each mutation's path desired holds what observed holds. desired and
// observed are whole objects (their content maps) and paths are full paths
// such as spec.forProvider.x, as Diff returns them with prefix "spec" and
// the spec values; the whole-object convention lets a caller revert
// metadata as well as spec with the same call. A nil observed is an object
// with no fields.
//
//   - Mutate p: desired[p] becomes a deep copy of observed[p].
//   - Insert p: p is removed from desired. Removing an array item truncates
//     the array there (an array has no holes, and later items would move to
//     other indices), so Inserts of array items are processed in descending
//     index order.
//   - Delete p: desired[p] becomes a deep copy of observed[p]. Array items
//     are re-appended in ascending index order; if earlier items are missing
//     too, they are restored from observed first.
//
// Where desired lacks an ancestor of p, or holds a value of another kind
// there, Revert copies observed's value at that ancestor instead. Revert
// thus may keep more of observed than asked for, never less: every kept
// value is observed's. Whatever the verb, a path observed lacks is removed
// from desired and a path observed has is copied from it, so a stale verb
// cannot make Revert write something observed does not hold.
//
// Revert never panics. It fails, naming the path, on an unparsable path or a
// verb other than Insert, Delete or Mutate, before changing anything; and
// when it would have to write into a nil desired, after reverting what came
// before.
func Revert(desired, observed map[string]any, ms []Mutation) error {
	type op struct {
		m    Mutation
		segs fieldpath.Segments
		rank int
	}
	ops := make([]op, 0, len(ms))
	for _, m := range ms {
		switch m.Verb {
		case v1alpha1.MutationInsert, v1alpha1.MutationDelete, v1alpha1.MutationMutate:
		default:
			return errors.Errorf("cannot revert %q at path %q: verb is not Insert, Delete or Mutate", m.Verb, m.Path)
		}
		segs, err := parsePath(m.Path)
		if err != nil {
			return errors.Wrapf(err, "cannot parse path %q", m.Path)
		}
		r := 0
		if len(segs) > 0 && segs[len(segs)-1].Type == fieldpath.SegmentIndex {
			switch m.Verb {
			case v1alpha1.MutationInsert:
				r = 1
			case v1alpha1.MutationDelete:
				r = 2
			}
		}
		ops = append(ops, op{m: m, segs: segs, rank: r})
	}
	// Value changes first, then array truncations from the back, then array
	// restores from the front, so that every index is valid when its turn
	// comes.
	slices.SortStableFunc(ops, func(a, b op) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		switch a.rank {
		case 1:
			return compareSegments(b.segs, a.segs)
		case 2:
			return compareSegments(a.segs, b.segs)
		}
		return 0
	})
	for _, o := range ops {
		if err := revertOne(desired, observed, o.segs); err != nil {
			return errors.Wrapf(err, "cannot revert %s", o.m)
		}
	}
	return nil
}

func revertOne(desired, observed map[string]any, segs fieldpath.Segments) error {
	if len(segs) == 0 {
		if desired == nil {
			if len(observed) == 0 {
				return nil
			}
			return errors.New("desired is nil")
		}
		clear(desired)
		for k, v := range observed {
			desired[k] = deepCopy(v)
		}
		return nil
	}
	key := mapKey(segs[0])
	ov, oOK := observed[key]
	dv, dOK := desired[key]
	nv, nOK := keep(dv, dOK, ov, oOK, segs[1:])
	if !nOK {
		delete(desired, key)
		return nil
	}
	if desired == nil {
		return errors.New("desired is nil")
	}
	desired[key] = nv
	return nil
}

// keep returns d (present if dOK) changed so that its value at segs is o's
// value there (absent if observed lacks it), and whether the result is
// present. Maps are edited in place; arrays may be reallocated, so the
// caller stores the result.
func keep(d any, dOK bool, o any, oOK bool, segs fieldpath.Segments) (any, bool) {
	if !oOK {
		return remove(d, dOK, segs)
	}
	if len(segs) == 0 || !dOK {
		return deepCopy(o), true
	}
	switch oc := o.(type) {
	case map[string]any:
		key := mapKey(segs[0])
		ov, ok := oc[key]
		if !ok {
			return remove(d, dOK, segs)
		}
		dm, ok := d.(map[string]any)
		if !ok || dm == nil {
			return deepCopy(o), true
		}
		dv, dHas := dm[key]
		if nv, nOK := keep(dv, dHas, ov, true, segs[1:]); nOK {
			dm[key] = nv
		} else {
			delete(dm, key)
		}
		return dm, true
	case []any:
		i, ok := arrayIndex(segs[0])
		if !ok || i >= len(oc) {
			return remove(d, dOK, segs)
		}
		ds, ok := d.([]any)
		if !ok {
			return deepCopy(o), true
		}
		if i < len(ds) {
			if nv, nOK := keep(ds[i], true, oc[i], true, segs[1:]); nOK {
				ds[i] = nv
			}
			return ds, true
		}
		// Fill the gap from observed: an array has no holes.
		for j := len(ds); j <= i; j++ {
			ds = append(ds, deepCopy(oc[j]))
		}
		return ds, true
	}
	// observed holds a scalar where the path goes deeper: it lacks the path.
	return remove(d, dOK, segs)
}

// remove returns d without the value at segs, and whether d is still present.
func remove(d any, dOK bool, segs fieldpath.Segments) (any, bool) {
	if len(segs) == 0 || !dOK {
		return nil, false
	}
	switch dc := d.(type) {
	case map[string]any:
		key := mapKey(segs[0])
		dv, ok := dc[key]
		if !ok {
			return d, true
		}
		if len(segs) == 1 {
			delete(dc, key)
			return dc, true
		}
		if nv, nOK := remove(dv, true, segs[1:]); nOK {
			dc[key] = nv
		}
		return dc, true
	case []any:
		i, ok := arrayIndex(segs[0])
		if !ok || i >= len(dc) {
			return d, true
		}
		if len(segs) == 1 {
			// Clip, so a later restore appends to a new backing array rather
			// than into memory another slice may still see.
			return slices.Clip(dc[:i]), true
		}
		if nv, nOK := remove(dc[i], true, segs[1:]); nOK {
			dc[i] = nv
		}
		return dc, true
	}
	return d, true
}

// mapKey is the key a segment names in a map. An index segment names the
// key of its decimal form, as Pattern matching treats them alike.
func mapKey(s fieldpath.Segment) string {
	if s.Type == fieldpath.SegmentIndex {
		return strconv.FormatUint(uint64(s.Index), 10)
	}
	return s.Field
}

// arrayIndex is the index a segment names in an array.
func arrayIndex(s fieldpath.Segment) (int, bool) {
	if s.Type != fieldpath.SegmentIndex {
		return 0, false
	}
	return int(s.Index), true
}

// compareSegments orders paths: fields by name, indices numerically, a
// parent before its children.
func compareSegments(a, b fieldpath.Segments) int {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		if x.Type != y.Type {
			return int(x.Type) - int(y.Type)
		}
		if x.Type == fieldpath.SegmentIndex {
			if x.Index != y.Index {
				if x.Index < y.Index {
					return -1
				}
				return 1
			}
			continue
		}
		if x.Field != y.Field {
			if x.Field < y.Field {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// deepCopy copies JSON-shaped values; other values are returned as they are.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
