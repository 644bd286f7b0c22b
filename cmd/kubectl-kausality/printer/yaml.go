package printer

import (
	"io"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/yaml"
)

// YAMLPrinter prints a Value as one YAML document. It goes through the
// value's JSON form, so its keys are the JSON printer's.
type YAMLPrinter struct{}

var _ Printer = YAMLPrinter{}

// Print writes v as YAML.
func (YAMLPrinter) Print(w io.Writer, v Value) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return errors.Wrap(err, errEncodeYAML)
	}
	_, err = w.Write(b)
	return errors.Wrap(err, errWrite)
}
