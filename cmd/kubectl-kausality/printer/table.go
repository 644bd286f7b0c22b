package printer

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
)

// printTable writes one line per object, the tree drawn in its first
// column and what Kausality holds for each in its last; wide adds who
// started the change that last reached it and its trace.
func printTable(w io.Writer, n *tree.Node, wide bool) error {
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
	line(n, "", "")
	return tw.Flush()
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
