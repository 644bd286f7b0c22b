package controlplane

import (
	"encoding/json"
	"os/exec"
	"path/filepath"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// crossplaneModule is the directory of the crossplane module the core binary
// was built from (test/tools/core): its CRDs and Helm chart. It downloads the
// module rather than asking go list, which names no directory for a module
// the module cache does not hold yet.
func crossplaneModule(root string) (string, error) {
	const mod = "github.com/crossplane/crossplane/v2"
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = filepath.Join(root, "test", "tools", "core")
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Wrapf(err, "cannot download %s (go mod download in test/tools/core)", mod)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", errors.Wrapf(err, "cannot parse go mod download's answer for %s", mod)
	}
	if m.Dir == "" {
		return "", errors.Errorf("go mod download names no directory for %s: %s", mod, m.Error)
	}
	return m.Dir, nil
}
