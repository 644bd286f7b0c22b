package plan

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/internal/preview"
)

// TestPrintFormats: plan prints the Plan's stable JSON form as JSON or
// YAML (what CI reads), and refuses wide and dot by naming what it takes.
func TestPrintFormats(t *testing.T) {
	p := preview.Plan{
		Admission: preview.AdmissionPlan{Allowed: true, Warnings: []string{"a <warning> & more"}},
		Composite: &preview.Composite{APIVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "shop", Withheld: "no rule"},
		Resources: []preview.Resource{{Resource: "rds", APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "shop-rds", Action: preview.ActionUpdate, Gated: true, Changes: []preview.Change{
			{Path: "spec.forProvider.instanceClass", Verb: "Mutate", From: "db.t3.small", To: "db.t3.large", Outcome: preview.Withheld, Reason: "no rule"},
		}}},
		Summary: preview.Summary{Withheld: 1},
	}
	// The JSON plan printed before the printer package served it: an
	// indented json.Encoder. CI parses it, so it must not change.
	var before bytes.Buffer
	e := json.NewEncoder(&before)
	e.SetIndent("", "  ")
	if err := e.Encode(p); err != nil {
		t.Fatal(err)
	}
	type want struct {
		out string
		err string
	}
	cases := map[string]struct {
		reason string
		format printer.Format
		want   want
	}{
		"JSON": {reason: "JSON is the stable form, as before.", format: printer.FormatJSON, want: want{out: before.String()}},
		"YAML": {reason: "YAML is the same document.", format: printer.FormatYAML, want: want{out: func() string {
			b, err := yaml.JSONToYAML(before.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}()}},
		"Wide": {reason: "A plan has no columns to add.", format: printer.FormatWide, want: want{err: `output format "wide" does not apply to this command: use one of default, json, yaml`}},
		"Dot":  {reason: "A plan is no tree.", format: printer.FormatDot, want: want{err: `output format "dot" does not apply to this command: use one of default, json, yaml`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := Print(&out, p, tc.format)
			if tc.want.err != "" {
				if err == nil || err.Error() != tc.want.err {
					t.Errorf("%s\nPrint(...) = %v, want %q", tc.reason, err, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nPrint(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.out, out.String()); diff != "" {
				t.Errorf("%s\nPrint(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
