package printer

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
)

// printJSON writes the nodes as one indented JSON document.
func printJSON(w io.Writer, n *tree.Node) error {
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return errors.Wrap(err, "cannot encode the tree as JSON")
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
