// Package render runs the examples through the real `crossplane render`: the
// crossplane CLI with the real Crossplane core binary (`--crossplane-binary`),
// against function-kausality and the published functions the examples
// compose with, started locally on free ports in the Development runtime,
// exactly as a user would test a Composition.
package render

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Root returns the repository root, found from the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "examples")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (a folder with go.mod and examples/)")
		}
		dir = parent
	}
}

// A Case is one rendering of an example: a folder under
// examples/<example>/cases/ holding xr.yaml and optionally observed.yaml,
// composition.yaml (else the example's), required.yaml (required
// resources besides the example's policies.yaml) and environment.json (the
// environment in the pipeline's context).
type Case struct {
	Example string
	Name    string
	Dir     string
	// XR and Observed, when set, replace the case's xr.yaml and
	// observed.yaml: a roll-out renders one case step by step.
	XR, Observed string
}

// ID is example/case.
func (c Case) ID() string { return c.Example + "/" + c.Name }

// Cases lists every case of every example, sorted.
func Cases(root string) ([]Case, error) {
	// The examples written here, and the corpus written after public
	// compositions, whose public pipelines have render cases too.
	var dirs []string
	for _, pattern := range [][]string{{"examples", "*"}, {"examples", "corpus", "*"}} {
		d, err := filepath.Glob(filepath.Join(append(append([]string{root}, pattern...), "cases", "*", "xr.yaml")...))
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, d...)
	}
	out := make([]Case, 0, len(dirs))
	for _, x := range dirs {
		d := filepath.Dir(x)
		out = append(out, Case{Example: filepath.Base(filepath.Dir(filepath.Dir(d))), Name: filepath.Base(d), Dir: d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

// Functions is the example's Functions file (functions.yaml).
func (c Case) Functions() string {
	return filepath.Join(filepath.Dir(filepath.Dir(c.Dir)), "functions.yaml")
}

// Args are the `crossplane render` arguments for a case, with the Functions
// file functions.
func (c Case) Args(t Tools, functions string) []string {
	ex := filepath.Dir(filepath.Dir(c.Dir))
	comp := filepath.Join(ex, "composition.yaml")
	if exists(filepath.Join(c.Dir, "composition.yaml")) {
		comp = filepath.Join(c.Dir, "composition.yaml")
	}
	xr := filepath.Join(c.Dir, "xr.yaml")
	if c.XR != "" {
		xr = c.XR
	}
	args := []string{"render", xr, comp, functions,
		"--crossplane-binary", t.CrossplaneCore, "--include-function-results", "--include-full-xr",
		"--required-resources", filepath.Join(ex, "policies.yaml")}
	if exists(filepath.Join(ex, "xrd.yaml")) {
		args = append(args, "--xrd", filepath.Join(ex, "xrd.yaml"))
	}
	if exists(filepath.Join(c.Dir, "required.yaml")) {
		args = append(args, "--required-resources", filepath.Join(c.Dir, "required.yaml"))
	}
	if exists(filepath.Join(c.Dir, "environment.json")) {
		// What function-environment-configs would put in the pipeline's
		// context on a cluster.
		args = append(args, "--context-files", "apiextensions.crossplane.io/environment="+filepath.Join(c.Dir, "environment.json"))
	}
	switch {
	case c.Observed != "":
		args = append(args, "--observed-resources", c.Observed)
	case exists(filepath.Join(c.Dir, "observed.yaml")):
		args = append(args, "--observed-resources", filepath.Join(c.Dir, "observed.yaml"))
	}
	return args
}

// Render runs `crossplane render` for the case against the functions f
// runs and returns its output in Normalize's order, so golden files, the
// demo and `make render` agree.
func (c Case) Render(ctx context.Context, t Tools, f *Functions) ([]byte, error) {
	functions, err := f.Rewrite(c.Functions())
	if err != nil {
		return nil, err
	}
	args := c.Args(t, functions)
	cmd := exec.CommandContext(ctx, t.Crossplane, args...) //nolint:gosec // our own tool
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.Wrapf(err, "crossplane %s: %s", strings.Join(args, " "), stderr.String())
	}
	return Normalize(out), nil
}

// Normalize orders render output deterministically: the XR first, then the
// other documents sorted by their text. Crossplane emits some results (for
// example "Composed resource ... is not yet ready") in map order, which
// would make golden files flap.
func Normalize(out []byte) []byte {
	var docs []string
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		d := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(doc)), "---"))
		if d != "" {
			docs = append(docs, d)
		}
	}
	if len(docs) > 1 {
		sort.Strings(docs[1:])
	}
	return []byte("---\n" + strings.Join(docs, "\n---\n") + "\n")
}

// Objects splits render output into objects.
func Objects(out []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for i, doc := range bytes.Split(out, []byte("\n---")) {
		doc = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))
		if len(doc) == 0 {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, errors.Wrapf(err, "cannot parse document %d of render output", i)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Sprint is a short form of an object for messages.
func Sprint(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}
