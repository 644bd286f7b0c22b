package render

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// cloud stands in for Crossplane applying a render's composed resources
// and a provider reconciling them, so a roll-out can be rendered step by
// step with the observed state advanced in between: the provider writes
// a resource to the cloud only through its gate, and reports it Synced
// and Ready at its generation.
type cloud struct {
	observed map[string]*unstructured.Unstructured // by composition resource name
	sizes    map[string]int64
}

// advance applies the render output out and returns the composition
// resource names whose cloud resource was created or changed.
func (c *cloud) advance(t *testing.T, out []byte) []string {
	t.Helper()
	var wrote []string
	r := parse(t, out)
	for name, o := range r.composed {
		o = integers(t, o)
		if o.GetNamespace() == "" {
			o.SetNamespace(r.xr.GetNamespace())
		}
		gen := int64(1)
		if prev, ok := c.observed[name]; ok {
			gen = prev.GetGeneration()
			if !cmp.Equal(prev.Object["spec"], o.Object["spec"]) {
				gen++
			}
		}
		o.SetGeneration(gen)
		mp, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "managementPolicies")
		size := desiredSize(o)
		was, exists := c.sizes[name]
		switch {
		case !exists && (slices.Contains(mp, "Create") || slices.Contains(mp, "*")):
			c.sizes[name] = size
			wrote = append(wrote, name)
		case exists && was != size && (slices.Contains(mp, "Update") || slices.Contains(mp, "*")):
			c.sizes[name] = size
			wrote = append(wrote, name)
		}
		_, created := c.sizes[name]
		conds := []any{map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-11-22T12:00:00Z", "observedGeneration": gen}}
		if created {
			conds = append(conds, map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-22T12:00:00Z", "observedGeneration": gen})
		}
		o.Object["status"] = map[string]any{"conditions": conds}
		c.observed[name] = o
	}
	slices.Sort(wrote)
	return wrote
}

// integers is a copy of o with whole numbers as int64, as the API server
// serves them; parsed YAML holds float64s.
func integers(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}

// desiredSize reads a pool's size; parsed YAML holds numbers as float64.
func desiredSize(o *unstructured.Unstructured) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "forProvider", "scalingConfig", "desiredSize")
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}

// write stores the observed state as crossplane render reads it.
func (c *cloud) write(t *testing.T, path string) {
	t.Helper()
	names := make([]string, 0, len(c.observed))
	for n := range c.observed {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		y, err := yaml.Marshal(c.observed[n].Object)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		if i == 0 {
			// In the first document: crossplane render reads a leading
			// comment as an empty object.
			b.WriteString("# The pools as the creation roll-out leaves them (test/render's\n# TestRollOutSteps writes this file with -update).\n")
		}
		b.Write(y)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (c *cloud) load(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // test data
	if err != nil {
		t.Fatalf("cannot read %s (TestRollOutSteps -update writes it): %v", path, err)
	}
	objs, err := Objects(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o = integers(t, o)
		name := o.GetAnnotations()["crossplane.io/composition-resource-name"]
		c.observed[name] = o
		c.sizes[name] = desiredSize(o)
	}
}

// xrCondition is the XR's condition of type typ as status/reason/message.
func xrCondition(t *testing.T, out []byte, typ string) string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(parse(t, out).xr.Object, "status", "conditions")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprintf("%v/%v", m["status"], m["reason"])
		}
	}
	return ""
}

// TestRollOutSteps renders the roll-out of examples/cluster/cases/4-rollout
// step by step: creating the six pools, then Alice's resize. Both are paced
// by DESIGN §6's exponential batches (1, 1, 2, 2 of six), each batch only
// once the pools before it applied the change and are Ready; each step's
// output is a golden file.
func TestRollOutSteps(t *testing.T) {
	dir := filepath.Join(root, "examples", "cluster", "cases", "4-rollout")
	tmp := t.TempDir()
	if d := os.Getenv("ROLLOUT_KEEP"); d != "" {
		tmp = d
	}
	step := func(name, xr string, c *cloud) ([]byte, []string) {
		t.Helper()
		obs := filepath.Join(tmp, name+"-observed.yaml")
		c.write(t, obs) // nothing observed yet: an empty file, not the case's
		out := renderCase(t, Case{Example: "cluster", Name: name, Dir: dir, XR: xr, Observed: obs})
		return out, c.advance(t, out)
	}

	// Creation: the cluster at once, the pools in batches.
	created := &cloud{observed: map[string]*unstructured.Unstructured{}, sizes: map[string]int64{}}
	var batches [][]string
	for i := range 6 {
		_, wrote := step(fmt.Sprintf("create-%d", i), filepath.Join(root, "examples", "cluster", "cases", "1-create", "xr.yaml"), created)
		if len(wrote) > 0 {
			batches = append(batches, wrote)
		}
	}
	if want := [][]string{{"pool-1"}, {"pool-2"}, {"pool-3", "pool-4"}, {"pool-5", "pool-6"}}; !cmp.Equal(batches, want) {
		t.Fatalf("creation batches = %v, want %v", batches, want)
	}
	observed := filepath.Join(dir, "observed.yaml")
	if *update {
		created.write(t, observed)
	}

	// Alice's resize, from the committed observed state.
	c := &cloud{observed: map[string]*unstructured.Unstructured{}, sizes: map[string]int64{}}
	c.load(t, observed)
	if !cmp.Equal(c.sizes, created.sizes) {
		t.Fatalf("%s is not what the creation roll-out leaves (%v, want %v): run make golden", observed, c.sizes, created.sizes)
	}
	batches = nil
	var propagated []string
	for i := 1; i <= 5; i++ {
		out, wrote := step(fmt.Sprintf("4-rollout-step-%d", i), "", c)
		compareGolden(t, filepath.Join("testdata", "cluster", fmt.Sprintf("4-rollout-step-%d.yaml", i)), out)
		batches = append(batches, wrote)
		propagated = append(propagated, xrCondition(t, out, "Propagated"))
		for name, o := range c.observed {
			as, err := allowance.Parse(o.GetAnnotations()[v1alpha1.AnnotationAllowances])
			if err != nil {
				t.Fatalf("step %d: %s: %v", i, name, err)
			}
			size := desiredSize(o)
			pending := slices.ContainsFunc(as, func(a allowance.Allowance) bool { return a.IsPending() })
			if strings.HasPrefix(name, "pool-") && size == 2 && !pending {
				t.Errorf("step %d: %s is held at 2 without a pending allowance: %v", i, name, as)
			}
		}
	}
	if want := [][]string{{"pool-1"}, {"pool-2"}, {"pool-3", "pool-4"}, {"pool-5", "pool-6"}, nil}; !cmp.Equal(batches, want) {
		t.Errorf("resize batches = %v, want %v", batches, want)
	}
	if want := []string{"False/PropagationHeld", "False/PropagationHeld", "False/PropagationHeld", "True/AllPropagated", "True/AllPropagated"}; !cmp.Equal(propagated, want) {
		t.Errorf("Propagated by step = %v, want %v", propagated, want)
	}
}
