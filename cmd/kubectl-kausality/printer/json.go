package printer

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// JSONPrinter prints a Value as one indented JSON document and a newline,
// so that a stream of them (trace --watch) splits at document ends.
type JSONPrinter struct{}

var _ Printer = JSONPrinter{}

// Print writes v as JSON.
func (JSONPrinter) Print(w io.Writer, v Value) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrap(err, errEncodeJSON)
	}
	_, err = fmt.Fprintln(w, string(b))
	return errors.Wrap(err, errWrite)
}
