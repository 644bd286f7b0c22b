package printer

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
)

// Tree is a tree as the printers take it: a table, its nodes as JSON or
// YAML, or a Graphviz graph. It embeds the root so that its JSON is the
// root's own.
type Tree struct {
	*tree.Node
}

var _ Graph = Tree{}

// Fill colors of the dot graph, by what Kausality holds for a node: a
// reader spots what keeps a change from the cloud (red) before what is on
// its way (yellow, green).
const (
	colorBlocked = "#f4cccc" // withheld, held, unreadable, gone
	colorFrozen  = "#cfe2f3"
	colorPending = "#fff2cc" // pending allowances, waiting gates, creation
	colorOpen    = "#d9ead3" // a gate open for an allowance
	colorQuiet   = "#ffffff"
)

// WriteText writes one line per object, the tree drawn in its first
// column and what Kausality holds for each in its last; wide adds who
// started the change that last reached it and its trace.
func (t Tree) WriteText(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tRESOURCE\tSYNCED\tREADY\tGATE\tKAUSALITY"
	if wide {
		head += "\tINITIATOR\tTRACE"
	}
	fmt.Fprintln(tw, head)
	var line func(n *tree.Node, prefix, branch string)
	line = func(n *tree.Node, prefix, branch string) {
		res := n.Resource
		if res == "" {
			res = "-"
		}
		cols := []string{prefix + branch + n.Kind + "/" + n.Name, res, OrDash(n.Synced), OrDash(n.Ready), OrDash(strings.Join(n.Gate, ",")), n.Holds()}
		if wide {
			cols = append(cols, OrDash(n.Initiator), OrDash(traceLine(n)))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		next := prefix
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		for i, c := range n.Children {
			b := "├─ "
			if i == len(n.Children)-1 {
				b = "└─ "
			}
			line(c, next, b)
		}
	}
	line(t.Node, "", "")
	return errors.Wrap(tw.Flush(), "cannot write the tree")
}

// traceLine is a node's trace as one line: each hop's kind and name, the
// field that caused the next hop, and who made the change where a person
// or controller did.
func traceLine(n *tree.Node) string {
	parts := make([]string, 0, len(n.Trace))
	for _, h := range n.Trace {
		p := h.Kind + "/" + h.Name
		if h.Field != "" {
			p += "[" + h.Field + "]"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " → ")
}

// OrDash is s, or "-" when s is empty, as tables show an empty cell.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteDot writes the tree as a Graphviz digraph: one box per object,
// labelled with its kind and name, gate and what Kausality holds for it,
// filled by state, with edges from parent to child. Node ids follow the
// walk order, so the same tree always gives the same text and a watch
// prints a frame only when the tree changed.
func (t Tree) WriteDot(w io.Writer) error {
	var b strings.Builder
	b.WriteString("digraph kausality {\n")
	b.WriteString("  rankdir=TB;\n")
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n")
	ids := map[*tree.Node]string{}
	t.Walk(func(x *tree.Node) {
		id := fmt.Sprintf("n%d", len(ids))
		ids[x] = id
		style := ""
		if x.Missing {
			style = ", style=\"rounded,dashed\""
		}
		fmt.Fprintf(&b, "  %s [label=%s, fillcolor=%q%s];\n", id, dotQuote(dotLabel(x)), dotColor(x), style)
	})
	t.Walk(func(x *tree.Node) {
		for _, c := range x.Children {
			fmt.Fprintf(&b, "  %s -> %s;\n", ids[x], ids[c])
		}
	})
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return errors.Wrap(err, "cannot write the tree as a graph")
}

// dotLabel is a node's lines: kind/name, its gate, what Kausality holds.
func dotLabel(x *tree.Node) string {
	lines := []string{x.Kind + "/" + x.Name}
	if len(x.Gate) > 0 {
		lines = append(lines, "gate: "+strings.Join(x.Gate, ","))
	}
	lines = append(lines, x.Holds())
	return strings.Join(lines, "\n")
}

// dotColor is a node's fill: a freeze first (it explains the rest), then
// what blocks, then what waits, then an open gate.
func dotColor(x *tree.Node) string {
	switch {
	case x.Frozen != "":
		return colorFrozen
	case x.Missing || x.Unreadable || x.Withheld != "" || x.Held != "" || len(x.Problems) > 0:
		return colorBlocked
	case len(x.Pending) > 0 || x.Creating || (len(x.Open) > 0 && !x.GateOpen()):
		return colorPending
	case len(x.Open) > 0 || (x.Gated && x.GateOpen()):
		return colorOpen
	}
	return colorQuiet
}

// dotQuote quotes s as a dot string, its newlines as line breaks.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
