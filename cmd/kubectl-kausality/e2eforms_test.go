package main

// What the scenario suite runs of the plugin, read from its source: a
// page's `kubectl kausality` command that needs a cluster counts as run
// only when test/e2e runs the built binary with its subcommand and flags.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// e2eDir is the scenario suite, seen from this package.
var e2eDir = filepath.Join(repoRoot, "test", "e2e")

// cliHelpers are the functions through which test/e2e runs the binary
// (cli_test.go, and test/controlplane's ControlPlane.Kausality): a call of
// one with literal arguments is a form the suite runs.
var cliHelpers = []string{"expectCLI", "expectCLIAs", "kausality", "Kausality"}

// subcommands are the plugin's commands, as a form starts.
var subcommands = []string{"trace", "status", "explain", "plan", "policy", "uninstall"}

// form is one way the suite runs the binary: a subcommand ("policy check"
// for a command of policy) and the flags it passes.
type form struct {
	sub   string
	flags []string
	at    string // file:line of the call
}

// e2eForms are the forms test/e2e's source runs: for each call of a CLI
// helper, its string literal arguments, or, where it passes a slice
// (args...), the []string literals of the function that builds it.
func e2eForms(t *testing.T) []form {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e2eDir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", e2eDir, err)
	}
	fset := token.NewFileSet()
	var out []form
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !slices.Contains(cliHelpers, callee(call)) {
					return true
				}
				lits := literals(call.Args)
				if call.Ellipsis.IsValid() {
					// args...: the slices the function builds.
					ast.Inspect(fn.Body, func(n ast.Node) bool {
						if c, ok := n.(*ast.CompositeLit); ok && stringSlice(c.Type) {
							lits = append(lits, literals(c.Elts)...)
						}
						return true
					})
				}
				if fm, ok := formOf(lits); ok {
					p := fset.Position(call.Pos())
					fm.at = filepath.Base(p.Filename) + ":" + strconv.Itoa(p.Line)
					out = append(out, fm)
				}
				return true
			})
		}
	}
	return out
}

// callee is the name a call calls: f(…) or x.f(…).
func callee(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// stringSlice: t is []string.
func stringSlice(t ast.Expr) bool {
	a, ok := t.(*ast.ArrayType)
	if !ok || a.Len != nil {
		return false
	}
	id, ok := a.Elt.(*ast.Ident)
	return ok && id.Name == "string"
}

// literals are the string literals among exprs.
func literals(exprs []ast.Expr) []string {
	var out []string
	for _, e := range exprs {
		if l, ok := e.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if s, err := strconv.Unquote(l.Value); err == nil {
				out = append(out, s)
			}
		}
	}
	return out
}

// formOf is the form a call's literals name: from the first subcommand on,
// the flags.
func formOf(lits []string) (form, bool) {
	i := slices.IndexFunc(lits, func(s string) bool { return slices.Contains(subcommands, s) })
	if i < 0 {
		return form{}, false
	}
	return newForm(lits[i:]), true
}

// newForm is the form of args, a command's arguments from its subcommand.
func newForm(args []string) form {
	f := form{sub: args[0]}
	rest := args[1:]
	if f.sub == "policy" && len(rest) > 0 {
		f.sub, rest = "policy "+rest[0], rest[1:]
	}
	for _, a := range rest {
		if strings.HasPrefix(a, "-") {
			name, _, _ := strings.Cut(a, "=")
			f.flags = append(f.flags, name)
		}
	}
	return f
}

// runBy is the form of forms that runs args (a page's command): the same
// subcommand with at least its flags.
func runBy(forms []form, args []string) (form, bool) {
	want := newForm(args)
	for _, f := range forms {
		if f.sub != want.sub {
			continue
		}
		if !slices.ContainsFunc(want.flags, func(fl string) bool { return !slices.Contains(f.flags, fl) }) {
			return f, true
		}
	}
	return form{}, false
}
