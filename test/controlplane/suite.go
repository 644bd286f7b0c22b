package controlplane

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/kausality-io/kausality-crossplane/test/render"
)

// Tests are what a test package's TestMain runs (a *testing.M).
type Tests interface{ Run() int }

// Suite is a test package's TestMain on a control plane of its own: it
// starts one in a new directory named after prefix, stores it in *cp, runs
// setup and the tests, reports data races the race-built processes logged,
// and stops it. It returns the exit code. The logs are kept when something
// failed, or when KEEP_E2E_DIR is set.
func Suite(m Tests, prefix string, cp **ControlPlane, setup func(context.Context) error) int {
	root, err := render.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	keep := os.Getenv("KEEP_E2E_DIR") != ""
	defer func() {
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}()
	defer render.Occupy()()
	ctx := context.Background()
	c, err := StartWith(ctx, root, dir, Options{CrossplaneDefaults: os.Getenv(EnvCrossplaneDefaults) != ""})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		keep = true
		return 1
	}
	*cp = c
	defer c.Stop()
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, "provider log:\n"+c.Tail(ProviderKausality, 40))
		fmt.Fprintln(os.Stderr, "crossplane log:\n"+c.Tail("crossplane", 40))
		keep = true
		return 1
	}
	code := m.Run()
	if races := c.Races(); races != "" {
		fmt.Fprintf(os.Stderr, "the race detector reported data races:\n%s", races)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "logs kept in %s\nprovider log:\n%s\n", dir, c.Tail(ProviderKausality, 60))
		keep = true
	}
	return code
}

// ForTest starts a control plane of its own for one test, with the builds
// o chooses, runs setup, and stops it when the test ends; the logs are
// kept when the test failed, or when KEEP_E2E_DIR is set.
func ForTest(t *testing.T, prefix string, o Options, setup func(context.Context, *ControlPlane) error) *ControlPlane {
	t.Helper()
	root, err := render.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := StartWith(ctx, root, dir, o)
	if err != nil {
		t.Fatalf("%v (logs kept in %s)", err, dir)
	}
	t.Cleanup(func() {
		races := c.Races()
		if races != "" {
			t.Errorf("the race detector reported data races:\n%s", races)
		}
		if t.Failed() {
			t.Logf("logs kept in %s\nprovider log:\n%s", dir, c.Tail(ProviderKausality, 60))
		}
		c.Stop()
		if !t.Failed() && os.Getenv("KEEP_E2E_DIR") == "" {
			_ = os.RemoveAll(dir)
		}
	})
	if err := setup(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}
