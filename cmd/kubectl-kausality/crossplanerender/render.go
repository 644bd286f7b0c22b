// Package crossplanerender runs `crossplane render` as a process, as users run it,
// for the commands that predict what a pipeline composes: plan renders a
// changed XR with and without function-kausality, policy derive renders an
// XR once per perturbed field. It owns the invocation, the files it
// writes, the parsing of what render prints and the one way to take
// Kausality's steps out of a Composition.
package crossplanerender

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// KausalityInputGroup is the API group of function-kausality's Input: a
// pipeline step with it is a Kausality step, whatever the Function is
// called.
const KausalityInputGroup = "kausality.fn.crossplane.io"

// Options say how to run crossplane render.
type Options struct {
	// Crossplane is the crossplane CLI; default "crossplane" on PATH.
	Crossplane string
	// CrossplaneBinary, when set, is the Crossplane core binary render
	// runs the XR reconciler with instead of Docker.
	CrossplaneBinary string
	// Functions is the Functions file (or directory) render runs the
	// pipeline with, as `crossplane render` takes it.
	Functions string
	// Timeout bounds one render; zero is render's default.
	Timeout time.Duration
}

// Inputs are what one render renders.
type Inputs struct {
	XR, Composition *unstructured.Unstructured
	// Observed and Required go to --observed-resources and
	// --required-resources when any are given.
	Observed, Required []*unstructured.Unstructured
	// Full adds --include-full-xr and --include-function-results.
	Full bool
}

// Output is what render printed: the objects (the XR and the composed
// resources) and the function results.
type Output struct {
	Objects, Results []*unstructured.Unstructured
}

// Run writes in under dir (which must exist and be the caller's alone)
// and runs crossplane render on it.
func Run(ctx context.Context, o Options, dir string, in Inputs) (Output, error) {
	xr, comp := filepath.Join(dir, "xr.yaml"), filepath.Join(dir, "composition.yaml")
	if err := WriteYAML(xr, in.XR); err != nil {
		return Output{}, err
	}
	if err := WriteYAML(comp, in.Composition); err != nil {
		return Output{}, err
	}
	args := []string{"render", xr, comp, o.Functions}
	if in.Full {
		args = append(args, "--include-full-xr", "--include-function-results")
	}
	for _, f := range []struct {
		flag, file string
		objs       []*unstructured.Unstructured
	}{{"--observed-resources", "observed.yaml", in.Observed}, {"--required-resources", "required.yaml", in.Required}} {
		if len(f.objs) == 0 {
			continue
		}
		p := filepath.Join(dir, f.file)
		if err := WriteYAML(p, f.objs...); err != nil {
			return Output{}, err
		}
		args = append(args, f.flag, p)
	}
	if o.CrossplaneBinary != "" {
		args = append(args, "--crossplane-binary", o.CrossplaneBinary)
	}
	if o.Timeout > 0 {
		args = append(args, "--timeout", o.Timeout.String())
	}
	cli := o.Crossplane
	if cli == "" {
		cli = "crossplane"
	}
	cmd := exec.CommandContext(ctx, cli, args...) //nolint:gosec // the user names the crossplane CLI
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// The temporary files are gone by the time anyone reads this:
		// say what failed, not where it was written.
		return Output{}, errors.Errorf("crossplane render of %s %s: %v: %s", in.XR.GetKind(), in.XR.GetName(), err, strings.TrimSpace(stderr.String()))
	}
	objs, err := Decode(stdout.Bytes())
	if err != nil {
		return Output{}, errors.Wrap(err, "cannot parse the output of crossplane render")
	}
	var out Output
	for _, u := range objs {
		switch {
		case u.GetAPIVersion() == "render.crossplane.io/v1beta1" && u.GetKind() == "Result":
			out.Results = append(out.Results, u)
		case strings.HasPrefix(u.GetAPIVersion(), "render.crossplane.io/"):
			// Context and the like: not a resource.
		default:
			out.Objects = append(out.Objects, u)
		}
	}
	return out, nil
}

// WithoutKausality is the Composition c without its Kausality steps, and
// whether it had any: rendered so, it shows what the pipeline would
// compose if Kausality withheld nothing.
func WithoutKausality(c *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	out := c.DeepCopy()
	steps, _, _ := unstructured.NestedSlice(out.Object, "spec", "pipeline")
	kept := make([]any, 0, len(steps))
	for _, s := range steps {
		step, _ := s.(map[string]any)
		apiVersion, _, _ := unstructured.NestedString(step, "input", "apiVersion")
		if strings.HasPrefix(apiVersion, KausalityInputGroup+"/") {
			continue
		}
		kept = append(kept, s)
	}
	if len(kept) == len(steps) {
		return out, false
	}
	_ = unstructured.SetNestedSlice(out.Object, kept, "spec", "pipeline")
	return out, true
}

// WriteYAML writes objs to path as one YAML stream.
func WriteYAML(path string, objs ...*unstructured.Unstructured) error {
	var b bytes.Buffer
	for _, u := range objs {
		y, err := yaml.Marshal(u.Object)
		if err != nil {
			return errors.Wrapf(err, "cannot encode %s %s for %s", u.GetKind(), u.GetName(), path)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return errors.Wrapf(os.WriteFile(path, b.Bytes(), 0o600), "cannot write %s", path)
}

// Decode splits a YAML (or JSON) stream into objects, skipping empty
// documents.
func Decode(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := kyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		m := map[string]any{}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}
