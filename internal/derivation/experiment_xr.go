package derivation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Perturbation is the baseline XR with one spec field changed, to be
// rendered and compared with the baseline's render.
type Perturbation struct {
	// Field is the XR field changed, canonical: the trigger of the rules
	// its differences become. A list of scalars is one field (its first
	// element is changed, and it is grown by one), as a patch reads it
	// whole.
	Field string
	// Change says what was done to the field, for notes.
	Change string
	// XR is the perturbed XR.
	XR map[string]any
}

// Baseline is the XR the experiment starts from: xr when the user gave
// one, else an XR made up from the schema (every field set: to its
// default, else its example, else its first enum value, else a value of
// its type), so that each field has a value to change. Either way absent
// defaulted spec fields get their defaults, as the API server would give
// them, and absent status fields get made-up values: resources a pipeline
// composes only once the XR reports a status field (P&T's Required
// policy, a template's condition) are rendered too, so their spec fields
// are seen to change.
func Baseline(gvk schema.GroupVersionKind, s *Schema, xr map[string]any) map[string]any {
	out := map[string]any{}
	if xr != nil {
		out = runtime.DeepCopyJSON(xr)
	} else {
		out["apiVersion"], out["kind"] = gvk.GroupVersion().String(), gvk.Kind
		out["metadata"] = map[string]any{"name": "example"}
	}
	if s == nil {
		return out
	}
	if ss := s.Properties["spec"]; ss != nil {
		out["spec"] = fill(ss, out["spec"], xr == nil)
	}
	if ss := s.Properties["status"]; ss != nil {
		out["status"] = fill(ss, out["status"], true)
	}
	return out
}

// fill is v with the absent properties of an object schema set: all of
// them when all, else only defaulted ones.
func fill(s *Schema, v any, all bool) any {
	if v == nil {
		if !all && s.Default == nil {
			return nil
		}
		return example(s)
	}
	m, ok := v.(map[string]any)
	if !ok || len(s.Properties) == 0 {
		return v
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		if f := fill(s.Properties[k], m[k], all); f != nil {
			m[k] = f
		}
	}
	return m
}

// example is a value the schema admits: its default, example or first
// enum value, else one made up for its type.
func example(s *Schema) any {
	switch {
	case s.Default != nil:
		return runtime.DeepCopyJSONValue(jsonValue(s.Default))
	case s.Example != nil:
		return runtime.DeepCopyJSONValue(jsonValue(s.Example))
	case len(s.Enum) > 0:
		return jsonValue(s.Enum[0])
	}
	switch s.Type {
	case "string":
		return "example"
	case "integer":
		return int64(1)
	case "number":
		return float64(1)
	case "boolean":
		return true
	case "array":
		n := int64(1)
		if s.MinItems != nil && *s.MinItems > n {
			n = *s.MinItems
		}
		out := make([]any, n)
		for i := range out {
			if s.Items != nil {
				out[i] = example(s.Items)
			}
		}
		return out
	}
	m := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		m[k] = example(s.Properties[k])
	}
	return m
}

// jsonValue is v as runtime.DeepCopyJSONValue takes it: a schema decoded
// with encoding/json holds float64 numbers, which an integer field
// should not carry.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&out) != nil {
		return v
	}
	return numbers(out)
}

func numbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = numbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = numbers(e)
		}
	}
	return v
}

// Perturbations are the baseline with each leaf field of the schema's spec
// changed, one at a time: a set field to another value (a list of scalars
// also one element longer; and, when the schema lets it be absent,
// removed), an absent one set. The notes name
// the fields it cannot change.
func Perturbations(s *Schema, baseline map[string]any) ([]Perturbation, []string) {
	if s == nil || s.Properties["spec"] == nil {
		return nil, []string{"the XRD has no spec schema: no field is perturbed"}
	}
	p := &perturber{root: s, baseline: baseline}
	spec, _ := baseline["spec"].(map[string]any)
	p.walk(fieldpath.Segments{fieldpath.Field("spec")}, s.Properties["spec"], spec, true)
	return p.out, p.notes
}

type perturber struct {
	root     *Schema
	baseline map[string]any
	out      []Perturbation
	notes    []string
}

func (p *perturber) walk(at fieldpath.Segments, s *Schema, v any, present bool) {
	path := at.String()
	switch {
	case len(s.Properties) > 0:
		m, _ := v.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
			c, ok := m[k]
			p.walk(append(slices.Clone(at), fieldpath.Field(k)), s.Properties[k], c, ok)
		}
	case s.Type == "object":
		p.notes = append(p.notes, fmt.Sprintf("%s: not perturbed: an object without properties (a map or free-form object) has no leaf to change", path))
	case s.Type == "array" && s.Items != nil && (len(s.Items.Properties) > 0 || s.Items.Type == "object" || s.Items.Type == "array"):
		l, _ := v.([]any)
		if len(l) == 0 {
			p.notes = append(p.notes, fmt.Sprintf("%s: not perturbed: the baseline has no element of this list of objects to change", path))
		}
		for i, e := range l {
			p.walk(append(slices.Clone(at), fieldpath.FieldOrIndex(fmt.Sprint(i))), s.Items, e, true)
		}
	default:
		p.leaf(path, s, v, present)
	}
}

// leaf perturbs one field: a scalar, or a list of scalars.
func (p *perturber) leaf(path string, s *Schema, v any, present bool) {
	if !present {
		if s.Type == "" && s.Default == nil && s.Example == nil && len(s.Enum) == 0 {
			p.notes = append(p.notes, fmt.Sprintf("%s: not perturbed: the baseline does not set it and the schema gives it no type to make a value of", path))
			return
		}
		p.add(path, fmt.Sprintf("set to %s", show(example(s))), example(s))
		return
	}
	nv, ok := changed(s, v)
	if !ok {
		p.notes = append(p.notes, fmt.Sprintf("%s: not perturbed: no other value of type %q for %s", path, s.Type, show(v)))
		return
	}
	p.add(path, fmt.Sprintf("%s → %s", show(v), show(nv)), nv)
	if grown, ok := grownList(s, v); ok {
		// A patch copies a list whole: changing an element only mutates
		// the composed list, a longer list inserts into it.
		p.add(path, fmt.Sprintf("%s → %s", show(v), show(grown)), grown)
	}
	if !p.root.Present(path) {
		// A field that may be absent: removing it shows whether the
		// composed field appears and vanishes with it.
		p.add(path, "removed", nil)
	}
}

func (p *perturber) add(path, change string, v any) {
	xr := runtime.DeepCopyJSON(p.baseline)
	pv := fieldpath.Pave(xr)
	var err error
	if v == nil {
		err = pv.DeleteField(path)
	} else {
		err = pv.SetValue(path, v)
	}
	if err != nil {
		p.notes = append(p.notes, fmt.Sprintf("%s: not perturbed: %v", path, err))
		return
	}
	p.out = append(p.out, Perturbation{Field: path, Change: change, XR: xr})
}

// changed is another value of the field's type: an enum's next value, a
// string with "-x" appended, a number plus one, a flipped boolean, a list
// of scalars with its first element changed (or one element when empty).
func changed(s *Schema, v any) (any, bool) {
	if len(s.Enum) > 0 {
		for _, e := range s.Enum {
			if e := jsonValue(e); fmt.Sprint(e) != fmt.Sprint(v) {
				return e, true
			}
		}
		return nil, false
	}
	switch t := v.(type) {
	case string:
		return t + "-x", true
	case bool:
		return !t, true
	case int64:
		return t + 1, true
	case int:
		return int64(t) + 1, true
	case float64:
		return t + 1, true
	case []any:
		items := s.Items
		if items == nil {
			items = &Schema{}
		}
		if len(t) == 0 {
			return []any{example(items)}, items.Type != "" || items.Default != nil || items.Example != nil || len(items.Enum) > 0
		}
		first, ok := changed(items, t[0])
		if !ok {
			return nil, false
		}
		out := runtime.DeepCopyJSONValue(t).([]any) //nolint:forcetypeassert // a copy of t
		out[0] = first
		return out, true
	}
	return nil, false
}

// grownList is a non-empty list of scalars with one more element, another
// value of its type, so that a list that must hold distinct values still
// does.
func grownList(s *Schema, v any) ([]any, bool) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, false
	}
	items := s.Items
	if items == nil {
		items = &Schema{}
	}
	e, ok := changed(items, l[len(l)-1])
	if !ok {
		return nil, false
	}
	return append(runtime.DeepCopyJSONValue(l).([]any), e), true //nolint:forcetypeassert // a copy of l
}

// show is a value as a note quotes it.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
