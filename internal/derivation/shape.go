package derivation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Output says what a patch writes, as far as its transforms and
// toFieldPath policy tell. The function diffs a composed resource field by
// field, so a change of an object a patch writes inserts and deletes keys
// below its toFieldPath where a change of a string only mutates it.
type Output uint8

const (
	// OutputSource is a value shaped like the patch's source: no
	// transform, or only ones that may pass their input on.
	OutputSource Output = iota
	// OutputScalar is a string, number or boolean whatever the source: a
	// Combine, a string or math transform, a convert to a scalar type, a
	// map or match to scalars.
	OutputScalar
	// OutputStructured may be an object or a list: a map or match to one,
	// a convert to object or array, a toFieldPath policy that merges.
	OutputStructured
)

// or is what a transform that yields either o or p yields.
func (o Output) or(p Output) Output {
	switch {
	case o == OutputStructured || p == OutputStructured:
		return OutputStructured
	case o == OutputSource || p == OutputSource:
		return OutputSource
	}
	return OutputScalar
}

// ptTransform is the part of a function-patch-and-transform transform
// that says what kind of value it yields.
type ptTransform struct {
	Type  string                     `json:"type"`
	Map   map[string]json.RawMessage `json:"map,omitempty"`
	Match *struct {
		Patterns []struct {
			Result json.RawMessage `json:"result"`
		} `json:"patterns,omitempty"`
		FallbackValue json.RawMessage `json:"fallbackValue,omitempty"`
		FallbackTo    string          `json:"fallbackTo,omitempty"`
	} `json:"match,omitempty"`
	Convert *struct {
		ToType string `json:"toType"`
	} `json:"convert,omitempty"`
}

// transformsOutput is what the transforms ts yield from a value of shape
// in, each transform reading the one before's output. A transform this
// does not know may yield anything.
func transformsOutput(ts []json.RawMessage, in Output) Output {
	out := in
	for _, raw := range ts {
		var t ptTransform
		if err := json.Unmarshal(raw, &t); err != nil {
			return OutputStructured
		}
		switch t.Type {
		case "math", "string":
			out = OutputScalar
		case "convert":
			out = OutputScalar
			if t.Convert == nil || t.Convert.ToType == "object" || t.Convert.ToType == "array" {
				out = OutputStructured
			}
		case "map":
			vs := make([]json.RawMessage, 0, len(t.Map))
			for _, v := range t.Map {
				vs = append(vs, v)
			}
			out = valuesOutput(vs)
		case "match":
			out = matchOutput(t, out)
		default:
			out = OutputStructured
		}
	}
	return out
}

// matchOutput is what a match transform yields: one of its results or its
// fallback value, or its input when it falls back to the input.
func matchOutput(t ptTransform, in Output) Output {
	if t.Match == nil {
		return OutputStructured
	}
	vs := []json.RawMessage{t.Match.FallbackValue}
	for _, p := range t.Match.Patterns {
		vs = append(vs, p.Result)
	}
	out := valuesOutput(vs)
	if t.Match.FallbackTo == "Input" {
		out = out.or(in)
	}
	return out
}

// valuesOutput is OutputScalar when every value is a JSON scalar (or
// absent), else OutputStructured.
func valuesOutput(vs []json.RawMessage) Output {
	for _, v := range vs {
		if v = bytes.TrimSpace(v); len(v) > 0 && (v[0] == '{' || v[0] == '[') {
			return OutputStructured
		}
	}
	return OutputScalar
}

// scalarOut reports whether every value the flow writes is a scalar, so a
// change of it mutates toFieldPath and inserts or deletes nothing below
// it. A value shaped like its source is what the XRD says the source is;
// without an XRD type, what the base holds at toFieldPath, which the patch
// replaces.
func scalarOut(f Flow, xr *Schema) bool {
	switch f.Output {
	case OutputScalar:
		return true
	case OutputStructured:
		return false
	}
	if len(f.From) == 1 {
		if s := xr.At(f.From[0]); s != nil && s.Type != "" {
			return s.Type == "string" || s.Type == "integer" || s.Type == "number" || s.Type == "boolean"
		}
	}
	v, err := fieldpath.Pave(f.Template.Base).GetValue(f.To)
	if err != nil {
		return false
	}
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// alwaysSet reports whether the flow's target is set whatever the XR
// holds: the base sets it, or every source field is always present (a
// patch from an absent field is skipped, leaving the target to vanish).
// For a wildcard toFieldPath, function-patch-and-transform writes only the
// fields the wildcard expands to in what it patches, so it is set when the
// base has one.
func alwaysSet(f Flow, xr *Schema) bool {
	if baseSets(f.Template.Base, f.To) {
		return true
	}
	return xr != nil && !slices.ContainsFunc(f.From, func(p string) bool { return !xr.Present(p) })
}

func baseSets(base map[string]any, to string) bool {
	p := fieldpath.Pave(base)
	if wildcard(to) {
		paths, err := p.ExpandWildcards(to)
		return err == nil && len(paths) > 0
	}
	_, err := p.GetValue(to)
	return err == nil
}

// wildcard reports whether path has a [*] segment.
func wildcard(path string) bool {
	segs, err := fieldpath.Parse(path)
	return err == nil && slices.ContainsFunc(segs, func(s fieldpath.Segment) bool {
		return s.Type == fieldpath.SegmentField && s.Field == "*"
	})
}

// absentAncestor is the shallowest field above the flow's target that may
// be missing when the target is, "" when there is none: the function
// diffs an object whose parent is missing as one insert of the parent, and
// a parent left empty as one delete of it, so a rule granting only the
// target would cover neither. A field is there when the base sets it or
// another patch of the resource that always applies writes at or below
// it. Labels and annotations are compared key by key
// (policy.AlignContent), and a field below a wildcard exists when the
// patch applies at all.
func absentAncestor(f Flow, flows []Flow, xr *Schema) string {
	segs, err := fieldpath.Parse(f.To)
	if err != nil || len(segs) < 2 || segs[0].Field == "metadata" {
		return ""
	}
	p := fieldpath.Pave(f.Template.Base)
	written := func(prefix fieldpath.Segments) bool {
		return slices.ContainsFunc(flows, func(g Flow) bool {
			gs, err := fieldpath.Parse(g.To)
			return err == nil && g.Template == f.Template && hasPrefix(gs, prefix) && alwaysSet(g, xr)
		})
	}
	for i := 1; i < len(segs); i++ {
		if segs[i-1].Type == fieldpath.SegmentField && segs[i-1].Field == "*" {
			return ""
		}
		prefix := segs[:i]
		if _, err := p.GetValue(prefix.String()); err != nil && !written(prefix) {
			return prefix.String()
		}
	}
	return ""
}

// boundsOf are the mutation bounds a change of the flow's sources needs on
// its target: its toFieldPath with verbsOf's verbs, and where the target
// can appear with its parent (absentAncestor, among the model's flows), an
// insert and delete of that parent. That bound also covers what other
// patches insert below the same parent, which is the price of the
// function seeing one insert where the Composition names a field.
func boundsOf(f Flow, flows []Flow, xr *Schema) []v1alpha1.MutationBound {
	out := []v1alpha1.MutationBound{{JSONPath: f.To, Verbs: verbsOf(f, xr)}}
	if len(f.Verbs) > 0 || alwaysSet(f, xr) {
		// Seen, not inferred (a render experiment names the paths it saw
		// change), or never absent.
		return out
	}
	if a := absentAncestor(f, flows, xr); a != "" {
		out = append(out, v1alpha1.MutationBound{JSONPath: a, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert, v1alpha1.MutationDelete}})
	}
	return out
}

// compared says whether the function compares the field the flow writes
// in a composed resource of class c, and why not when it does not: a rule
// for a field it does not compare would bound nothing. A kro reference is
// kro's to apply, not the function's, so it is always ruled.
func compared(f Flow, c policy.Class) (bool, string) {
	if f.Type == flowReference {
		return true, ""
	}
	to := f.To
	segs, err := fieldpath.Parse(to)
	if err != nil || len(segs) == 0 {
		return true, ""
	}
	if gate.IsGatePath(to) {
		return false, fmt.Sprintf("%s asks for the gate, which the function keeps and never opens wider than asked", gate.PathManagementPolicies)
	}
	root := segs[0].Field
	if c != policy.ClassUnmanaged {
		if root == "spec" {
			return true, ""
		}
		return false, fmt.Sprintf("the function compares only the spec of a %s kind", c)
	}
	switch root {
	case "apiVersion", "kind", "status":
		return false, fmt.Sprintf("the function does not compare the %s of a composed resource", root)
	case "metadata":
		own := len(segs) >= 2 && (segs[1].Field == "labels" || segs[1].Field == "annotations") &&
			(len(segs) == 2 || policy.OwnMetadataKey(segs[2].Field))
		if !own {
			return false, "of an unmanaged kind's metadata the function compares only the labels and annotations outside the crossplane.io and kausality.io domains"
		}
	}
	return true, ""
}
