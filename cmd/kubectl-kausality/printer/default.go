package printer

import "io"

// DefaultPrinter prints a Value's text: what a person reads.
type DefaultPrinter struct{}

var _ Printer = DefaultPrinter{}

// Print writes v's text. The value wraps its own errors: only it knows
// what it was writing.
func (DefaultPrinter) Print(w io.Writer, v Value) error {
	return v.WriteText(w, false)
}

// WidePrinter prints a Value's text with the columns the default leaves
// out, for a terminal wide enough to show them.
type WidePrinter struct{}

var _ Printer = WidePrinter{}

// Print writes v's wide text.
func (WidePrinter) Print(w io.Writer, v Value) error {
	return v.WriteText(w, true)
}
