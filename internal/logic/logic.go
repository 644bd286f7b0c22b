// Package logic names what produced a composed resource: the Composition
// revision and the package version of every Function of its pipeline. A
// composed resource carries the logic that last produced it
// (kausality.io/composition-revision, kausality.io/function-versions); when
// a later run's logic differs, the change it makes is a logic change, which
// reaches the cloud only as far as an UpgradeAllowance covers it
// (docs/UPGRADES.md).
//
// The function, which stamps the logic, and admission, which checks an
// upgrade's allowance against it, both read it here.
package logic

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// MaxFunctionsBytes bounds the function-versions annotation the parser
// reads: a pipeline of a few dozen steps is a few KiB.
const MaxFunctionsBytes = 32 << 10

// Logic is what produced a composed resource.
type Logic struct {
	// Revision is the Composition revision's name.
	Revision string
	// Functions maps the name of each Function of the pipeline to the
	// package it runs (registry/repository:tag or @digest).
	Functions map[string]string
	// Inputs maps each object outside the XR the pipeline reads
	// ("Kind/name" or "Kind/namespace/name") to its generation.
	Inputs map[string]string
}

// Of is the logic recorded in a composed resource's annotations. A
// malformed function-versions record is an error; the caller still gets
// the revision.
func Of(annotations map[string]string) (Logic, error) {
	l := Logic{Revision: annotations[v1alpha1.AnnotationCompositionRevision]}
	fns, err := ParseFunctions(annotations[v1alpha1.AnnotationFunctionVersions])
	if err != nil {
		return l, errors.Wrapf(err, "cannot parse annotation %s", v1alpha1.AnnotationFunctionVersions)
	}
	l.Functions = fns
	ins, err := ParseInputs(annotations[v1alpha1.AnnotationInputVersions])
	if err != nil {
		return l, errors.Wrapf(err, "cannot parse annotation %s", v1alpha1.AnnotationInputVersions)
	}
	l.Inputs = ins
	return l, nil
}

// ParseInputs decodes the kausality.io/input-versions annotation: a JSON
// object of input ("Kind/name") to generation. The empty string is no
// record.
func ParseInputs(s string) (map[string]string, error) {
	return parseRecord(s, MaxFunctionsBytes, "a pipeline's inputs", "input", "generation")
}

// InputKey names an input in a record: Kind/name, or Kind/namespace/name.
func InputKey(kind, namespace, name string) string {
	if namespace != "" {
		return kind + "/" + namespace + "/" + name
	}
	return kind + "/" + name
}

// ParseFunctions decodes the kausality.io/function-versions annotation: a
// JSON object of Function name to package. The empty string is no record.
func ParseFunctions(s string) (map[string]string, error) {
	return parseRecord(s, MaxFunctionsBytes, "a pipeline's record", "Function", "package")
}

// parseRecord decodes a record annotation: a JSON object of non-empty key
// (a key) to non-empty value (a value), at most max bytes (what needs
// that many). The empty string is no record.
func parseRecord(s string, maxBytes int, what, key, value string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > maxBytes {
		return nil, errors.Errorf("value is %d bytes, more than the %d %s needs", len(s), maxBytes, what)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, errors.Wrapf(err, "must be a JSON object of %s to %s", key, value)
	}
	for k, v := range m {
		if k == "" || v == "" {
			return nil, errors.Errorf("%s %q has %s %q; neither may be empty", key, k, value, v)
		}
	}
	return m, nil
}

// FormatFunctions encodes a function-versions (or input-versions) record;
// keys are sorted, so the same pipeline always gives the same string.
func FormatFunctions(fns map[string]string) string {
	if len(fns) == 0 {
		return ""
	}
	b, _ := json.Marshal(fns) // a map of strings always encodes, keys sorted
	return string(b)
}

// A Change is one part of a logic change: the Composition revision
// (Function, Controller and Input empty), one Function's package, the
// generation of an input the pipeline reads (Input, "Kind/name"), or the
// build of a controller that writes the resource itself (Controller, its
// service account; From and To are build hashes).
type Change struct {
	Function   string
	Controller string
	Input      string
	From, To   string
}

// String names the change as a platform engineer reads it:
// "function-patch-and-transform v0.10.7 → v0.10.8".
func (c Change) String() string {
	if c.Controller != "" {
		return controllerString(c)
	}
	if c.Input != "" {
		return fmt.Sprintf("%s generation %s → %s", strings.Replace(c.Input, "/", " ", 1), c.From, c.To)
	}
	if c.Function == "" {
		return fmt.Sprintf("Composition revision %s → %s", c.From, c.To)
	}
	return fmt.Sprintf("%s %s → %s", c.Function, Version(c.From), Version(c.To))
}

// Changes are what differs between the logic that last produced a composed
// resource and next. A Function only one side records is not a change of
// its own (a pipeline gains or loses a step only with a new revision, and a
// resource produced before versions were recorded has none); nor is
// anything next does not know (an empty revision).
func Changes(prev, next Logic) []Change {
	var out []Change
	if prev.Revision != "" && next.Revision != "" && prev.Revision != next.Revision {
		out = append(out, Change{From: prev.Revision, To: next.Revision})
	}
	for _, name := range slices.Sorted(maps.Keys(next.Functions)) {
		if was, ok := prev.Functions[name]; ok && was != next.Functions[name] {
			out = append(out, Change{Function: name, From: was, To: next.Functions[name]})
		}
	}
	// An input only one side records is no change either: a resource
	// produced before the input was named has no record of it.
	for _, key := range slices.Sorted(maps.Keys(next.Inputs)) {
		if was, ok := prev.Inputs[key]; ok && was != next.Inputs[key] {
			out = append(out, Change{Input: key, From: was, To: next.Inputs[key]})
		}
	}
	return out
}

// Parts is l as changes from no logic at all: for a resource being created,
// which no earlier logic produced.
func Parts(l Logic) []Change {
	var out []Change
	if l.Revision != "" {
		out = append(out, Change{To: l.Revision})
	}
	for _, name := range slices.Sorted(maps.Keys(l.Functions)) {
		out = append(out, Change{Function: name, To: l.Functions[name]})
	}
	for _, key := range slices.Sorted(maps.Keys(l.Inputs)) {
		out = append(out, Change{Input: key, To: l.Inputs[key]})
	}
	return out
}

// Describe joins changes for a message.
func Describe(cs []Change) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

// Version is the version part of a package reference: its tag, or its
// digest, or the whole reference when it has neither.
func Version(pkg string) string {
	if i := strings.LastIndex(pkg, "@"); i >= 0 {
		return pkg[i+1:]
	}
	if i := strings.LastIndex(pkg, ":"); i > strings.LastIndex(pkg, "/") {
		return pkg[i+1:]
	}
	return pkg
}

// ValidVersionPattern says what is wrong with a version pattern, or nil.
func ValidVersionPattern(pattern string) error {
	if pattern == "" {
		return errors.New("must not be empty")
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return errors.Errorf("%q is not a pattern (* stands for any run of characters): %v", pattern, err)
	}
	return nil
}

// VersionMatches reports whether a package's version matches pattern, in
// which * stands for any run of characters (v0.10.* matches every patch
// release of v0.10). A malformed pattern matches nothing.
func VersionMatches(pattern, pkg string) bool {
	ok, err := path.Match(pattern, Version(pkg))
	return err == nil && ok
}
