package printer

import (
	"fmt"
	"io"
	"strings"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
)

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

// printDot writes the tree as a Graphviz digraph: one box per object,
// labelled with its kind and name, gate and what Kausality holds for it,
// filled by state, with edges from parent to child. Node ids follow the
// walk order, so the same tree always gives the same text.
func printDot(w io.Writer, n *tree.Node) error {
	var b strings.Builder
	b.WriteString("digraph kausality {\n")
	b.WriteString("  rankdir=TB;\n")
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n")
	ids := map[*tree.Node]string{}
	n.Walk(func(x *tree.Node) {
		id := fmt.Sprintf("n%d", len(ids))
		ids[x] = id
		style := ""
		if x.Missing {
			style = ", style=\"rounded,dashed\""
		}
		fmt.Fprintf(&b, "  %s [label=%s, fillcolor=%q%s];\n", id, dotQuote(dotLabel(x)), dotColor(x), style)
	})
	n.Walk(func(x *tree.Node) {
		for _, c := range x.Children {
			fmt.Fprintf(&b, "  %s -> %s;\n", ids[x], ids[c])
		}
	})
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
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
