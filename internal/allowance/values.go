package allowance

import (
	"maps"
	"slices"

	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// ValuesOf records what the mutations ms set in obj, in the applied
// record's codec: the hash of each leaf under a mutated field, or Absent
// for a field it removes; skip leaves out fields (the gate). It is how a
// change is pinned to its values: a pending allowance's (Pending), and a
// hand edit's (Values).
func ValuesOf(obj map[string]any, ms []mutation.Mutation, skip func(string) bool) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		v, present := mutation.Value(obj, m.Path)
		if !present {
			out[m.Path] = Absent
			continue
		}
		maps.Copy(out, mutation.Record(m.Path, v, skip))
	}
	return out
}

// Pinned is a with the values the change it was issued for sets
// (ValuesOf): its gate ships a change of those fields only while the spec
// holds them.
func (a Allowance) Pinned(values map[string]string) Allowance {
	a.Values = values
	return a
}

// Pins reports whether a, pinned to values, lets the leaf at path ship
// when the spec's record is spec: the leaf holds the value a was issued
// for, or is gone where a's change removed it or a field above it. An
// allowance without values pins nothing.
func (a Allowance) Pins(path string, spec mutation.Applied) bool {
	if a.Values == nil {
		return true
	}
	if h, ok := spec[path]; ok {
		return a.Values[path] == h
	}
	for k, v := range a.Values {
		if v == Absent && (k == path || mutation.Under(path, k)) {
			return true
		}
	}
	return false
}

// KeepValues is as with the values of every pinned allowance restored
// from the stored allowance it is the same as, and whether any was
// restored: a writer (a stale pipeline run, a buggy step) must not re-pin
// a hand edit's allowance to the value it writes.
func KeepValues(as, stored []Allowance) (out []Allowance, changed bool) {
	return keepStored(as, stored, func(a *Allowance) *map[string]string { return &a.Values }, nil)
}

// keepStored is as with the map field of every allowance (those selects
// picks, all when nil) restored from the stored allowance it is the same
// as, where that one has the field set, and whether any was restored.
func keepStored(as, stored []Allowance, field func(*Allowance) *map[string]string, selects func(Allowance) bool) (out []Allowance, changed bool) {
	out = as
	for i, a := range as {
		if selects != nil && !selects(a) {
			continue
		}
		j := slices.IndexFunc(stored, func(s Allowance) bool { return len(*field(&s)) > 0 && s.Same(a) })
		if j < 0 || maps.Equal(*field(&stored[j]), *field(&a)) {
			continue
		}
		if !changed {
			out = slices.Clone(as)
		}
		*field(&out[i]) = *field(&stored[j])
		changed = true
	}
	return out, changed
}
