package render

import (
	"context"
	"testing"
	"time"
)

// NeedTools is FindTools for a test: a missing tool fails it, naming the
// make target that builds it.
func NeedTools(t testing.TB) Tools {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	tl, err := FindTools(root)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// NeedFunctions starts every published function the examples compose
// with on free addresses for the rest of the test, and returns a
// Functions file naming them, as crossplane render takes it.
func NeedFunctions(t testing.TB) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fns, err := StartFunctions(ctx, root, t.TempDir(), NeedTools(t), FunctionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fns.Stop)
	p, err := fns.File(FunctionPatchTransform, FunctionAutoReady, FunctionCelFilter, FunctionGoTemplating, FunctionSequencer)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
