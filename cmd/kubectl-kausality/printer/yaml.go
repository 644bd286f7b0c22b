package printer

import (
	"io"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
)

// printYAML writes the nodes as one YAML document.
func printYAML(w io.Writer, n *tree.Node) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return errors.Wrap(err, "cannot encode the tree as YAML")
	}
	_, err = w.Write(b)
	return err
}
