package rollout

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

// env is the Kubernetes CEL environment policy authors know, with the
// propagation library and an item and its collection, pools.
func env(t *testing.T) *cel.Env {
	t.Helper()
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{Library(), cel.Variable("item", cel.DynType), cel.Variable("pools", cel.ListType(cel.DynType))},
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := set.Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func eval(t *testing.T, e *cel.Env, expr string, vars map[string]any) (any, error) {
	t.Helper()
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compile %q: %v", expr, iss.Err())
	}
	prg, err := e.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return nil, err
	}
	return out.Value(), nil
}

// pools are six node pools in roll-out order, the first u updated, the
// first r ready.
func pools(u, r int) []any {
	out := make([]any, 6)
	for i := range out {
		out[i] = Member(map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("pool-%d", i)}, "spec": map[string]any{"size": int64(3)}}, "", i < u, i < r)
	}
	return out
}

func TestLibrary(t *testing.T) {
	e := env(t)
	for u := range 7 {
		ps := pools(u, u)
		for i := range ps {
			// A copy of the item (as the function passes it) is found by name.
			vars := map[string]any{"item": Member(map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("pool-%d", i)}}, "", i < u, i < u), "pools": ps}
			got, err := eval(t, e, "exponentiallyUpdated(item, pools)", vars)
			if err != nil || got != Exponential(i, u) {
				t.Errorf("exponentiallyUpdated(pool-%d) with %d updated = %v, %v; want %t", i, u, got, err, Exponential(i, u))
			}
			got, err = eval(t, e, "linearlyUpdated(item, pools, 2)", vars)
			if err != nil || got != Linear(i, u, 2) {
				t.Errorf("linearlyUpdated(pool-%d, 2) with %d updated = %v, %v; want %t", i, u, got, err, Linear(i, u, 2))
			}
		}
	}
	// Only members both updated and ready count towards the next batch.
	for _, c := range []struct{ u, r int }{{4, 1}, {4, 2}, {1, 4}, {4, 4}} {
		ps := pools(c.u, c.r)
		counted := min(c.u, c.r)
		for i := range ps {
			got, err := eval(t, e, "exponentiallyUpdated(item, pools)", map[string]any{"item": ps[i], "pools": ps})
			if err != nil || got != Exponential(i, counted) {
				t.Errorf("exponentiallyUpdated(pool-%d) with %d updated, %d ready = %v, %v; want %t", i, c.u, c.r, got, err, Exponential(i, counted))
			}
		}
	}
	// Members not created yet are found by id.
	unnamed := []any{Member(map[string]any{}, "pool-a", true, true), Member(map[string]any{}, "pool-b", false, false), Member(map[string]any{}, "pool-c", false, false)}
	for i, want := range []bool{true, true, false} {
		got, err := eval(t, e, "exponentiallyUpdated(item, pools)", map[string]any{"item": unnamed[i], "pools": unnamed})
		if err != nil || got != want {
			t.Errorf("unnamed member %d: %v, %v; want %t", i, got, err, want)
		}
	}
	vars := map[string]any{"item": pools(2, 1)[0], "pools": pools(2, 1)}
	for expr, want := range map[string]bool{
		"pools.filter(p, p.updated()).size() == 2":                 true,
		"pools.filter(p, p.ready()).size() == 1":                   true,
		"item.updated() && item.ready()":                           true,
		"pools.all(p, !p.updated() || p.ready())":                  false,
		"exponentiallyUpdated(item, pools) && item.spec.size == 3": true,
	} {
		got, err := eval(t, e, expr, vars)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %t", expr, got, err, want)
		}
	}
}

func TestLibraryErrors(t *testing.T) {
	e := env(t)
	stranger := Member(map[string]any{"metadata": map[string]any{"name": "stranger"}}, "", false, false)
	for expr, c := range map[string]struct {
		vars map[string]any
		want string
	}{
		"exponentiallyUpdated(item, pools)": {vars: map[string]any{"item": stranger, "pools": pools(0, 0)}, want: "not a member of the collection"},
		"linearlyUpdated(item, pools, 0)":   {vars: map[string]any{"item": pools(0, 0)[0], "pools": pools(0, 0)}, want: "batch size must be at least 1"},
		"item.updated()":                    {vars: map[string]any{"item": map[string]any{"spec": map[string]any{}}, "pools": pools(0, 0)}, want: "no collection member"},
	} {
		_, err := eval(t, e, expr, c.vars)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", expr, err, c.want)
		}
	}
}
