package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
)

// pluginEnv, set to 1, makes this test binary the plugin: the doc tests
// run the pages' commands with it as kubectl-kausality, so they run main
// as it is built, without a build of their own.
const pluginEnv = "KUBECTL_KAUSALITY_TEST_PLUGIN"

// TestMain runs the tests, or, under pluginEnv, the plugin.
func TestMain(m *testing.M) {
	if os.Getenv(pluginEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// verdict is how a page's command is run.
type verdict struct {
	// how says who runs it; "" when no test does.
	how string
	// here: TestDocsCommands runs it (docrun_test.go).
	here bool
}

// classifier says how each command is run.
type classifier struct {
	forms   []form     // what the scenario suite runs of the plugin
	install [][]string // the README's install, which the suite runs
}

// classify says how c is run. A command that needs no cluster runs here;
// one that needs a cluster counts as run only where a suite's source
// shows the run, so the pages can claim no run a suite does not make.
func (k classifier) classify(c command) verdict {
	if args, ok := c.kausality(); ok {
		if runsHere(c) {
			return verdict{how: "run here, without a cluster", here: true}
		}
		if f, ok := runBy(k.forms, args); ok {
			return verdict{how: "the scenario suite runs `" + strings.Join(append([]string{f.sub}, f.flags...), " ") + "` (test/e2e/" + f.at + ")"}
		}
		return verdict{}
	}
	if runsHere(c) {
		return verdict{how: "run here, against the real crossplane CLI", here: true}
	}
	if c.block.page == "README.md" && slices.ContainsFunc(k.install, func(w []string) bool { return slices.Equal(w, c.words) }) {
		return verdict{how: controlplane.ReadmeCommand(c.words)}
	}
	return verdict{}
}

// runsHere: the command needs no cluster, so this test runs it: policy
// derive, policy check of files, and crossplane render.
func runsHere(c command) bool {
	if args, ok := c.kausality(); ok {
		f := newForm(args)
		return f.sub == "policy derive" || f.sub == "policy check" && (slices.Contains(f.flags, "-f") || slices.Contains(f.flags, "--filename"))
	}
	return len(c.words) > 1 && c.words[0] == "crossplane" && c.words[1] == "render"
}

// TestDocsCommands keeps every command of the README and docs/ run by a
// test, not only written down: a command that needs no cluster (policy
// derive, policy check of files, crossplane render) runs here, its output
// and the files it writes compared with a golden file under
// testdata/docs (-update rewrites them); a `kubectl kausality` command
// that needs a cluster must be one the scenario suite runs (its
// subcommand with at least its flags, read from test/e2e's source); the
// README's install is the one the suite runs. Any other command must
// carry, right above its block, `<!-- not run by a test: why -->`, which
// may name the one command of the block it is about in backticks before
// the why; a note on a command a test runs fails, as does one about no
// command, so a new command no test runs fails until it is run or
// marked. Every `kubectl kausality` command parses with this CLI's
// flags, and the output below a `$ ` line is the golden file its
// `<!-- output: FILE -->` note names, which the suite that runs it
// regenerates and compares.
func TestDocsCommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	install, err := controlplane.ReadmeInstall(readme)
	if err != nil {
		t.Fatal(err)
	}
	k := classifier{forms: e2eForms(t), install: install}
	if len(k.forms) == 0 {
		t.Fatal("found no run of the plugin in test/e2e's source")
	}
	var all []command
	run := newRunner(t)
	for _, page := range docPages(t) {
		n := 0
		for _, b := range blocks(t, page) {
			checkOutput(t, b)
			all = append(all, commands(b)...)
			here, inventory, errs := k.check(b)
			for _, l := range inventory {
				t.Log(l)
			}
			for _, e := range errs {
				t.Error(e)
			}
			if len(here) > 0 {
				n++
				run.block(t, b, here, filepath.Join("testdata", "docs", strings.TrimSuffix(filepath.Base(page), ".md")+"-"+strconv.Itoa(n)+".txt"))
			}
		}
	}
	if len(all) < 20 {
		t.Fatalf("found %d commands in the pages, want their examples", len(all))
	}
	checkParse(t, all)
}

// check says how each command of b is run: the commands this test runs,
// a line per command for the log (where, what, how), and what breaks the
// rules: a command no test runs without a note saying why, a note on a
// command a test runs, a note about no command.
func (k classifier) check(b block) (here []command, inventory, errs []string) {
	ms := markers(b)
	for _, c := range commands(b) {
		if c.synopsis() {
			inventory = append(inventory, b.at()+"\t"+c.line()+"\tnone: a synopsis of commands the pages show one by one")
			continue
		}
		v := k.classify(c)
		i := slices.IndexFunc(ms, func(m *marker) bool { return m.covers(c) })
		switch {
		case v.how != "" && i >= 0:
			errs = append(errs, fmt.Sprintf("%s: %q is marked not run by a test, but %s", b.at(), c.line(), v.how))
		case v.how == "" && i < 0:
			errs = append(errs, fmt.Sprintf("%s: no test runs %q: run it, or mark its block <!-- not run by a test: why --> (doccommands_test.go)", b.at(), c.line()))
		case i >= 0:
			ms[i].used = true
			v.how = "not run: " + ms[i].why
		}
		if v.here {
			here = append(here, c)
		}
		inventory = append(inventory, b.at()+"\t"+c.line()+"\t"+v.how)
	}
	for _, m := range ms {
		if !m.used {
			errs = append(errs, fmt.Sprintf("%s: the note <!-- not run by a test: %s --> is about no command of the block that no test runs", b.at(), m.why))
		}
	}
	return here, inventory, errs
}

// checkOutput: a block that opens with a `$ ` line shows that command's
// output, which is the golden file its output note names.
func checkOutput(t *testing.T, b block) {
	t.Helper()
	golden := output(b)
	first, rest, _ := strings.Cut(b.text, "\n")
	prompt := strings.HasPrefix(first, "$ ") && !slices.Contains(shells, b.lang)
	switch {
	case prompt && golden == "":
		t.Errorf("%s: the output of %q names no golden file: note <!-- output: FILE --> above the block", b.at(), first)
		return
	case !prompt && golden != "":
		t.Errorf("%s: the note <!-- output: %s --> is above a block that opens with no `$ ` line", b.at(), golden)
		return
	case !prompt:
		return
	}
	want, err := os.ReadFile(filepath.Join(repoRoot, golden)) //nolint:gosec // a golden file of the repository's
	if err != nil {
		t.Errorf("%s: %v", b.at(), err)
		return
	}
	if diff := cmp.Diff(string(want), rest); diff != "" {
		t.Errorf("%s: the output shown is not %s: -golden +page:\n%s", b.at(), golden, diff)
	}
}

// checkParse: every `kubectl kausality` command parses with this CLI's
// flags, so a page never teaches a flag or a command the plugin does not
// have.
func checkParse(t *testing.T, all []command) {
	t.Helper()
	t.Run("Parse", func(t *testing.T) {
		// Files the commands name exist where they are parsed, as they
		// would for a user.
		dir := t.TempDir()
		t.Chdir(dir)
		for _, c := range all {
			args, ok := c.kausality()
			if !ok || c.synopsis() {
				continue
			}
			for _, w := range args {
				if strings.HasSuffix(w, ".yaml") && !strings.Contains(w, "=") {
					if err := os.WriteFile(filepath.Join(dir, filepath.Base(w)), nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			p, err := kong.New(&CLI{}, kong.Name("kubectl-kausality"), kong.Exit(func(int) { t.Errorf("%s: %s: kong exited", c.block.at(), c.line()) }))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Parse(args); err != nil {
				t.Errorf("%s: %q does not parse: %v", c.block.at(), c.line(), err)
			}
		}
	})
}

// TestDocsRules: the rules TestDocsCommands holds the pages to, on pages
// made up for each: a command no test runs fails unless a note above its
// block says why, a note fails on a command a test runs and on none.
func TestDocsRules(t *testing.T) {
	k := classifier{
		forms:   []form{{sub: "trace", flags: []string{"-n", "-o"}, at: "corpus_test.go:1"}},
		install: [][]string{{"make", "xpkg"}},
	}
	type want struct {
		here int
		errs []string
	}
	cases := map[string]struct {
		reason string
		page   string
		want   want
	}{
		"RunBySuite": {reason: "A command the suite runs with at least its flags needs no note.",
			page: "```sh\nkubectl kausality trace xnetworks/shop -n team-a  # the tree\n```\n"},
		"FlagNotRunBySuite": {reason: "A flag the suite never passes is a command the suite does not run.",
			page: "```sh\nkubectl kausality trace xnetworks/shop -w\n```\n",
			want: want{errs: []string{`p.md:1: no test runs "kubectl kausality trace xnetworks/shop -w": run it, or mark its block <!-- not run by a test: why --> (doccommands_test.go)`}}},
		"RunHere": {reason: "policy derive and crossplane render run here, a line continued included.",
			page: "```sh\nkubectl kausality policy derive -f c.yaml \\\n  --xrd x.yaml > p.yaml\ncrossplane render xr.yaml c.yaml f.yaml\n```\n",
			want: want{here: 2}},
		"Unmarked": {reason: "A command no test runs and no note explains fails.",
			page: "```sh\nmake bench\n```\n",
			want: want{errs: []string{`p.md:1: no test runs "make bench": run it, or mark its block <!-- not run by a test: why --> (doccommands_test.go)`}}},
		"Marked": {reason: "A note above the block says why no test runs it.",
			page: "<!-- not run by a test: it takes an hour -->\n```sh\nmake bench\n```\n"},
		"MarkedByName": {reason: "A note may name the one command of a block it is about.",
			page: "<!-- not run by a test: `make bench`: it takes an hour -->\n```sh\nmake bench\nkubectl kausality trace x/y -n z\n```\n"},
		"MarkedButRun": {reason: "A note on a command a test runs says what is false.",
			page: "<!-- not run by a test: it needs a cluster -->\n```sh\nkubectl kausality trace x/y -n z\n```\n",
			want: want{errs: []string{
				"p.md:2: \"kubectl kausality trace x/y -n z\" is marked not run by a test, but the scenario suite runs `trace -n -o` (test/e2e/corpus_test.go:1)",
				"p.md:2: the note <!-- not run by a test: it needs a cluster --> is about no command of the block that no test runs",
			}}},
		"NoteAboutNothing": {reason: "A note naming a command the block does not have is stale.",
			page: "<!-- not run by a test: `make demo`: it takes minutes -->\n```sh\nmake bench\n```\n",
			want: want{errs: []string{
				`p.md:2: no test runs "make bench": run it, or mark its block <!-- not run by a test: why --> (doccommands_test.go)`,
				"p.md:2: the note <!-- not run by a test: it takes minutes --> is about no command of the block that no test runs",
			}}},
		"Synopsis": {reason: "A line naming a choice of commands is no command.",
			page: "```sh\nkubectl kausality policy derive|check …\n```\n"},
		"Prompt": {reason: "In an output block only the `$ ` line is a command.",
			page: "```\n$ make bench\nBenchmarkX 1 ns/op\n```\n",
			want: want{errs: []string{`p.md:1: no test runs "make bench": run it, or mark its block <!-- not run by a test: why --> (doccommands_test.go)`}}},
		"NotTheInstall": {reason: "An install command counts as run only on the README, whose install the suite runs.",
			page: "```sh\nmake xpkg\n```\n",
			want: want{errs: []string{`p.md:1: no test runs "make xpkg": run it, or mark its block <!-- not run by a test: why --> (doccommands_test.go)`}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bs, open := parseBlocks("p.md", tc.page)
			if open != nil || len(bs) != 1 {
				t.Fatalf("the page is not one block: %v", bs)
			}
			here, _, errs := k.check(bs[0])
			if diff := cmp.Diff(tc.want, want{here: len(here), errs: errs}, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ncheck(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
