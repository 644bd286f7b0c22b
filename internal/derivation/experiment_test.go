package derivation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

var xnetGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XNet"}

// composed is a rendered composed resource named name of kind VPC (or
// kind, when given as "Kind/name") with the given spec.
func composed(name string, spec map[string]any) *unstructured.Unstructured {
	kind := "VPC"
	if k, n, ok := strings.Cut(name, "/"); ok {
		kind, name = k, n
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": kind,
		"metadata": map[string]any{"generateName": "x-", "annotations": map[string]any{AnnotationCompositionResourceName: name}},
		"spec":     spec,
	}}
}

func fp(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1] //nolint:forcetypeassert // test table
	}
	return map[string]any{"forProvider": m}
}

func obs(field, change string, err error, objs ...*unstructured.Unstructured) Observation {
	return Observation{Perturbation: Perturbation{Field: field, Change: change}, Composed: objs, Err: err}
}

// TestFromExperiment turns hand-made renders into rules through Derive:
// the pure half of a render experiment.
func TestFromExperiment(t *testing.T) {
	base := []*unstructured.Unstructured{
		composed("vpc", fp("region", "eu", "cidrs", []any{"10.0.0.0/16"}, "tags", map[string]any{"Name": "a", "Cost": "c"})),
		composed("Subnet/subnet", fp("region", "eu")),
	}
	type rule struct {
		trigger string
		// mutations per target resource, "resource path [verbs]".
		mutations []string
	}
	cases := map[string]struct {
		obs []Observation
		// extra are baseline resources besides base.
		extra     []*unstructured.Unstructured
		want      []rule
		wantNotes []string
		wantKinds []string
		wantErr   string
	}{
		"ValueChangeIsMutate": {
			obs: []Observation{obs("spec.region", `"eu" → "eu-x"`, nil,
				composed("vpc", fp("region", "eu-x", "cidrs", []any{"10.0.0.0/16"}, "tags", map[string]any{"Name": "a", "Cost": "c"})),
				composed("Subnet/subnet", fp("region", "eu-x")))},
			want: []rule{{"spec.region", []string{"subnets spec.forProvider.region [Mutate]", "vpcs spec.forProvider.region [Mutate]"}}},
		},
		"RemovalIsInsertMutateDelete": {
			obs: []Observation{
				obs("spec.cost", `"c" → "c-x"`, nil,
					composed("vpc", fp("region", "eu", "cidrs", []any{"10.0.0.0/16"}, "tags", map[string]any{"Name": "a", "Cost": "c-x"})), base[1]),
				obs("spec.cost", "removed", nil,
					composed("vpc", fp("region", "eu", "cidrs", []any{"10.0.0.0/16"}, "tags", map[string]any{"Name": "a"})), base[1]),
			},
			want: []rule{{"spec.cost", []string{"vpcs spec.forProvider.tags.Cost [Insert Mutate Delete]"}}},
		},
		"ScalarListElementIsTheList": {
			obs: []Observation{obs("spec.cidrs", "first element changed", nil,
				composed("vpc", fp("region", "eu", "cidrs", []any{"10.0.0.0/16-x"}, "tags", map[string]any{"Name": "a", "Cost": "c"})), base[1])},
			want: []rule{{"spec.cidrs", []string{"vpcs spec.forProvider.cidrs [Mutate]"}}},
		},
		"FailedAndUnchangedAreNoted": {
			obs: []Observation{
				obs("spec.size", `"small" → "large"`, errors.New("map transform: no key large")),
				obs("spec.debug", "true → false", nil, base...),
			},
			wantNotes: []string{
				`spec.size: not perturbed ("small" → "large"): the render failed: map transform: no key large`,
				"spec.debug: not perturbed usefully: true → false changed no composed resource, so no rule",
			},
		},
		"AppearingAndVanishingResourcesAreNotedAndBounded": {
			obs: []Observation{
				obs("spec.versioning", "false → true", nil, append([]*unstructured.Unstructured{composed("Versioning/versioning", fp())}, base...)...),
				obs("spec.private", "true → false", nil, base[0]),
			},
			wantNotes: []string{
				"spec.versioning: false → true composes resource versioning (Versioning), which the baseline does not",
				"spec.private: true → false drops resource subnet (Subnet)",
			},
			wantKinds: []string{"subnets", "vpcs", "versionings"},
		},
		"MetadataChangeIsNoRule": {
			obs: []Observation{obs("spec.team", `"a" → "a-x"`, nil, func() *unstructured.Unstructured {
				u := base[0].DeepCopy()
				u.SetLabels(map[string]string{"team": "a-x"})
				return u
			}(), base[1])},
			wantNotes: []string{`spec.team: not perturbed usefully: "a" → "a-x" changed no composed resource, so no rule`},
		},
		"DataOfAKindWithoutSpecIsARule": {
			obs: []Observation{obs("spec.password", `"p" → "p-x"`, nil, append([]*unstructured.Unstructured{{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"password": "p-x"},
				"metadata": map[string]any{"annotations": map[string]any{AnnotationCompositionResourceName: "secret"}},
			}}}, base...)...)},
			extra: []*unstructured.Unstructured{{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"password": "p"},
				"metadata": map[string]any{"annotations": map[string]any{AnnotationCompositionResourceName: "secret"}},
			}}},
			want:      []rule{{"spec.password", []string{"secrets data.password [Mutate]"}}},
			wantKinds: []string{"secrets", "subnets", "vpcs"},
		},
		"NoResourceName": {
			obs:     []Observation{obs("spec.region", "x", nil, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}}})},
			wantErr: "ConfigMap cm has no metadata.annotations[crossplane.io/composition-resource-name]",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := FromExperiment(&Experiment{Name: "xnets", XR: xnetGVK, Baseline: append(slices.Clone(base), tc.extra...), Observations: tc.obs})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromExperiment: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, err := Derive(m, Options{XRSchema: &Schema{}})
			if err != nil {
				t.Fatal(err)
			}
			var got []rule
			for _, rl := range r.Policy.Spec.Rules {
				g := rule{trigger: rl.Trigger}
				for _, pe := range rl.Policies {
					for _, mb := range pe.Mutations {
						g.mutations = append(g.mutations, fmt.Sprintf("%s %s %v", pe.Target.Resource, mb.JSONPath, mb.Verbs))
					}
				}
				got = append(got, g)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(rule{})); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			for _, n := range tc.wantNotes {
				if !strings.Contains(strings.Join(r.Notes, "\n"), n) {
					t.Errorf("no note %q in\n%s", n, strings.Join(r.Notes, "\n"))
				}
			}
			if tc.wantKinds != nil {
				var kinds []string
				for _, pe := range r.Policy.Spec.Initializing.Policies {
					if pe.Relation == v1alpha1.RelationControllerChild {
						kinds = append(kinds, pe.Target.Resource)
					}
				}
				if diff := cmp.Diff(tc.wantKinds, kinds); diff != "" {
					t.Errorf("initializing kinds (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func schemaOf(t *testing.T, js string) *Schema {
	t.Helper()
	s := &Schema{}
	if err := json.Unmarshal([]byte(js), s); err != nil {
		t.Fatal(err)
	}
	return s
}

const xnetSchema = `{"type":"object","properties":{
  "spec":{"type":"object","required":["parameters"],"properties":{"parameters":{"type":"object","required":["region","size","subnets"],"properties":{
    "region":{"type":"string"},
    "size":{"type":"string","enum":["small","large"]},
    "storageGB":{"type":"integer","default":20},
    "public":{"type":"boolean"},
    "ids":{"type":"array","items":{"type":"string"}},
    "subnets":{"type":"array","minItems":2,"items":{"type":"object","properties":{"zone":{"type":"string","example":"eu-1a"}}}},
    "labels":{"type":"object","additionalProperties":{"type":"string"}}}}}},
  "status":{"type":"object","properties":{"vpcId":{"type":"string"}}}}}`

func TestBaselineAndPerturbations(t *testing.T) {
	s := schemaOf(t, xnetSchema)
	t.Run("MadeUp", func(t *testing.T) {
		got := Baseline(xnetGVK, s, nil)
		want := map[string]any{
			"apiVersion": "example.org/v1", "kind": "XNet", "metadata": map[string]any{"name": "example"},
			"spec": map[string]any{"parameters": map[string]any{
				"region": "example", "size": "small", "storageGB": int64(20), "public": true, "ids": []any{"example"},
				"subnets": []any{map[string]any{"zone": "eu-1a"}, map[string]any{"zone": "eu-1a"}}, "labels": map[string]any{},
			}},
			"status": map[string]any{"vpcId": "example"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Baseline (-want +got):\n%s", diff)
		}
	})
	t.Run("Given", func(t *testing.T) {
		xr := map[string]any{"apiVersion": "example.org/v1", "kind": "XNet", "metadata": map[string]any{"name": "n"},
			"spec": map[string]any{"parameters": map[string]any{"region": "eu", "size": "large", "subnets": []any{map[string]any{"zone": "a"}}}}}
		got := Baseline(xnetGVK, s, runtime.DeepCopyJSON(xr))
		want := runtime.DeepCopyJSON(xr)
		want["spec"].(map[string]any)["parameters"].(map[string]any)["storageGB"] = int64(20) //nolint:forcetypeassert // test
		want["status"] = map[string]any{"vpcId": "example"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Baseline (-want +got):\n%s", diff)
		}
		ps, notes := Perturbations(s, got)
		var changes []string
		for _, p := range ps {
			changes = append(changes, p.Field+": "+p.Change)
		}
		wantChanges := []string{
			`spec.parameters.ids: set to ["example"]`,
			`spec.parameters.public: set to true`,
			`spec.parameters.region: "eu" → "eu-x"`,
			`spec.parameters.size: "large" → "small"`,
			`spec.parameters.storageGB: 20 → 21`,
			`spec.parameters.subnets[0].zone: "a" → "a-x"`,
			`spec.parameters.subnets[0].zone: removed`,
		}
		if diff := cmp.Diff(wantChanges, changes); diff != "" {
			t.Errorf("Perturbations (-want +got):\n%s", diff)
		}
		wantNotes := []string{"spec.parameters.labels: not perturbed: an object without properties (a map or free-form object) has no leaf to change"}
		if diff := cmp.Diff(wantNotes, notes); diff != "" {
			t.Errorf("notes (-want +got):\n%s", diff)
		}
		if v := ps[2].XR["spec"].(map[string]any)["parameters"].(map[string]any)["region"]; v != "eu-x" { //nolint:forcetypeassert // test
			t.Errorf("perturbed region %v, want eu-x", v)
		}
		if v := got["spec"].(map[string]any)["parameters"].(map[string]any)["region"]; v != "eu" { //nolint:forcetypeassert // test
			t.Errorf("the baseline changed with its perturbation: region %v", v)
		}
	})
}

func TestChanged(t *testing.T) {
	cases := map[string]struct {
		s      *Schema
		v, out any
		ok     bool
	}{
		"String":      {&Schema{Type: "string"}, "a", "a-x", true},
		"Integer":     {&Schema{Type: "integer"}, int64(3), int64(4), true},
		"Number":      {&Schema{Type: "number"}, 1.5, 2.5, true},
		"Bool":        {&Schema{Type: "boolean"}, true, false, true},
		"Enum":        {&Schema{Type: "string", Enum: []any{"a", "b"}}, "a", "b", true},
		"EnumOfOne":   {&Schema{Type: "string", Enum: []any{"a"}}, "a", nil, false},
		"List":        {&Schema{Type: "array", Items: &Schema{Type: "integer"}}, []any{int64(1), int64(5)}, []any{int64(2), int64(5)}, true},
		"EmptyList":   {&Schema{Type: "array", Items: &Schema{Type: "string"}}, []any{}, []any{"example"}, true},
		"Unsupported": {&Schema{}, map[string]any{}, nil, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, ok := changed(tc.s, tc.v)
			if ok != tc.ok || !cmp.Equal(tc.out, out) {
				t.Errorf("changed(%v) = %v, %t, want %v, %t", tc.v, out, ok, tc.out, tc.ok)
			}
		})
	}
}

func TestOtherSteps(t *testing.T) {
	for name, want := range map[string][]string{"corpus/database": nil, "corpus/storage": {"filter-composed-resources", "automatically-detect-ready-composed-resources"}} {
		t.Run(name, func(t *testing.T) {
			c := readComposition(t, examples+"/"+name+"/composition.yaml")
			if diff := cmp.Diff(want, OtherSteps(c)); diff != "" {
				t.Errorf("OtherSteps (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBeside: the structural reading of a Composition's
// patch-and-transform steps adds what its render experiment did not see,
// never an edge twice, and drops its notes on the steps the experiment
// ran.
func TestBeside(t *testing.T) {
	c := &xpv1.Composition{}
	c.SetName("xnets")
	c.Spec.Pipeline = []xpv1.PipelineStep{{Step: "templates", FunctionRef: xpv1.FunctionReference{Name: "function-go-templating"}}}
	vpcE := &Template{Step: "render", Name: "vpc", GVK: xnetGVK}
	vpcS := &Template{Step: "pt", Name: "vpc", GVK: xnetGVK}
	subnetS := &Template{Step: "pt", Name: "subnet", GVK: xnetGVK}
	experiment := &Model{Name: "xnets", Templates: []*Template{vpcE},
		Flows: []Flow{{Template: vpcE, Type: flowExperiment, From: []string{"spec.cidrs"}, To: "spec.forProvider.cidrs"}},
		Notes: []string{"derived by experiment"}}
	structural := &Model{Name: "xnets", Templates: []*Template{vpcS, subnetS},
		Flows: []Flow{
			{Template: vpcS, Type: "FromCompositeFieldPath", From: []string{"spec.cidrs"}, To: "spec.forProvider.cidrs[0]"},
			{Template: vpcS, Type: "FromCompositeFieldPath", From: []string{"spec.region"}, To: "spec.forProvider.region"},
			{Template: subnetS, Type: "FromCompositeFieldPath", From: []string{"spec.zone"}, To: "spec.forProvider.zone"},
		},
		Notes: []string{unreadNote(c.Spec.Pipeline[0]), "status.vpcId → subnet: no rule"}}
	m := Beside(c, experiment, structural)
	var got []string
	for _, f := range m.Flows {
		got = append(got, fmt.Sprintf("%s %s %s %v → %s", f.Template.Step, f.Template.Name, f.Type, f.From, f.To))
	}
	want := []string{
		"render vpc Experiment [spec.cidrs] → spec.forProvider.cidrs",
		"render vpc FromCompositeFieldPath [spec.region] → spec.forProvider.region",
		"pt subnet FromCompositeFieldPath [spec.zone] → spec.forProvider.zone",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"derived by experiment", "status.vpcId → subnet: no rule"}, m.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if len(m.Templates) != 2 || m.Templates[1] != subnetS {
		t.Errorf("templates = %v, want the experiment's vpc and the structural subnet", m.Templates)
	}
}
