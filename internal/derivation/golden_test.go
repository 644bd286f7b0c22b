package derivation

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml")

// examples is the repository's examples directory.
const examples = "../../examples"

// compositions are every Composition under examples/, by golden name.
func compositions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(examples, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "composition.yaml" {
			return err
		}
		rel, _ := filepath.Rel(examples, filepath.Dir(path))
		out[strings.ReplaceAll(rel, string(filepath.Separator), "-")] = path
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readComposition(t *testing.T, path string) *xpv1.Composition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &xpv1.Composition{}
	if err := yaml.Unmarshal(b, c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// readObjects reads every YAML document of the files.
func readObjects(t *testing.T, paths ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, doc := range bytes.Split(b, []byte("\n---")) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(u.Object) > 0 {
				out = append(out, u)
			}
		}
	}
	return out
}

func readPolicies(t *testing.T, path string) []v1alpha1.AllowancePolicy {
	t.Helper()
	var out []v1alpha1.AllowancePolicy
	for _, u := range readObjects(t, path) {
		var p v1alpha1.AllowancePolicy
		b, _ := yaml.Marshal(u.Object)
		if err := yaml.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, p)
	}
	return out
}

// allXRDs are the XRDs of every example, so that a composed XR (the
// platform's network and database) resolves as a composite, and the CRDs
// of the managed resources they compose. A corpus entry that composes an
// XR of a configuration it does not hold keeps that XR's definition
// beside its own (lb-controller's podidentity-xrd.yaml).
func allXRDs(t *testing.T) *Definitions {
	t.Helper()
	ps, _ := filepath.Glob(filepath.Join(examples, "*", "xrd.yaml"))
	more, _ := filepath.Glob(filepath.Join(examples, "corpus", "*", "*xrd.yaml"))
	d, err := NewDefinitions(readObjects(t, append(append(ps, more...), filepath.Join("testdata", "crds.yaml"))...))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// corpusSubjects are the subjects the hand-written corpus policies name.
var corpusSubjects = []v1alpha1.Subject{
	{Kind: v1alpha1.SubjectGroup, Name: "platform-team", MayInitiate: true},
	{Kind: v1alpha1.SubjectServiceAccount, Namespace: "crossplane-system", Name: "crossplane"},
}

func deriveExample(t *testing.T, path string, defs *Definitions, deleting Deleting) *Result {
	t.Helper()
	m, err := Read(readComposition(t, path))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Derive(m, Options{
		Subjects: corpusSubjects, Deleting: deleting, DeletionProtection: true,
		Resolver: defs, XRSchema: defs.Schema(m.XR),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	fixture.Golden(t, filepath.Join("testdata", name+".golden.yaml"), got, *update)
}
