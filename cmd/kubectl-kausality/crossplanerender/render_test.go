package crossplanerender

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestWithoutKausality(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "database", "composition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(raw)
	if err != nil || len(objs) != 1 {
		t.Fatalf("Decode: %d objects, %v", len(objs), err)
	}
	without, removed := WithoutKausality(objs[0])
	if !removed {
		t.Fatal("the example's kausality step was not found")
	}
	steps, _, _ := unstructured.NestedSlice(without.Object, "spec", "pipeline")
	if len(steps) != 1 {
		t.Errorf("want the patch-and-transform step alone, got %d steps", len(steps))
	}
	if _, again := WithoutKausality(without); again {
		t.Error("a Composition without a kausality step had one removed")
	}
	if s, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "pipeline"); len(s) != 2 {
		t.Errorf("WithoutKausality changed its argument: %d steps left", len(s))
	}
}

func TestWriteAndDecode(t *testing.T) {
	a := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}}}
	b := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "b"}}}
	p := filepath.Join(t.TempDir(), "objs.yaml")
	if err := WriteYAML(p, a, b); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p) //nolint:gosec // the test's own file
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*unstructured.Unstructured{a, b}, got); diff != "" {
		t.Errorf("-wrote, +read:\n%s", diff)
	}
	if _, err := Decode([]byte("a: [")); err == nil {
		t.Error("Decode of broken YAML returned no error")
	}
}
