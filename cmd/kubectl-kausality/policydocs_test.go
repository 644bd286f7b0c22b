package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// writingPolicies is the page that is AllowancePolicy's field reference.
var writingPolicies = filepath.Join("..", "..", "docs", "WRITING-POLICIES.md")

// TestWritingPolicies keeps docs/WRITING-POLICIES.md true to the API: its
// example is examples/cluster/policies.yaml as the repository has it,
// every YAML block on it decodes strictly as an AllowancePolicy, its spec
// or a rule of it and compiles, and its field reference names every field
// of the spec and status of apis/v1alpha1 and no other.
func TestWritingPolicies(t *testing.T) {
	b, err := os.ReadFile(writingPolicies)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)

	var example bool
	for i, y := range yamlBlocks(page) {
		switch {
		case strings.Contains(y, "kind: AllowancePolicy"):
			if !example {
				example = true
				want, err := os.ReadFile(filepath.Join("..", "..", "examples", "cluster", "policies.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(want), y); diff != "" {
					t.Errorf("the page's example is not examples/cluster/policies.yaml: -file +page:\n%s", diff)
				}
			}
			var p v1alpha1.AllowancePolicy
			if err := yaml.UnmarshalStrict([]byte(y), &p); err != nil {
				t.Errorf("YAML block %d does not decode as an AllowancePolicy: %v\n%s", i, err, y)
				continue
			}
			if _, err := policy.Compile(&p); err != nil {
				t.Errorf("YAML block %d does not compile: %v", i, err)
			}
		default:
			if err := fragmentCompiles(y); err != nil {
				t.Errorf("YAML block %d: %v\n%s", i, err, y)
			}
		}
	}
	if !example {
		t.Error("the page lost its example AllowancePolicy")
	}

	documented := referenceFields(page)
	if len(documented) == 0 {
		t.Fatal("the page's field reference lists no fields")
	}
	var inAPI []string
	apiFields(reflect.TypeOf(v1alpha1.AllowancePolicySpec{}), "spec.", &inAPI)
	apiFields(reflect.TypeOf(v1alpha1.PolicyStatus{}), "status.", &inAPI)
	apiFields(reflect.TypeOf(v1alpha1.PolicyEntry{}), "policies[].", &inAPI)
	for _, f := range documented {
		if !slices.Contains(inAPI, f) {
			t.Errorf("the field reference names %s, which apis/v1alpha1 does not have", f)
		}
	}
	for _, f := range inAPI {
		if !slices.Contains(documented, f) {
			t.Errorf("the field reference does not document %s", f)
		}
	}
}

// yamlBlocks are the page's fenced yaml blocks, list-indented ones
// included, without their indentation.
func yamlBlocks(page string) []string {
	var out []string
	var cur []string
	indent, in := "", false
	for _, l := range strings.Split(page, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case !in && trimmed == "```yaml":
			in, indent, cur = true, l[:len(l)-len(trimmed)], nil
		case in && trimmed == "```":
			in = false
			out = append(out, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, strings.TrimPrefix(l, indent))
		}
	}
	return out
}

// fragmentCompiles decodes a YAML fragment strictly as part of an
// AllowancePolicy's spec, or else of one of its rules, and compiles the
// policy it makes.
func fragmentCompiles(y string) error {
	var spec v1alpha1.AllowancePolicySpec
	specErr := yaml.UnmarshalStrict([]byte(y), &spec)
	if specErr != nil {
		var r v1alpha1.Rule
		if err := yaml.UnmarshalStrict([]byte(y), &r); err != nil {
			return fmt.Errorf("decodes neither as part of an AllowancePolicy's spec (%w) nor as part of a rule (%w)", specErr, err)
		}
		if r.Trigger == "" {
			r.Trigger = "spec.parameters"
		}
		spec = v1alpha1.AllowancePolicySpec{Rules: []v1alpha1.Rule{r}}
	}
	spec.For = v1alpha1.ObjectKind{APIGroup: "example.org", Kind: "XExample"}
	p := &v1alpha1.AllowancePolicy{Spec: spec}
	p.SetName("fragment")
	_, err := policy.Compile(p)
	return err
}

// referenceBullet is a field of the page's field reference.
var referenceBullet = regexp.MustCompile("^- \\*\\*`([^`]+)`\\*\\*(?:, \\*\\*`([^`]+)`\\*\\*)?")

// referenceFields are the fields the section "Field reference" lists.
func referenceFields(page string) []string {
	_, section, _ := strings.Cut(page, "\n## Field reference\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, l := range strings.Split(section, "\n") {
		m := referenceBullet.FindStringSubmatch(l)
		for _, f := range m[min(len(m), 1):] {
			if f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

// apiFields are the JSON paths of t's fields, a list of objects written
// name[] and a list of scalars name; the fields of a policy entry are
// listed once, under policies[].
func apiFields(t reflect.Type, prefix string, out *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if opts == "inline" {
			apiFields(f.Type, prefix, out)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			*out = append(*out, prefix+name+"[]")
			if ft.Elem() == reflect.TypeOf(v1alpha1.PolicyEntry{}) || ft.Elem().PkgPath() != reflect.TypeOf(v1alpha1.PolicyEntry{}).PkgPath() {
				continue // entries are listed under policies[]; metav1 types are not ours
			}
			apiFields(ft.Elem(), prefix+name+"[].", out)
			continue
		}
		*out = append(*out, prefix+name)
		if ft.Kind() == reflect.Struct {
			apiFields(ft, prefix+name+".", out)
		}
	}
}
