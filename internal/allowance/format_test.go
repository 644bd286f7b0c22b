package allowance

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fieldsOf are the JSON field paths the codecs read and write for t,
// dot-separated, descending into structs, slices and maps of structs.
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

// TestAdjacentReleasesReadEachOther is the rule that lets the function and
// the provider of adjacent releases run together in either order: a
// release writes only fields the release before it reads. The codecs are
// strict (an unknown field may narrow a grant, so it is refused, never
// ignored), so a new field is added in two releases: the first reads it,
// the next writes it. testdata/format/previous-release.txt lists what the
// last release reads; it changes only when a release is cut.
func TestAdjacentReleasesReadEachOther(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "format", "previous-release.txt"))
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
	fieldsOf(reflect.TypeOf(Allowance{}), "allowances.", &written)
	fieldsOf(reflect.TypeOf(Hop{}), "trace.", &written)
	fieldsOf(reflect.TypeOf(Freeze{}), "freeze.", &written)
	for _, f := range written {
		if !slices.Contains(previous, f) {
			t.Errorf("this build writes %s, which the previous release does not read: it would refuse every write carrying it. Read it in one release and write it from the next (docs/OPERATIONS.md, \"Upgrades\")", f)
		}
	}
}
