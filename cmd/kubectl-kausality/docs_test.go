package main

// The pages as the doc tests read them: their fenced blocks, the commands
// in them and the notes above them. TestDocsCommands (doccommands_test.go)
// says how each command is run.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository, seen from this package.
var repoRoot = filepath.Join("..", "..")

// docPages are the pages whose commands the tests answer for, relative to
// the repository: the README and every page in docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// block is one fenced code block of a page.
type block struct {
	page string // relative to the repository
	line int    // of the opening fence
	lang string
	text string // without the indentation of a list item
	// notes are the HTML comments on the lines right above the fence,
	// without <!-- and -->.
	notes []string
}

// at is where the block is, for messages.
func (b block) at() string { return b.page + ":" + strconv.Itoa(b.line) }

// blocks are the fenced blocks of page (relative to the repository).
func blocks(t *testing.T, page string) []block {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, page)) //nolint:gosec // the repository's own pages
	if err != nil {
		t.Fatal(err)
	}
	bs, open := parseBlocks(page, string(raw))
	if open != nil {
		t.Fatalf("%s: the block is not closed", open.at())
	}
	return bs
}

// parseBlocks are the fenced blocks of page, which reads text, and the
// block left open at its end, if one is.
func parseBlocks(page, text string) ([]block, *block) {
	lines := strings.Split(text, "\n")
	var (
		out    []block
		cur    *block
		body   []string
		indent string
	)
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{page: page, line: i + 1, lang: strings.TrimPrefix(trimmed, "```")}
			indent, body = l[:len(l)-len(trimmed)], nil
			for j := i - 1; j >= 0; j-- {
				n, open := strings.CutPrefix(strings.TrimSpace(lines[j]), "<!--")
				n, closed := strings.CutSuffix(n, "-->")
				if !open || !closed {
					break
				}
				cur.notes = append([]string{strings.TrimSpace(n)}, cur.notes...)
			}
		case cur != nil && trimmed == "```":
			cur.text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, strings.TrimPrefix(l, indent))
		}
	}
	return out, cur
}

// shells are the languages of blocks whose every line is a command.
var shells = []string{"sh", "bash", "shell"}

// command is one command a page shows: a line of a shell block
// (continuation lines joined), or a `$ ` line of any block, which opens
// the output the command printed.
type command struct {
	block block
	// text is the command as the page writes it, comment and redirection
	// included: what a shell runs.
	text string
	// words are its words without the comment and the redirection.
	words []string
	// prompt: the page writes it after `$ `, with its output below.
	prompt bool
}

// commands are the commands of b.
func commands(b block) []command {
	var out []command
	shell := slices.Contains(shells, b.lang)
	var lines []string
	for _, l := range strings.Split(b.text, "\n") {
		// A line ending in \ continues on the next one, for sh as for the
		// words.
		lines = append(lines, l)
		if strings.HasSuffix(l, "\\") {
			continue
		}
		text, prompt := strings.CutPrefix(strings.Join(lines, "\n"), "$ ")
		lines = nil
		if !prompt && !shell {
			continue
		}
		if w := words(strings.ReplaceAll(text, "\\\n", " ")); len(w) > 0 {
			out = append(out, command{block: b, text: strings.TrimSpace(text), words: w, prompt: prompt})
		}
	}
	return out
}

// comment is a shell comment: a # at the start of a word.
var comment = regexp.MustCompile(`(^|\s)#.*`)

// words are a command line's words, without its comment and what follows
// a redirection (a word that starts with > or 2>: <registry> is a word).
func words(line string) []string {
	w := strings.Fields(comment.ReplaceAllString(line, ""))
	if i := slices.IndexFunc(w, func(s string) bool { return strings.HasPrefix(s, ">") || strings.HasPrefix(s, "2>") }); i >= 0 {
		w = w[:i]
	}
	return w
}

// synopsis: the line names a choice of commands (derive|check …), not
// one command; the page shows each elsewhere.
func (c command) synopsis() bool {
	return slices.ContainsFunc(c.words, func(w string) bool { return strings.Contains(w, "…") || strings.Contains(w, "|") })
}

// line is the command's words joined, as markers name a command.
func (c command) line() string { return strings.Join(c.words, " ") }

// kausality are the arguments of a `kubectl kausality` command.
func (c command) kausality() ([]string, bool) {
	if len(c.words) < 2 || c.words[0] != "kubectl" || c.words[1] != "kausality" {
		return nil, false
	}
	return c.words[2:], true
}

// notRunNote is a note that the commands below are not run by a test,
// optionally naming (in backticks, its words without comment or
// redirection) the one command of the block it is about, and saying why.
var notRunNote = regexp.MustCompile("^not run by a test: (?:`([^`]+)`: )?(.+)$")

// outputNote names the golden file the output below a `$ ` line is.
var outputNote = regexp.MustCompile(`^output: (\S+)$`)

// marker is a not-run note of a block.
type marker struct {
	command string // the command it is about; "" for every command
	why     string
	used    bool
}

// markers are the not-run notes of b.
func markers(b block) []*marker {
	var out []*marker
	for _, n := range b.notes {
		if m := notRunNote.FindStringSubmatch(n); m != nil {
			out = append(out, &marker{command: m[1], why: m[2]})
		}
	}
	return out
}

// covers: the marker is about c.
func (m *marker) covers(c command) bool {
	return m.command == "" || m.command == c.line()
}

// output is the golden file (relative to the repository) an output note
// of b names, or "".
func output(b block) string {
	for _, n := range b.notes {
		if m := outputNote.FindStringSubmatch(n); m != nil {
			return m[1]
		}
	}
	return ""
}
