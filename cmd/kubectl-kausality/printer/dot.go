package printer

import (
	"io"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// DotPrinter prints a Graph as a Graphviz digraph, to be piped to dot.
type DotPrinter struct{}

var _ Printer = DotPrinter{}

// Print draws v, which must be a Graph: New hands a DotPrinter only to
// commands that print trees.
func (DotPrinter) Print(w io.Writer, v Value) error {
	g, ok := v.(Graph)
	if !ok {
		return errors.New(errNotGraph)
	}
	return g.WriteDot(w)
}
