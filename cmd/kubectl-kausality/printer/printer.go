// Package printer is the one output contract of `kubectl kausality`: every
// command that prints takes -o from the same format names, and prints
// through a Printer of this package, one type per format, so that a
// script learns one set of names and a person sees the same table or text
// whether they trace a tree, list the held XRs, explain or plan a change.
package printer

import (
	"io"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Errors of the contract. They say what the user can do next, since the
// user who sees them has mistyped or misremembered -o.
const (
	errFmtUnknownFormat = "unknown output format %q: use one of %s"
	errFmtNotAccepted   = "output format %q does not apply to this command: use one of %s"
	errNotGraph         = "only a tree can be drawn as a graph: use another output format"
	errEncodeJSON       = "cannot encode the output as JSON"
	errEncodeYAML       = "cannot encode the output as YAML"
	errWrite            = "cannot write the output"
)

// Format is a name -o takes.
type Format string

// The formats a command may print in. A command accepts the ones that
// make sense for what it prints: wide only where it has columns to add,
// dot only for a tree.
const (
	// FormatDefault is for a person: a table or text.
	FormatDefault Format = "default"
	// FormatWide is the default table with the columns it leaves out.
	FormatWide Format = "wide"
	// FormatJSON is for a script: one indented JSON document.
	FormatJSON Format = "json"
	// FormatYAML is for a script or a person: one YAML document.
	FormatYAML Format = "yaml"
	// FormatDot is a Graphviz digraph, for a tree.
	FormatDot Format = "dot"
)

// formats is every Format in the order errors list them.
var formats = []Format{FormatDefault, FormatWide, FormatJSON, FormatYAML, FormatDot}

// Printer writes what a command prints in one format.
type Printer interface {
	Print(w io.Writer, v Value) error
}

// Value is what a command prints. The JSON and YAML printers encode it
// by encoding/json's rules, so its JSON form is its exported fields; the
// default and wide printers ask it for its text, which only it knows.
type Value interface {
	// WriteText writes the value for a person. Wide asks for the
	// columns the default leaves out; a value with none ignores it.
	WriteText(w io.Writer, wide bool) error
}

// Graph is a Value that can also be drawn as a Graphviz digraph.
type Graph interface {
	Value
	// WriteDot writes the value as a Graphviz digraph.
	WriteDot(w io.Writer) error
}

// New returns the Printer of format, which must be one of accepted, the
// formats the calling command prints. An empty format is the default, as
// when -o is not given. Commands call New before they read anything, so
// a wrong -o fails before a cluster is asked.
func New(format Format, accepted ...Format) (Printer, error) {
	if format == "" {
		format = FormatDefault
	}
	if !slices.Contains(formats, format) {
		return nil, errors.Errorf(errFmtUnknownFormat, format, join(accepted))
	}
	if !slices.Contains(accepted, format) {
		return nil, errors.Errorf(errFmtNotAccepted, format, join(accepted))
	}
	switch format {
	case FormatWide:
		return WidePrinter{}, nil
	case FormatJSON:
		return JSONPrinter{}, nil
	case FormatYAML:
		return YAMLPrinter{}, nil
	case FormatDot:
		return DotPrinter{}, nil
	}
	return DefaultPrinter{}, nil
}

// join lists formats as an error names them.
func join(fs []Format) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}
