package mutation

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
)

// FuzzValue checks Value reads what fieldpath's Paved.GetValue reads.
func FuzzValue(f *testing.F) {
	for _, p := range []string{"spec.forProvider.tags[0]", "metadata.annotations[jira]", "spec", "spec.list[1].name", "spec[x.y]", "a..b", "spec.list[9]", "spec.forProvider", "[0]", "status.conditions[0].type"} {
		f.Add(p)
	}
	obj := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"jira": "INFRA-1"}},
		"spec": map[string]any{
			"forProvider": map[string]any{"tags": []any{"a", "b"}, "size": int64(3)},
			"list":        []any{map[string]any{"name": "x"}, map[string]any{"name": "y"}},
			"x.y":         true,
		},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Synced"}}},
	}
	f.Fuzz(func(t *testing.T, path string) {
		want, err := fieldpath.Pave(obj).GetValue(path)
		got, ok := Value(obj, path)
		if ok != (err == nil) {
			t.Fatalf("Value(%q) found %v, fieldpath.GetValue error %v", path, ok, err)
		}
		if diff := cmp.Diff(want, got); ok && diff != "" {
			t.Fatalf("Value(%q): -fieldpath, +Value:\n%s", path, diff)
		}
	})
}
