// Package format checks that this build and the last release read each
// other's kausality.io annotations, so the function and the provider of
// adjacent releases run together in either order (docs/OPERATIONS.md,
// "Upgrades").
package format

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// codecs reads an annotation's value as this build does and writes back
// what it read, for every kausality.io annotation Kausality writes.
var codecs = map[string]func(string) (string, error){
	v1alpha1.AnnotationAllowances:         roundTrip(allowance.Parse, allowance.Format),
	v1alpha1.AnnotationTrace:              roundTrip(allowance.ParseTrace, allowance.FormatTrace),
	v1alpha1.AnnotationFreeze:             roundTrip(allowance.ParseFreeze, allowance.FormatFreeze),
	v1alpha1.AnnotationApplied:            roundTrip(mutation.ParseApplied, mutation.Applied.String),
	v1alpha1.AnnotationApproved:           roundTrip(mutation.ParseApplied, mutation.Applied.String),
	v1alpha1.AnnotationRolloutTurns:       roundTrip(rollout.ParseTurns, rollout.Turns.Format),
	v1alpha1.AnnotationFunctionVersions:   roundTrip(logic.ParseFunctions, logic.FormatFunctions),
	v1alpha1.AnnotationInputVersions:      roundTrip(logic.ParseInputs, logic.FormatFunctions),
	v1alpha1.AnnotationControllerBuilds:   roundTrip(logic.ParseControllers, logic.Controllers.Format),
	v1alpha1.AnnotationComposedGeneration: roundTrip(parseGeneration, formatGeneration),
	v1alpha1.AnnotationApprovedGeneration: roundTrip(parseGeneration, formatGeneration),
}

// roundTrip reads a value with parse and writes what it read with format.
func roundTrip[T any](parse func(string) (T, error), format func(T) string) func(string) (string, error) {
	return func(s string) (string, error) {
		v, err := parse(s)
		return format(v), err
	}
}

func parseGeneration(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
func formatGeneration(g int64) string         { return strconv.FormatInt(g, 10) }

// TestReadsWhatTheLastReleaseWrote: every value of every annotation the
// last release writes (testdata/previous-release.yaml) is read by this
// build and written back unchanged. A reader that refused one would refuse
// every write carrying it while the other part still runs the last
// release; one that lost a field would drop it on its next write.
func TestReadsWhatTheLastReleaseWrote(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "previous-release.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	samples := map[string][]string{}
	if err := yaml.Unmarshal(b, &samples); err != nil {
		t.Fatal(err)
	}
	for name := range codecs {
		if len(samples[name]) == 0 {
			t.Errorf("testdata/previous-release.yaml has no value of %s: add what the last release writes", name)
		}
	}
	for name, values := range samples {
		codec, ok := codecs[name]
		if !ok {
			t.Errorf("testdata/previous-release.yaml has values of %s, which no codec here reads", name)
			continue
		}
		for i, v := range values {
			got, err := codec(v)
			if err != nil {
				t.Errorf("%s[%d]: this build cannot read what the last release writes: %v", name, i, err)
				continue
			}
			if got != v {
				t.Errorf("%s[%d]: this build writes back what the last release wrote differently; a release writes only what the one before reads (docs/OPERATIONS.md, \"Upgrades\"):\nwrote: %s\ngot:   %s", name, i, v, got)
			}
		}
	}
}

// fieldsOf are the JSON field paths a strict codec reads and writes for
// t, dot-separated, descending into structs, slices and maps of structs.
func fieldsOf(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		*out = append(*out, prefix+name)
		fieldsOf(f.Type, prefix+name+".", out)
	}
}

// TestWritesOnlyWhatTheLastReleaseReads is the rule that lets the
// function and the provider of adjacent releases run together in either
// order: a release writes only fields the release before it reads. The
// JSON codecs are strict (an unknown field may narrow a grant, so it is
// refused, never ignored), so a new field is added in two releases: the
// first reads it, the next writes it. testdata/previous-release-fields.txt
// lists what the last release reads.
func TestWritesOnlyWhatTheLastReleaseReads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "previous-release-fields.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var previous []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			previous = append(previous, l)
		}
	}
	var written []string
	fieldsOf(reflect.TypeOf(allowance.Allowance{}), "allowances.", &written)
	fieldsOf(reflect.TypeOf(allowance.Hop{}), "trace.", &written)
	fieldsOf(reflect.TypeOf(allowance.Freeze{}), "freeze.", &written)
	fieldsOf(reflect.TypeOf(rollout.Turn{}), "rollout-turns.", &written)
	for _, f := range written {
		if !slices.Contains(previous, f) {
			t.Errorf("this build writes %s, which the last release does not read: it would refuse every write carrying it. Read it in one release and write it from the next (docs/OPERATIONS.md, \"Upgrades\")", f)
		}
	}
}
