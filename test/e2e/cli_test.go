package e2e

// `kubectl kausality` as users run it, against the scenarios: the binary
// built from cmd/kubectl-kausality, reading the control plane as Alice
// through her kubeconfig, its output compared with golden files.

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// generated masks the suffix Crossplane gives generated names, which
// differs between runs (same width, so columns stay aligned).
var generated = regexp.MustCompile(`-[0-9a-f]{12}\b`)

// cliUser is who runs the CLI, with their groups.
type cliUser struct {
	name   string
	groups []string
}

// asAlice is Alice with her group: namespace edit rights, as a user of
// the platform has; asAdmin is a platform engineer, who may read the
// cluster-scoped AllowancePolicies.
var (
	asAlice = cliUser{controlplane.Alice, []string{"platform-team"}}
	asAdmin = cliUser{name: "admin"}
)

// kausality runs `kubectl kausality args…` as u and returns its output
// with generated names masked.
func kausality(t *testing.T, u cliUser, args ...string) string {
	t.Helper()
	out, err := cp.Kausality(context.Background(), u.name, u.groups, args...)
	if err != nil {
		t.Fatal(err)
	}
	return generated.ReplaceAllString(out, "-xxxxxxxxxxxx")
}

// expectCLI waits until `kubectl kausality args…` prints what
// testdata/cli/<golden>.txt holds: the state it shows is one the test
// has driven the tree to, and objects the test does not wait for may
// still be settling into it. With -update it records the first output
// that has every one of want in it.
func expectCLI(t *testing.T, golden string, want []string, args ...string) {
	t.Helper()
	expectCLIAs(t, asAlice, golden, want, args...)
}

// expectCLIAs is expectCLI with the CLI run as u.
func expectCLIAs(t *testing.T, u cliUser, golden string, want []string, args ...string) {
	t.Helper()
	path := filepath.Join("testdata", "cli", golden+".txt")
	what := "kubectl kausality " + strings.Join(args, " ")
	if *update {
		var out string
		fixture.Eventually(t, settleTimeout, what+" to print "+strings.Join(want, ", "), func() (bool, string) {
			out = kausality(t, u, args...)
			for _, w := range want {
				if !strings.Contains(out, w) {
					return false, out
				}
			}
			return true, ""
		})
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recorded, err := os.ReadFile(path) //nolint:gosec // the suite's own golden file
	if err != nil {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	fixture.Eventually(t, settleTimeout, what+" to print "+path, func() (bool, string) {
		diff := cmp.Diff(string(recorded), kausality(t, u, args...))
		return diff == "", "-want, +got:\n" + diff
	})
}
