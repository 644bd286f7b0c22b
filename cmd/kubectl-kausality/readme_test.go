package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
)

// TestREADME keeps the README true to what the tests run: its policy is
// the one TestCorpus applies on real core and its pipeline step decodes as
// the function's Input. Its commands and its trace output are
// TestDocsCommands'.
func TestREADME(t *testing.T) {
	var policy, step bool
	for _, b := range blocks(t, "README.md") {
		switch {
		case strings.Contains(b.text, "kind: AllowancePolicy"):
			policy = true
			want, err := os.ReadFile(filepath.Join(repoRoot, "examples", "corpus", "database", "policy.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(withoutComments(string(want)), b.text); diff != "" {
				t.Errorf("the README's AllowancePolicy is not examples/corpus/database/policy.yaml: -file +README:\n%s", diff)
			}
		case strings.Contains(b.text, "step: kausality"):
			step = true
			var steps []xpv1.PipelineStep
			if err := yaml.UnmarshalStrict([]byte(b.text), &steps); err != nil || len(steps) != 1 || steps[0].Input == nil {
				t.Fatalf("the README's pipeline step does not decode as a Composition's step (%v):\n%s", err, b.text)
			}
			var in v1beta1.Input
			if err := yaml.UnmarshalStrict(steps[0].Input.Raw, &in); err != nil || in.Kind != "Input" || in.APIVersion != "kausality.fn.crossplane.io/v1beta1" {
				t.Errorf("the README's step input does not decode as the function's Input (%v):\n%s", err, b.text)
			}
		}
	}
	if !policy || !step {
		t.Fatalf("the README lost a block this test keeps true: policy %t, step %t", policy, step)
	}
}

// withoutComments is a YAML file without its leading comment lines.
func withoutComments(s string) string {
	for strings.HasPrefix(s, "#") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return s
}
