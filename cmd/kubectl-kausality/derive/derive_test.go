package derive

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/test/fixture"
	xprender "github.com/kausality-io/kausality-crossplane/test/render"
)

const corpus = "../../../examples/corpus"

// crds names the managed kinds the corpus composes.
const crds = "../../../internal/derivation/testdata"

// TestExperimentMatchesStructural derives corpus policies by experiment,
// running the real `crossplane render` (the core binary, no Docker) with
// the real function-patch-and-transform, function-cel-filter and
// function-auto-ready as processes, and compares each with the structural
// derivation of the same Composition: the issue's "a render-experiment
// derivation matches its structural twin", on patch-and-transform since
// function-go-templating cannot be fetched here.
//
// The rules, initializing and deleting bounds must be equal up to order:
// the experiment lists composed kinds by composition resource name, the
// structural derivation in pipeline order. What may differ, by design: the
// comments above each rule (an experiment sees no transforms) and the
// notes (an experiment cannot see patches from the XR's status or
// metadata, which the structural derivation notes as needing no rule, and
// says instead what it rendered and could not perturb).
func TestExperimentMatchesStructural(t *testing.T) {
	fns := xprender.NeedFunctions(t)
	storageXR := filepath.Join(t.TempDir(), "storage-xr.yaml")
	// Versioning on: the baseline composes the versioning resource, so
	// its region is seen to change (with versioning off the cel-filter
	// step drops it, and the experiment only notes that turning it on
	// composes it).
	if err := os.WriteFile(storageXR, []byte("apiVersion: aws.platform.example.org/v1alpha1\nkind: XObjectStorage\nmetadata: {name: assets}\nspec: {parameters: {region: eu-central-1, versioning: true}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		example, xr string
		// experiment is --experiment; without it the experiment runs only
		// because a step is not patch-and-transform.
		experiment bool
		wantNotes  []string
	}{
		"database":        {example: "database", xr: filepath.Join(corpus, "database", "xr.yaml"), experiment: true},
		"database-madeup": {example: "database", experiment: true},
		"network":         {example: "network", xr: filepath.Join(corpus, "network", "xr.yaml"), experiment: true},
		"network-madeup":  {example: "network", experiment: true},
		"storage": {example: "storage", xr: storageXR, wantNotes: []string{
			"spec.parameters.versioning: true → false drops resource versioning (BucketVersioning)",
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Options{
				Composition: filepath.Join(corpus, tc.example, "composition.yaml"), XRD: filepath.Join(corpus, tc.example, "xrd.yaml"),
				CRDs: []string{crds, corpus}, Groups: []string{"platform-team"}, Propagators: []string{"crossplane-system/crossplane"},
				Deleting: "delete",
			}
			var structural bytes.Buffer
			if err := Derive(o, nil, &structural); err != nil {
				t.Fatal(err)
			}
			o.Experiment = tc.experiment
			o.Render = RenderOptions{Functions: fns, Crossplane: xprender.NeedTools(t).Crossplane, CrossplaneBinary: xprender.NeedTools(t).CrossplaneCore, XR: tc.xr, Timeout: time.Minute}
			var experiment bytes.Buffer
			if err := Derive(o, nil, &experiment); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(experiment.String(), "derived by experiment") {
				t.Fatalf("the derivation did not render:\n%s", experiment.String())
			}
			for _, n := range tc.wantNotes {
				if !strings.Contains(experiment.String(), n) {
					t.Errorf("no note %q in\n%s", n, experiment.String())
				}
			}
			s, e := fixture.SortedPolicy(t, structural.Bytes()), fixture.SortedPolicy(t, experiment.Bytes())
			if diff := cmp.Diff(s.Spec, e.Spec); diff != "" {
				t.Errorf("the experiment's policy differs from the structural one (-structural +experiment):\n%s\nexperiment:\n%s", diff, experiment.String())
			}
		})
	}
}

// TestDeriveResourceGraph derives a policy from a kro
// ResourceGraphDefinition: the file's kind decides how it is read.
func TestDeriveResourceGraph(t *testing.T) {
	var out bytes.Buffer
	err := Derive(Options{Composition: filepath.Join(crds, "kro-webapp.yaml"), CRDs: []string{crds}, Groups: []string{"platform-team"}}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: AllowancePolicy", "kausality.io/derived-from: webapp", "for: {apiGroup: example.com, apiVersion: v1alpha1, kind: WebApp}", "- trigger: spec.replicas"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "guessed") {
		t.Errorf("a kind was guessed:\n%s", out.String())
	}
}

func TestExperimentErrors(t *testing.T) {
	comp := filepath.Join(corpus, "database", "composition.yaml")
	cases := map[string]struct {
		o    Options
		want string
	}{
		"NoFunctions": {o: Options{Composition: comp, Experiment: true}, want: "--experiment renders the Composition and needs --functions"},
		"NoXRD":       {o: Options{Composition: comp, Experiment: true, Render: RenderOptions{Functions: "functions.yaml"}}, want: "derive by experiment needs the XR's schema"},
		"XRFileWithoutXR": {o: Options{Composition: comp, XRD: filepath.Join(corpus, "database", "xrd.yaml"), Experiment: true,
			Render: RenderOptions{Functions: "functions.yaml", XR: comp}}, want: "holds no XSQLInstance for Composition xsqlinstances"},
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

func TestDeriveErrors(t *testing.T) {
	comp := filepath.Join(corpus, "database", "composition.yaml")
	cases := map[string]struct {
		o    Options
		want string
	}{
		"BadServiceAccount": {o: Options{Composition: comp, ServiceAccounts: []string{"nobody"}}, want: `service account "nobody" is not namespace/name`},
		"BadDeleting":       {o: Options{Composition: comp, Deleting: "keep"}, want: `deleting "keep"`},
		"NoComposition":     {o: Options{Composition: filepath.Join(corpus, "database", "xrd.yaml")}, want: "holds no Composition"},
		"MissingFile":       {o: Options{Composition: "nope.yaml"}, want: "cannot open nope.yaml"},
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

// TestDeriveMode: --mode Audit writes a policy in Audit (how a team adopts
// Kausality on a running cluster: every policy in Audit gates and refuses
// nothing), Enforce writes no mode, and an unknown mode is refused.
func TestDeriveMode(t *testing.T) {
	comp := filepath.Join(corpus, "database", "composition.yaml")
	cases := map[string]struct {
		mode, want, not, err string
	}{
		"Audit":   {mode: "Audit", want: "mode: Audit"},
		"Enforce": {mode: "Enforce", not: "mode:"},
		"Unknown": {mode: "Dryrun", err: `mode "Dryrun" is not Enforce, Log or Audit`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := Derive(Options{Composition: comp, XRD: filepath.Join(corpus, "database", "xrd.yaml"), CRDs: []string{crds, corpus}, Groups: []string{"platform-team"}, Mode: tc.mode}, nil, &out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Derive(mode %s) = %v, want an error containing %q", tc.mode, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && !strings.Contains(out.String(), tc.want) {
				t.Errorf("no %q in\n%s", tc.want, out.String())
			}
			if tc.not != "" && strings.Contains(out.String(), tc.not) {
				t.Errorf("%q in\n%s", tc.not, out.String())
			}
		})
	}
}
