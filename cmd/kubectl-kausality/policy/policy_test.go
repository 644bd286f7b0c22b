package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const corpus = "../../../examples/corpus"

// crds names the managed kinds the corpus composes.
const crds = "../../../internal/derive/testdata"

// providerCRDs are the provider CRDs the scenario suite serves.
const providerCRDs = "../../../test/recorder/package/crds"

// TestDeriveThenCheck derives each corpus policy from its files and checks
// the Composition against it: a derived policy has no gap. The
// hand-written policies withhold changes on purpose, so check fails on
// them (internal/derive's goldens explain each gap).
func TestDeriveThenCheck(t *testing.T) {
	for _, c := range []string{"cluster", "database", "network", "platform", "storage"} {
		t.Run(c, func(t *testing.T) {
			comp := filepath.Join(corpus, c, "composition.yaml")
			var out bytes.Buffer
			err := Derive(DeriveOptions{
				Composition: comp, XRD: filepath.Join(corpus, c, "xrd.yaml"), CRDs: []string{crds, corpus},
				Groups: []string{"platform-team"}, Propagators: []string{"crossplane-system/crossplane"},
				Deleting: "delete", DeletionProtection: true,
			}, nil, &out)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.String(), "guessed") {
				t.Errorf("derive guessed a plural although --crds names every kind:\n%s", out.String())
			}
			derived := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(derived, out.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			var rep bytes.Buffer
			if err := CheckFiles(CheckOptions{Compositions: []string{comp}, Policies: []string{derived}, CRDs: []string{crds, corpus}}, nil, &rep); err != nil {
				t.Errorf("check of the derived policy: %v\n%s", err, rep.String())
			}
			rep.Reset()
			err = CheckFiles(CheckOptions{Compositions: []string{comp}, Policies: []string{filepath.Join(corpus, c, "policy.yaml")}, CRDs: []string{crds, corpus}}, nil, &rep)
			if !errors.Is(err, ErrGaps) || !strings.Contains(rep.String(), "Uncovered") {
				t.Errorf("check of the hand-written policy: %v, want gaps\n%s", err, rep.String())
			}
		})
	}
}

func TestDeriveErrors(t *testing.T) {
	comp := filepath.Join(corpus, "database", "composition.yaml")
	cases := map[string]struct {
		o    DeriveOptions
		want string
	}{
		"BadServiceAccount": {o: DeriveOptions{Composition: comp, ServiceAccounts: []string{"nobody"}}, want: `service account "nobody" is not namespace/name`},
		"BadDeleting":       {o: DeriveOptions{Composition: comp, Deleting: "keep"}, want: `deleting "keep"`},
		"NoComposition":     {o: DeriveOptions{Composition: filepath.Join(corpus, "database", "xrd.yaml")}, want: "holds no Composition"},
		"MissingFile":       {o: DeriveOptions{Composition: "nope.yaml"}, want: "cannot open nope.yaml"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Derive(tc.o, nil, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Derive(...): %v, want %q", err, tc.want)
			}
		})
	}
}
