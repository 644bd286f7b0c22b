package derivation

import (
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// Schema is the part of an OpenAPI v3 schema that says whether a field is
// always present (required properties, defaults and minimum array lengths)
// and what values it admits.
type Schema struct {
	Properties map[string]*Schema `json:"properties,omitempty"`
	Items      *Schema            `json:"items,omitempty"`
	Required   []string           `json:"required,omitempty"`
	Default    any                `json:"default,omitempty"`
	MinItems   *int64             `json:"minItems,omitempty"`
	// Type, Enum and Example let a render experiment make up an XR the
	// schema admits and change each of its fields (experiment.go).
	Type    string `json:"type,omitempty"`
	Enum    []any  `json:"enum,omitempty"`
	Example any    `json:"example,omitempty"`
}

// Present reports whether every object the schema admits has the field at
// path: each field on the way is required or defaulted, and each array
// index is below the array's minItems. Such a field can change but never
// appear or vanish, so a patch from it only ever mutates its target.
func (s *Schema) Present(path string) bool {
	segs, err := fieldpath.Parse(path)
	if s == nil || err != nil {
		return false
	}
	cur := s
	for i, sg := range segs {
		if i == 0 && sg.Field == "spec" {
			// Crossplane requires an XR's spec in the CRD it generates,
			// though XRDs do not say so.
			if cur = s.Properties["spec"]; cur == nil {
				return false
			}
			continue
		}
		switch sg.Type {
		case fieldpath.SegmentField:
			next, ok := cur.Properties[sg.Field]
			if !ok || (!slices.Contains(cur.Required, sg.Field) && next.Default == nil) {
				return false
			}
			cur = next
		case fieldpath.SegmentIndex:
			if cur.Items == nil || cur.MinItems == nil || int64(sg.Index) >= *cur.MinItems {
				return false
			}
			cur = cur.Items
		}
	}
	return true
}

// At is the schema of the field at path, nil when the schema does not
// describe it: a patch that copies the field writes a value of that shape.
func (s *Schema) At(path string) *Schema {
	segs, err := fieldpath.Parse(path)
	if s == nil || err != nil {
		return nil
	}
	cur := s
	for _, sg := range segs {
		switch sg.Type {
		case fieldpath.SegmentField:
			cur = cur.Properties[sg.Field]
		case fieldpath.SegmentIndex:
			cur = cur.Items
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}
