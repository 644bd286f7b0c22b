// Package mutation is the single place where Kausality turns two versions of
// an object into field-level mutations, and matches those mutations against
// the path patterns of allowances and policies. It is pure: no I/O, no
// clients, so the composition function and the webhook agree on what a
// mutation is.
//
// Values are JSON-shaped, as encoding/json or unstructured.Unstructured hold
// them: map[string]any, []any, string, bool, nil and numbers of any Go
// numeric type or json.Number. Other types are compared as opaque values.
//
// Paths use crossplane-runtime fieldpath syntax with concrete indices, e.g.
// spec.forProvider.tags[0] or metadata.annotations[kausality.io/x], in the
// canonical form fieldpath.Segments.String produces, so a path Diff returns
// and a path Record stores compare equal as strings.
package mutation

import (
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Mutation is one field-level change between observed and desired, with
// concrete indices. It is what policies bound and what traces record.
type Mutation struct {
	// Path of the field in fieldpath syntax, e.g. spec.forProvider.tags[0].
	Path string `json:"path"`
	// Verb says whether the change inserts, deletes or mutates the field.
	Verb v1alpha1.MutationVerb `json:"verb"`
}

// String renders the mutation for conditions and warnings, e.g.
// "Mutate spec.forProvider.instanceClass".
func (m Mutation) String() string {
	if m.Path == "" {
		return string(m.Verb)
	}
	return string(m.Verb) + " " + m.Path
}

// A DiffOption configures Diff.
type DiffOption func(*diffOptions)

type diffOptions struct {
	owned  func(string) bool
	skip   func(string) bool
	merged bool
}

// WithOwned tells Diff which paths the caller applied before (a recorded leaf
// or a prefix of one, e.g. Applied.Owns). Server-side apply removes a field
// its manager owned and no longer sets, so an observed field desired lacks is
// a Delete only when owned reports it. owned reads the path during its call
// only: the string shares a buffer Diff reuses.
func WithOwned(owned func(path string) bool) DiffOption {
	return func(o *diffOptions) { o.owned = owned }
}

// WithMergedLists tells Diff that arrays merge under server-side apply,
// as Kubernetes' own kinds declare theirs (x-kubernetes-list-type map or
// set, such as a Deployment's containers): a key of an observed array item
// that desired lacks, such as a container's imagePullPolicy the API server
// defaulted, is left in place and is a Delete only when owned reports it,
// as for a map key. Without it arrays are atomic, as a CRD's are unless
// its schema says otherwise.
func WithMergedLists() DiffOption {
	return func(o *diffOptions) { o.merged = true }
}

// WithSkip tells Diff to ignore paths, and everything below them, for which
// skip is true: fields the caller manages itself, such as
// spec.managementPolicies. skip reads the path during its call only, as
// owned does (WithOwned).
func WithSkip(skip func(path string) bool) DiffOption {
	return func(o *diffOptions) { o.skip = skip }
}

// Diff returns the mutations that applying desired to observed with
// server-side apply semantics makes: only fields desired sets are touched.
// observed and desired are the values at prefix (e.g. "spec"); nil means the
// field is absent. Paths are full paths starting with prefix.
//
//   - desired sets a field observed lacks: Insert at that path, once for the
//     whole new subtree.
//   - both are maps: recurse. Both are arrays: recurse per index below the
//     shorter length; extra desired items are Inserts and extra observed
//     items Deletes, one per index, because lists are atomic under
//     server-side apply.
//   - otherwise, when the values differ: Mutate. Numbers compare by value,
//     whatever their Go type.
//   - observed has a map key desired lacks: no mutation, since server-side
//     apply leaves fields it does not own, unless owned reports the path
//     (WithOwned) or the key lies inside an array item. An applied array
//     replaces the whole observed array, so server-side apply removes such a
//     key and Diff reports the Delete rather than hide it.
//
// Map keys the fieldpath syntax cannot name (empty, containing [ or ], or
// starting or ending with a quote) have no path of their own: when one of
// them differs, Diff reports a single Mutate of the map holding it, so the
// change is still bounded and can be reverted.
//
// The result is in path order: map keys by byte order, array indices
// numerically, parents before children.
func Diff(prefix string, observed, desired any, opts ...DiffOption) []Mutation {
	d := &differ{path: newPath(prefix)}
	for _, o := range opts {
		o(&d.diffOptions)
	}
	if d.skipped() {
		return nil
	}
	d.node(observed, observed != nil, desired, desired != nil, false)
	sortByPath(d.out)
	return d.out
}

// sortByPath puts mutations in path order. Diff visits map keys in the
// map's order, not sorted, and sorts only what it reports: a spec has
// dozens of fields and a diff of it a few mutations.
func sortByPath(ms []Mutation) {
	if len(ms) < 2 {
		return
	}
	segs := make(map[string]fieldpath.Segments, len(ms))
	for _, m := range ms {
		// Diff builds canonical paths, which parse.
		segs[m.Path], _ = parsePath(m.Path)
	}
	slices.SortFunc(ms, func(a, b Mutation) int { return compareSegments(segs[a.Path], segs[b.Path]) })
}

// differ walks observed and desired together; path is the field it is at.
type differ struct {
	diffOptions
	path pathBuf
	out  []Mutation
}

func (d *differ) skipped() bool {
	return d.skip != nil && d.skip(d.path.view())
}

func (d *differ) isOwned() bool {
	return d.owned != nil && d.owned(d.path.view())
}

func (d *differ) emit(v v1alpha1.MutationVerb) {
	d.out = append(d.out, Mutation{Path: d.path.String(), Verb: v})
}

// node compares one field. atomic is true inside arrays, where server-side
// apply replaces whatever it finds.
func (d *differ) node(o any, oOK bool, v any, vOK bool, atomic bool) {
	switch {
	case !vOK:
		if oOK && (atomic || d.isOwned()) {
			d.emit(v1alpha1.MutationDelete)
		}
	case !oOK:
		d.emit(v1alpha1.MutationInsert)
	default:
		d.compare(o, v, atomic)
	}
}

func (d *differ) compare(o, v any, atomic bool) {
	switch vv := v.(type) {
	case map[string]any:
		if om, ok := o.(map[string]any); ok {
			d.maps(om, vv, atomic)
			return
		}
	case []any:
		if oa, ok := o.([]any); ok {
			d.arrays(oa, vv)
			return
		}
	}
	if !Equal(o, v) {
		d.emit(v1alpha1.MutationMutate)
	}
}

func (d *differ) maps(o, v map[string]any, atomic bool) {
	if d.unnamedChanged(o, v, atomic) {
		d.emit(v1alpha1.MutationMutate)
		return
	}
	for k, vv := range v {
		if nameable(k) { // unnamed keys are handled by unnamedChanged
			ov, oOK := o[k]
			d.child(k, ov, oOK, vv, true, atomic)
		}
	}
	for k, ov := range o {
		if _, set := v[k]; !set && nameable(k) {
			d.child(k, ov, true, nil, false, atomic)
		}
	}
}

// child compares the map field k, unless it is skipped.
func (d *differ) child(k string, o any, oOK bool, v any, vOK bool, atomic bool) {
	parent := d.path.field(k)
	if !d.skipped() {
		d.node(o, oOK, v, vOK, atomic)
	}
	d.path.cut(parent)
}

// unnamedChanged reports whether a key without a path of its own differs in
// a way that Diff would report for a named key.
func (d *differ) unnamedChanged(o, v map[string]any, atomic bool) bool {
	unnamedObserved := false
	for k, vv := range v {
		if nameable(k) {
			continue
		}
		ov, ok := o[k]
		if !ok || !Equal(ov, vv) {
			return true
		}
	}
	for k := range o {
		if _, ok := v[k]; !ok && !nameable(k) {
			unnamedObserved = true
			break
		}
	}
	if !unnamedObserved {
		return false
	}
	if atomic {
		return true
	}
	// Record stores a map with unnamed keys as one leaf at the map's own path,
	// so the caller applied the unnamed key only if it owns the map but none
	// of its named children.
	if !d.isOwned() {
		return false
	}
	for _, m := range []map[string]any{o, v} {
		for k := range m {
			if !nameable(k) {
				continue
			}
			parent := d.path.field(k)
			owned := d.isOwned()
			d.path.cut(parent)
			if owned {
				return false
			}
		}
	}
	return true
}

func (d *differ) arrays(o, v []any) {
	n := min(len(o), len(v))
	for i := range max(len(o), len(v)) {
		parent := d.path.index(i)
		if !d.skipped() {
			switch {
			case i < n:
				d.compare(o[i], v[i], !d.merged)
			case i < len(v):
				d.emit(v1alpha1.MutationInsert)
			default:
				d.emit(v1alpha1.MutationDelete)
			}
		}
		d.path.cut(parent)
	}
}

// nameable reports whether a map key has a fieldpath that parses back to the
// same key: fieldpath has no escapes for brackets, and strips quotes around
// field names.
func nameable(k string) bool {
	if k == "" || strings.ContainsAny(k, "[]") {
		return false
	}
	return !isQuote(k[0]) && !isQuote(k[len(k)-1])
}

func isQuote(c byte) bool { return c == '\'' || c == '"' }

// Under reports whether path equals prefix or lies below it on a segment
// boundary: spec.forProvider.tags[0] is under spec.forProvider, and
// spec.forProviderX is not. Both must be canonical paths as Diff and Record
// produce them. Every path is under the empty prefix.
func Under(path, prefix string) bool {
	if prefix == "" {
		return true
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	if len(path) == len(prefix) {
		return true
	}
	if strings.LastIndexByte(prefix, '[') > strings.LastIndexByte(prefix, ']') {
		return false // prefix ends inside brackets: not a segment boundary
	}
	c := path[len(prefix)]
	return c == '.' || c == '['
}
