package policy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	xprender "github.com/kausality-io/kausality-crossplane/test/render"
)

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
	fns := startFunctions(t)
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
			o := DeriveOptions{
				Composition: filepath.Join(corpus, tc.example, "composition.yaml"), XRD: filepath.Join(corpus, tc.example, "xrd.yaml"),
				CRDs: []string{crds, corpus}, Groups: []string{"platform-team"}, Propagators: []string{"crossplane-system/crossplane"},
				Deleting: "delete",
			}
			var structural bytes.Buffer
			if err := Derive(o, nil, &structural); err != nil {
				t.Fatal(err)
			}
			o.Experiment = tc.experiment
			o.Render = RenderOptions{Functions: fns, Crossplane: tools(t).Crossplane, CrossplaneBinary: tools(t).CrossplaneCore, XR: tc.xr, Timeout: time.Minute}
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
			s, e := normalized(t, structural.Bytes()), normalized(t, experiment.Bytes())
			if diff := cmp.Diff(s.Spec, e.Spec); diff != "" {
				t.Errorf("the experiment's policy differs from the structural one (-structural +experiment):\n%s\nexperiment:\n%s", diff, experiment.String())
			}
		})
	}
}

// normalized is the policy with its rules' entries and mutation bounds,
// and its phase bounds, sorted.
func normalized(t *testing.T, b []byte) *v1alpha1.AllowancePolicy {
	t.Helper()
	p := &v1alpha1.AllowancePolicy{}
	if err := yaml.Unmarshal(b, p); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	sortEntries := func(es []v1alpha1.PolicyEntry) {
		for i := range es {
			slices.SortFunc(es[i].Mutations, func(a, b v1alpha1.MutationBound) int { return strings.Compare(a.JSONPath, b.JSONPath) })
		}
		slices.SortStableFunc(es, func(a, b v1alpha1.PolicyEntry) int {
			return strings.Compare(fmt.Sprint(a.Target, a.Relation), fmt.Sprint(b.Target, b.Relation))
		})
	}
	for i := range p.Spec.Rules {
		sortEntries(p.Spec.Rules[i].Policies)
	}
	if p.Spec.Initializing != nil {
		sortEntries(p.Spec.Initializing.Policies)
	}
	if p.Spec.Deleting != nil {
		sortEntries(p.Spec.Deleting.Policies)
	}
	return p
}

// TestDeriveResourceGraph derives a policy from a kro
// ResourceGraphDefinition: the file's kind decides how it is read.
func TestDeriveResourceGraph(t *testing.T) {
	var out bytes.Buffer
	err := Derive(DeriveOptions{Composition: filepath.Join(crds, "kro-webapp.yaml"), CRDs: []string{crds}, Groups: []string{"platform-team"}}, nil, &out)
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
		o    DeriveOptions
		want string
	}{
		"NoFunctions": {o: DeriveOptions{Composition: comp, Experiment: true}, want: "--experiment renders the Composition and needs --functions"},
		"NoXRD":       {o: DeriveOptions{Composition: comp, Experiment: true, Render: RenderOptions{Functions: "functions.yaml"}}, want: "derive by experiment needs the XR's schema"},
		"XRFileWithoutXR": {o: DeriveOptions{Composition: comp, XRD: filepath.Join(corpus, "database", "xrd.yaml"), Experiment: true,
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

func tools(t *testing.T) xprender.Tools {
	t.Helper()
	root, err := xprender.Root()
	if err != nil {
		t.Fatal(err)
	}
	tl, err := xprender.FindTools(root)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// startFunctions starts the corpus's functions on free addresses and
// returns a Functions file naming them, as crossplane render takes it.
func startFunctions(t *testing.T) string {
	t.Helper()
	root, err := xprender.Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fns, err := xprender.StartFunctions(ctx, root, t.TempDir(), tools(t), xprender.FunctionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fns.Stop)
	p, err := fns.File(xprender.FunctionPatchTransform, xprender.FunctionAutoReady, xprender.FunctionCelFilter, xprender.FunctionGoTemplating, xprender.FunctionSequencer)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExperimentSequencedComposition derives the policy of a Composition
// whose function-sequencer holds the addons and the node group back until
// the cluster is ready: the experiment renders with each render's
// resources fed back as observed and ready until the pipeline composes
// nothing new, as a creation on a cluster does, so the derived policy
// names every kind the pipeline composes in the end, and the node count
// reaches the node group.
func TestExperimentSequencedComposition(t *testing.T) {
	fns := startFunctions(t)
	ex := filepath.Join("..", "..", "..", "examples", "eks")
	comp, xrd := filepath.Join(ex, "composition.yaml"), filepath.Join(ex, "xrd.yaml")
	ro := RenderOptions{Functions: fns, Crossplane: tools(t).Crossplane, CrossplaneBinary: tools(t).CrossplaneCore, Timeout: time.Minute}
	var out bytes.Buffer
	err := Derive(DeriveOptions{
		Composition: comp, XRD: xrd, CRDs: []string{crds, providerCRDs}, Groups: []string{"platform-team"}, Deleting: "delete", Render: ro,
	}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "guessed") {
		t.Errorf("derive guessed a plural although --crds names every kind:\n%s", out.String())
	}
	p := normalized(t, out.Bytes())
	created := map[string]bool{}
	for _, pe := range p.Spec.Initializing.Policies {
		created[pe.Target.Resource] = true
	}
	for _, r := range []string{"roles", "clusters", "nodegroups", "addons", "accessentries"} {
		if !created[r] {
			t.Errorf("the initializing bound does not let %s be created:\n%s", r, out.String())
		}
	}
	var reached []string
	for _, r := range p.Spec.Rules {
		if r.Trigger != "spec.parameters.nodes.count" {
			continue
		}
		for _, pe := range r.Policies {
			for _, m := range pe.Mutations {
				reached = append(reached, pe.Target.Resource+" "+m.JSONPath)
			}
		}
	}
	if !slices.Contains(reached, "nodegroups spec.initProvider.scalingConfig.desiredSize") {
		t.Errorf("spec.parameters.nodes.count reaches %v, want the node group's desired size:\n%s", reached, out.String())
	}
	t.Log(out.String())

	// check reads the Composition by the same experiment: what derive
	// wrote checks clean.
	derived := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(derived, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var rep bytes.Buffer
	co := CheckOptions{Compositions: []string{comp}, Policies: []string{derived}, CRDs: []string{crds, providerCRDs}, XRD: xrd, Render: ro}
	if err := CheckFiles(co, nil, &rep); err != nil {
		t.Errorf("check of the derived policy: %v\n%s", err, rep.String())
	}
}

// TestExperimentChecksEveryPipeline derives by experiment the policy of a
// Composition that is not all patch-and-transform and checks it, by the
// same experiment, against every Composition of the XR: the guide's
// patch-and-transform and go-templating Compositions of the connection
// details example compose the same resources, so one derived policy checks
// clean against both.
func TestExperimentChecksEveryPipeline(t *testing.T) {
	fns := startFunctions(t)
	ex := filepath.Join("..", "..", "..", "examples", "access-keys")
	xrd := filepath.Join(ex, "xrd.yaml")
	ro := RenderOptions{Functions: fns, Crossplane: tools(t).Crossplane, CrossplaneBinary: tools(t).CrossplaneCore, Timeout: time.Minute}
	var out bytes.Buffer
	err := Derive(DeriveOptions{
		Composition: filepath.Join(ex, "composition.yaml"), XRD: xrd, CRDs: []string{providerCRDs},
		Groups: []string{"platform-team"}, Deleting: "delete", Render: ro,
	}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	var gt bytes.Buffer
	if err := Derive(DeriveOptions{
		Composition: filepath.Join(ex, "cases", "2-create-go-templating", "composition.yaml"), XRD: xrd, CRDs: []string{providerCRDs},
		Groups: []string{"platform-team"}, Deleting: "delete", Render: ro,
	}, nil, &gt); err != nil {
		t.Fatal(err)
	}
	// The template composes the Secret at once: derived from it, the
	// policy names Secrets (test/e2e runs the XR under that policy too).
	if !slices.ContainsFunc(normalized(t, gt.Bytes()).Spec.Initializing.Policies, func(pe v1alpha1.PolicyEntry) bool { return pe.Target.Resource == "secrets" }) {
		t.Errorf("the policy derived from the go-templating Composition does not let its Secret be created:\n%s", gt.String())
	}
	p := normalized(t, out.Bytes())
	created := map[string]bool{}
	for _, pe := range p.Spec.Initializing.Policies {
		created[pe.Target.Resource] = true
	}
	// The connection Secret is composed only once the keys publish
	// connection details, which no render has: it is not named.
	for _, r := range []string{"users", "accesskeys"} {
		if !created[r] {
			t.Errorf("the initializing bound does not let %s be created:\n%s", r, out.String())
		}
	}
	derived := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(derived, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, comp := range []string{filepath.Join(ex, "composition.yaml"), filepath.Join(ex, "cases", "2-create-go-templating", "composition.yaml")} {
		var rep bytes.Buffer
		if err := CheckFiles(CheckOptions{Compositions: []string{comp}, Policies: []string{derived}, CRDs: []string{providerCRDs}, XRD: xrd, Render: ro}, nil, &rep); err != nil {
			t.Errorf("check of %s against the derived policy: %v\n%s", comp, err, rep.String())
		}
	}
	// The get-started App's templated YAML Composition against the policy
	// derived from its patch-and-transform one.
	app := filepath.Join("..", "..", "..", "examples", "app")
	var rep bytes.Buffer
	if err := CheckFiles(CheckOptions{Compositions: []string{filepath.Join(app, "cases", "5-create-go-templating", "composition.yaml")}, Policies: []string{filepath.Join(app, "policies.yaml")},
		XRD: filepath.Join(app, "xrd.yaml"), Render: ro}, nil, &rep); err != nil {
		t.Errorf("check of the App's templated YAML Composition: %v\n%s", err, rep.String())
	}
	// Without Functions a Composition that only go-templating composes
	// cannot be checked: check says what it needs rather than report
	// every rule unused.
	err = CheckFiles(CheckOptions{Compositions: []string{filepath.Join(ex, "cases", "2-create-go-templating", "composition.yaml")}, Policies: []string{derived}, CRDs: []string{providerCRDs}}, nil, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "useraccesskeys-go-templating") || !strings.Contains(err.Error(), "--functions") {
		t.Errorf("check without --functions: %v, want an error naming the Composition and --functions", err)
	}
}
