package check

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/derive"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	xprender "github.com/kausality-io/kausality-crossplane/test/render"
)

const corpus = "../../../examples/corpus"

// crds names the managed kinds the corpus composes.
const crds = "../../../internal/derivation/testdata"

// providerCRDs are the provider CRDs the scenario suite serves.
const providerCRDs = "../../../test/recorder/package/crds"

// TestDeriveThenCheck derives each corpus policy from its files and checks
// the Composition against it: a derived policy has no gap. The
// hand-written policies withhold changes on purpose, so check fails on
// them (internal/derivation's goldens explain each gap).
func TestDeriveThenCheck(t *testing.T) {
	for _, c := range []string{"cluster", "database", "network", "platform", "storage"} {
		t.Run(c, func(t *testing.T) {
			comp := filepath.Join(corpus, c, "composition.yaml")
			var out bytes.Buffer
			err := derive.Derive(derive.Options{
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
			if err := Files(Options{Compositions: []string{comp}, Policies: []string{derived}, CRDs: []string{crds, corpus}}, nil, &rep); err != nil {
				t.Errorf("check of the derived policy: %v\n%s", err, rep.String())
			}
			rep.Reset()
			err = Files(Options{Compositions: []string{comp}, Policies: []string{filepath.Join(corpus, c, "policy.yaml")}, CRDs: []string{crds, corpus}}, nil, &rep)
			if !errors.Is(err, ErrGaps) || !strings.Contains(rep.String(), "Uncovered") {
				t.Errorf("check of the hand-written policy: %v, want gaps\n%s", err, rep.String())
			}
		})
	}
}

// TestExperimentSequencedComposition derives the policy of a Composition
// whose function-sequencer holds the addons and the node group back until
// the cluster is ready: the experiment renders with each render's
// resources fed back as observed and ready until the pipeline composes
// nothing new, as a creation on a cluster does, so the derived policy
// names every kind the pipeline composes in the end, and the node count
// reaches the node group.
func TestExperimentSequencedComposition(t *testing.T) {
	fns := xprender.NeedFunctions(t)
	ex := filepath.Join("..", "..", "..", "examples", "corpus", "eks")
	comp, xrd := filepath.Join(ex, "composition.yaml"), filepath.Join(ex, "xrd.yaml")
	ro := derive.RenderOptions{Functions: fns, Crossplane: xprender.NeedTools(t).Crossplane, CrossplaneBinary: xprender.NeedTools(t).CrossplaneCore, Timeout: time.Minute}
	var out bytes.Buffer
	err := derive.Derive(derive.Options{
		Composition: comp, XRD: xrd, CRDs: []string{crds, providerCRDs}, Groups: []string{"platform-team"}, Deleting: "delete", Render: ro,
	}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "guessed") {
		t.Errorf("derive guessed a plural although --crds names every kind:\n%s", out.String())
	}
	p := fixture.SortedPolicy(t, out.Bytes())
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
	co := Options{Compositions: []string{comp}, Policies: []string{derived}, CRDs: []string{crds, providerCRDs}, XRD: xrd, Render: ro}
	if err := Files(co, nil, &rep); err != nil {
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
	fns := xprender.NeedFunctions(t)
	ex := filepath.Join("..", "..", "..", "examples", "corpus", "access-keys")
	xrd := filepath.Join(ex, "xrd.yaml")
	ro := derive.RenderOptions{Functions: fns, Crossplane: xprender.NeedTools(t).Crossplane, CrossplaneBinary: xprender.NeedTools(t).CrossplaneCore, Timeout: time.Minute}
	var out bytes.Buffer
	err := derive.Derive(derive.Options{
		Composition: filepath.Join(ex, "composition.yaml"), XRD: xrd, CRDs: []string{providerCRDs},
		Groups: []string{"platform-team"}, Deleting: "delete", Render: ro,
	}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	var gt bytes.Buffer
	if err := derive.Derive(derive.Options{
		Composition: filepath.Join(ex, "cases", "2-create-go-templating", "composition.yaml"), XRD: xrd, CRDs: []string{providerCRDs},
		Groups: []string{"platform-team"}, Deleting: "delete", Render: ro,
	}, nil, &gt); err != nil {
		t.Fatal(err)
	}
	// The template composes the Secret at once: derived from it, the
	// policy names Secrets (test/e2e runs the XR under that policy too).
	if !slices.ContainsFunc(fixture.SortedPolicy(t, gt.Bytes()).Spec.Initializing.Policies, func(pe v1alpha1.PolicyEntry) bool { return pe.Target.Resource == "secrets" }) {
		t.Errorf("the policy derived from the go-templating Composition does not let its Secret be created:\n%s", gt.String())
	}
	p := fixture.SortedPolicy(t, out.Bytes())
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
		if err := Files(Options{Compositions: []string{comp}, Policies: []string{derived}, CRDs: []string{providerCRDs}, XRD: xrd, Render: ro}, nil, &rep); err != nil {
			t.Errorf("check of %s against the derived policy: %v\n%s", comp, err, rep.String())
		}
	}
	// The policy derived from the go-templating Composition checks clean
	// against that Composition too.
	gtPolicy := filepath.Join(t.TempDir(), "policy-go-templating.yaml")
	if err := os.WriteFile(gtPolicy, gt.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	gtComp := filepath.Join(ex, "cases", "2-create-go-templating", "composition.yaml")
	if err := Files(Options{Compositions: []string{gtComp}, Policies: []string{gtPolicy}, CRDs: []string{providerCRDs}, XRD: xrd, Render: ro}, nil, &bytes.Buffer{}); err != nil {
		t.Errorf("check of %s against the policy derived from it: %v", gtComp, err)
	}
	// The get-started App's templated YAML Composition against the policy
	// derived from its patch-and-transform one.
	app := filepath.Join("..", "..", "..", "examples", "corpus", "app")
	var rep bytes.Buffer
	if err := Files(Options{Compositions: []string{filepath.Join(app, "cases", "5-create-go-templating", "composition.yaml")}, Policies: []string{filepath.Join(app, "policies.yaml")},
		XRD: filepath.Join(app, "xrd.yaml"), Render: ro}, nil, &rep); err != nil {
		t.Errorf("check of the App's templated YAML Composition: %v\n%s", err, rep.String())
	}
	// And against the policy derived from the templated Composition itself.
	appComp := filepath.Join(app, "cases", "5-create-go-templating", "composition.yaml")
	var appOut bytes.Buffer
	if err := derive.Derive(derive.Options{Composition: appComp, XRD: filepath.Join(app, "xrd.yaml"), Groups: []string{"platform-team"}, Deleting: "delete", Render: ro}, nil, &appOut); err != nil {
		t.Fatal(err)
	}
	appPolicy := filepath.Join(t.TempDir(), "app-policy.yaml")
	if err := os.WriteFile(appPolicy, appOut.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rep.Reset()
	if err := Files(Options{Compositions: []string{appComp}, Policies: []string{appPolicy}, XRD: filepath.Join(app, "xrd.yaml"), Render: ro}, nil, &rep); err != nil {
		t.Errorf("check of the App's templated YAML Composition against the policy derived from it: %v\n%s\n%s", err, rep.String(), appOut.String())
	}
	// Without Functions a Composition that only go-templating composes
	// cannot be checked: check says what it needs rather than report
	// every rule unused.
	err = Files(Options{Compositions: []string{filepath.Join(ex, "cases", "2-create-go-templating", "composition.yaml")}, Policies: []string{derived}, CRDs: []string{providerCRDs}}, nil, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "useraccesskeys-go-templating") || !strings.Contains(err.Error(), "--functions") {
		t.Errorf("check without --functions: %v, want an error naming the Composition and --functions", err)
	}
}
