package main

// The pages' commands that need no cluster, run as a user runs them: each
// line by sh, verbatim, in a folder holding the files the page names, with
// kubectl kausality this package's main and crossplane the pinned CLI.

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	xprender "github.com/kausality-io/kausality-crossplane/test/render"
)

var update = flag.Bool("update", false, "rewrite testdata/docs, the golden files of the pages' commands")

// docFiles are, per page, the repository's files its runnable commands
// read, by the names the page gives them: the page's running example.
var docFiles = map[string]map[string]string{
	"README.md": {
		"composition.yaml": "examples/corpus/database/composition.yaml",
		"xrd.yaml":         "examples/corpus/database/xrd.yaml",
	},
	"docs/POLICIES.md": {
		"composition.yaml": "examples/database/composition.yaml",
		"xrd.yaml":         "examples/database/xrd.yaml",
	},
	"docs/WRITING-POLICIES.md": {
		"composition.yaml": "examples/cluster/composition.yaml",
		"xrd.yaml":         "examples/cluster/xrd.yaml",
	},
	"docs/COMPOSITIONS.md": {
		"xr.yaml":          "examples/database/cases/3-withheld-change/xr.yaml",
		"observed.yaml":    "examples/database/cases/3-withheld-change/observed.yaml",
		"composition.yaml": "examples/database/composition.yaml",
		"policies.yaml":    "examples/database/policies.yaml",
		// Pointed at the functions the harness starts, as the page says
		// to point it at functions started by hand.
		"functions.yaml": "examples/database/functions.yaml",
	},
}

// prelude makes the two programs the commands call what a user's are. A
// kubectl plugin is a program kubectl-NAME that kubectl runs with the
// words after NAME: the function does that for kausality alone. crossplane
// render runs Crossplane's render engine in Docker unless given
// --crossplane-binary; there is no Docker here, so the function gives it
// the pinned core binary, the one flag it adds.
const prelude = `
kubectl() {
  if [ "$1" != kausality ]; then echo "only kubectl kausality runs here" >&2; return 127; fi
  shift; "$KAUSALITY_PLUGIN" "$@"
}
crossplane() {
  if [ "$1" != render ]; then echo "only crossplane render runs here" >&2; return 127; fi
  "$CROSSPLANE" "$@" --crossplane-binary "$CROSSPLANE_CORE"
}
`

// runner runs blocks of commands; it starts the functions crossplane
// render dials once, for the first block that needs them.
type runner struct {
	plugin string
	tools  *xprender.Tools
	fns    *xprender.Functions
	dir    string // the functions' folder
}

func newRunner(t *testing.T) *runner {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{plugin: exe}
	t.Cleanup(func() {
		r.fns.Stop()
		if r.dir != "" {
			_ = os.RemoveAll(r.dir)
		}
	})
	return r
}

// functions starts the functions the examples render with, once.
func (r *runner) functions(t *testing.T) *xprender.Functions {
	t.Helper()
	if r.fns == nil {
		root, err := filepath.Abs(repoRoot)
		if err != nil {
			t.Fatal(err)
		}
		tl := xprender.NeedTools(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// Its own folder: a subtest's TempDir goes with the subtest.
		if r.dir, err = os.MkdirTemp("", "kausality-doc-functions-"); err != nil {
			t.Fatal(err)
		}
		if r.fns, err = xprender.StartFunctions(ctx, root, r.dir, tl, xprender.ExampleFunctions); err != nil {
			t.Fatal(err)
		}
		r.tools = &tl
	}
	return r.fns
}

// block runs cmds, the commands of b this test runs, in order in one
// folder holding the page's files, and compares what each prints and the
// files they write with golden.
func (r *runner) block(t *testing.T, b block, cmds []command, golden string) {
	t.Helper()
	t.Run(strings.ReplaceAll(b.at(), "/", "_"), func(t *testing.T) {
		files := docFiles[b.page]
		if files == nil {
			t.Fatalf("%s runs commands, but docFiles names no files for %s: name the example they read", b.at(), b.page)
		}
		dir := t.TempDir()
		render := slices.ContainsFunc(cmds, func(c command) bool { return c.words[0] == "crossplane" })
		for name, src := range files {
			src = filepath.Join(repoRoot, src)
			if name == "functions.yaml" && render {
				var err error
				if src, err = r.functions(t).Rewrite(src); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(src) //nolint:gosec // the repository's examples
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), raw, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var got strings.Builder
		for _, c := range cmds {
			got.WriteString(r.run(t, dir, c))
		}
		got.WriteString(written(t, dir, files))
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(got.String()), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden) //nolint:gosec // this package's golden file
		if err != nil {
			t.Fatalf("%v (run with -update to record it)", err)
		}
		if diff := cmp.Diff(string(want), got.String()); diff != "" {
			t.Errorf("%s: the commands' output is not %s: -golden +got:\n%s", b.at(), golden, diff)
		}
	})
}

// run runs c in dir and returns it with what it printed, as the golden
// file holds it; a command that fails fails the test.
func (r *runner) run(t *testing.T, dir string, c command) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", prelude+c.text)
	sh.Dir = dir
	// No cluster: the kubeconfig names none, and nothing of the
	// environment the test runs in reaches the command.
	sh.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "KUBECONFIG=" + filepath.Join(dir, "no-cluster"),
		pluginEnv + "=1", "KAUSALITY_PLUGIN=" + r.plugin}
	if r.tools != nil {
		sh.Env = append(sh.Env, "CROSSPLANE="+r.tools.Crossplane, "CROSSPLANE_CORE="+r.tools.CrossplaneCore)
	}
	var stdout, stderr bytes.Buffer
	sh.Stdout, sh.Stderr = &stdout, &stderr
	if err := sh.Run(); err != nil {
		t.Errorf("%s: %s: %v\n%s%s", c.block.at(), c.text, err, stdout.String(), stderr.String())
	}
	out := stdout.Bytes()
	if c.words[0] == "crossplane" {
		// Results come in map order.
		out = xprender.Normalize(out)
	}
	s := "$ " + c.text + "\n" + string(out)
	if stderr.Len() > 0 {
		s += "# stderr:\n" + stderr.String()
	}
	return s
}

// written is what the commands wrote into dir: every file but the page's,
// each under its name.
func written(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var s strings.Builder
	for _, n := range names {
		raw, err := os.ReadFile(filepath.Join(dir, n)) //nolint:gosec // what the commands wrote
		if err != nil {
			t.Fatal(err)
		}
		s.WriteString("--- " + n + " (written)\n" + string(raw))
	}
	return s.String()
}
