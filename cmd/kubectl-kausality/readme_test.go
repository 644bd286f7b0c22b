package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
)

// block is one fenced code block of a Markdown file.
type block struct{ lang, text string }

var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```$")

func blocks(t *testing.T, path string) []block {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	for _, m := range fence.FindAllStringSubmatch(string(b), -1) {
		out = append(out, block{lang: m[1], text: m[2]})
	}
	return out
}

// TestREADME keeps the README true to what the tests run: its policy is
// the one TestCorpus applies on real core, its trace output is the golden
// file TestCorpus compares `kubectl kausality trace` with, its pipeline
// step decodes as the function's Input, and every `kubectl kausality`
// command it shows parses with this CLI's flags.
func TestREADME(t *testing.T) {
	root := filepath.Join("..", "..")
	var policy, trace, step bool
	var commands []string
	for _, b := range blocks(t, filepath.Join(root, "README.md")) {
		switch {
		case strings.Contains(b.text, "kind: AllowancePolicy"):
			policy = true
			want, err := os.ReadFile(filepath.Join(root, "examples", "corpus", "database", "policy.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(withoutComments(string(want)), b.text); diff != "" {
				t.Errorf("the README's AllowancePolicy is not examples/corpus/database/policy.yaml: -file +README:\n%s", diff)
			}
		case strings.HasPrefix(b.text, "$ kubectl kausality trace "):
			trace = true
			want, err := os.ReadFile(filepath.Join(root, "test", "e2e", "testdata", "cli", "database.txt"))
			if err != nil {
				t.Fatal(err)
			}
			_, got, _ := strings.Cut(b.text, "\n")
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("the README's trace output is not TestCorpus's golden file: -golden +README:\n%s", diff)
			}
		case strings.Contains(b.text, "step: kausality"):
			step = true
			var steps []xpv1.PipelineStep
			if err := yaml.UnmarshalStrict([]byte(b.text), &steps); err != nil || len(steps) != 1 || steps[0].Input == nil {
				t.Fatalf("the README's pipeline step does not decode as a Composition's step (%v):\n%s", err, b.text)
			}
			var in v1beta1.Input
			if err := yaml.UnmarshalStrict(steps[0].Input.Raw, &in); err != nil || in.Kind != "Input" || in.APIVersion != "kausality.fn.crossplane.io/v1beta1" {
				t.Errorf("the README's step input does not decode as the function's Input (%v):\n%s", err, b.text)
			}
		case b.lang == "sh":
			commands = append(commands, kausalityCommands(b.text)...)
		}
	}
	if !policy || !trace || !step || len(commands) < 5 {
		t.Fatalf("the README lost a block this test keeps true: policy %t, trace %t, step %t, %d commands", policy, trace, step, len(commands))
	}
	// Files the commands name exist where they are parsed, as they would
	// for a user.
	dir := t.TempDir()
	t.Chdir(dir)
	for _, f := range []string{"composition.yaml", "xrd.yaml", "policy.yaml", "functions.yaml", "orders.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range commands {
		p, err := kong.New(&CLI{}, kong.Name("kubectl-kausality"), kong.Exit(func(int) { t.Errorf("%s: kong exited", c) }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse(strings.Fields(c)); err != nil {
			t.Errorf("the README's %q does not parse: %v", "kubectl kausality "+c, err)
		}
	}
}

// withoutComments is a YAML file without its leading comment lines.
func withoutComments(s string) string {
	for strings.HasPrefix(s, "#") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return s
}

// kausalityCommands are the arguments of each `kubectl kausality` line of
// a shell block, continuation lines joined, comments and redirections
// dropped; a line
// that names a choice of commands (derive|check …) is no command.
func kausalityCommands(sh string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(sh, "\\\n", " "), "\n") {
		l, _, _ = strings.Cut(l, "#")
		l, _, _ = strings.Cut(l, ">")
		args, ok := strings.CutPrefix(strings.TrimSpace(l), "kubectl kausality ")
		if !ok || strings.ContainsAny(args, "|…") {
			continue
		}
		out = append(out, strings.TrimSpace(args))
	}
	return out
}

// TestDocsCommandsParse: every `kubectl kausality` command the pages in
// docs/ show in a shell block parses with this CLI's flags, so a page
// never teaches a flag or a command the plugin does not have.
func TestDocsCommandsParse(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	type command struct{ page, args string }
	var commands []command
	for _, page := range pages {
		for _, b := range blocks(t, page) {
			if b.lang != "sh" && b.lang != "" {
				continue
			}
			for _, c := range kausalityCommands(b.text) {
				commands = append(commands, command{page: filepath.Base(page), args: c})
			}
		}
	}
	if len(commands) < 5 {
		t.Fatalf("found %d commands in docs/, want the pages' examples", len(commands))
	}
	t.Logf("%d commands in %d pages", len(commands), len(pages))
	dir := t.TempDir()
	t.Chdir(dir)
	for _, c := range commands {
		for _, w := range strings.Fields(c.args) {
			// Files the command names exist, as they would for a user.
			if strings.HasSuffix(w, ".yaml") && !strings.Contains(w, "=") {
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(w)), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		p, err := kong.New(&CLI{}, kong.Name("kubectl-kausality"), kong.Exit(func(int) { t.Errorf("%s: %s: kong exited", c.page, c.args) }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse(strings.Fields(c.args)); err != nil {
			t.Errorf("docs/%s: %q does not parse: %v", c.page, "kubectl kausality "+c.args, err)
		}
	}
}
