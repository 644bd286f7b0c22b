package show

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/yaml"
)

// Formats Print writes.
const (
	FormatDefault = "default"
	FormatWide    = "wide"
	FormatJSON    = "json"
	FormatYAML    = "yaml"
	FormatDot     = "dot"
)

// Print writes the tree in format: a table with one line per object (the
// tree drawn in its first column, what Kausality holds for each in its
// last; wide adds who started the change that last reached it and its
// trace), the nodes as JSON or YAML, or a Graphviz graph (dot).
func (n *Node) Print(w io.Writer, format string) error {
	switch format {
	case FormatJSON:
		b, err := json.MarshalIndent(n, "", "  ")
		if err != nil {
			return errors.Wrap(err, "cannot encode the tree as JSON")
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case FormatYAML:
		b, err := yaml.Marshal(n)
		if err != nil {
			return errors.Wrap(err, "cannot encode the tree as YAML")
		}
		_, err = w.Write(b)
		return err
	case FormatDot:
		return n.printDot(w)
	case FormatDefault, FormatWide, "":
	default:
		return errors.Errorf("unknown output format %q: use one of %s", format, strings.Join([]string{FormatDefault, FormatWide, FormatJSON, FormatYAML, FormatDot}, ", "))
	}
	wide := format == FormatWide
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tRESOURCE\tSYNCED\tREADY\tGATE\tKAUSALITY"
	if wide {
		head += "\tINITIATOR\tTRACE"
	}
	fmt.Fprintln(tw, head)
	var line func(n *Node, prefix, branch string)
	line = func(n *Node, prefix, branch string) {
		res := n.Resource
		if res == "" {
			res = "-"
		}
		cols := []string{prefix + branch + n.Kind + "/" + n.Name, res, orDash(n.Synced), orDash(n.Ready), orDash(strings.Join(n.Gate, ",")), n.summary()}
		if wide {
			cols = append(cols, orDash(n.Initiator), orDash(traceLine(n)))
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

func (n *Node) summary() string {
	if n.Missing {
		return "gone"
	}
	if n.Unreadable {
		return "not readable with your permissions"
	}
	return n.Summary()
}

// traceLine is a node's trace as one line: each hop's kind and name, the
// field that caused the next hop, and who made the change where a person
// or controller did.
func traceLine(n *Node) string {
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
