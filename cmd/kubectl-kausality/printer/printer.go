// Package printer writes the tree `kubectl kausality trace` reads, one
// file per output format: a table (default and wide), JSON, YAML and a
// Graphviz graph.
package printer

import (
	"io"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
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
func Print(w io.Writer, n *tree.Node, format string) error {
	switch format {
	case FormatJSON:
		return printJSON(w, n)
	case FormatYAML:
		return printYAML(w, n)
	case FormatDot:
		return printDot(w, n)
	case FormatDefault, FormatWide, "":
		return printTable(w, n, format == FormatWide)
	default:
		return errors.Errorf("unknown output format %q: use one of %s", format, strings.Join([]string{FormatDefault, FormatWide, FormatJSON, FormatYAML, FormatDot}, ", "))
	}
}
