package plan

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kausalityInputGroup is the API group of function-kausality's Input: a
// pipeline step with it is a Kausality step, whatever the Function is
// called.
const kausalityInputGroup = "kausality.fn.crossplane.io"

// renderInputs are what `crossplane render` renders.
type renderInputs struct {
	xr, composition *unstructured.Unstructured
	observed        []*unstructured.Unstructured
	required        []*unstructured.Unstructured
}

// rendered is what it rendered: the XR, the composed resources of the full
// pipeline, those of the pipeline without its Kausality steps (wanted),
// and the function results.
type rendered struct {
	xr               *unstructured.Unstructured
	composed, wanted []*unstructured.Unstructured
	results          []*unstructured.Unstructured
	notes            []string
}

// render runs `crossplane render` twice: with the Composition as it is,
// and without its Kausality steps. The difference is what Kausality
// withholds; the function's own results say why.
func render(ctx context.Context, o Options, in renderInputs) (rendered, error) {
	dir, err := os.MkdirTemp("", "kausality-plan-")
	if err != nil {
		return rendered{}, errors.Wrap(err, "cannot make a temporary directory")
	}
	defer os.RemoveAll(dir) //nolint:errcheck // best effort
	full, err := renderOnce(ctx, o, dir, "full", in)
	if err != nil {
		return rendered{}, err
	}
	out := rendered{results: full.results}
	out.xr, out.composed = split(full.objects, in.xr)
	if out.xr == nil {
		return rendered{}, errors.Errorf("crossplane render printed no %s %s", in.xr.GetKind(), in.xr.GetName())
	}
	without, removed := withoutKausality(in.composition)
	if !removed {
		out.wanted = out.composed
		out.notes = append(out.notes, "the Composition has no function-kausality step: Kausality withholds nothing it composes")
		return out, nil
	}
	bare := in
	bare.composition = without
	w, err := renderOnce(ctx, o, dir, "without-kausality", bare)
	if err != nil {
		return rendered{}, errors.Wrap(err, "cannot render the Composition without its function-kausality steps")
	}
	_, out.wanted = split(w.objects, in.xr)
	return out, nil
}

// withoutKausality is the Composition with its Kausality steps removed,
// and whether it had any.
func withoutKausality(c *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	out := c.DeepCopy()
	steps, _, _ := unstructured.NestedSlice(out.Object, "spec", "pipeline")
	kept := make([]any, 0, len(steps))
	for _, s := range steps {
		step, _ := s.(map[string]any)
		apiVersion, _, _ := unstructured.NestedString(step, "input", "apiVersion")
		if strings.HasPrefix(apiVersion, kausalityInputGroup+"/") {
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

type renderOutput struct {
	objects, results []*unstructured.Unstructured
}

// renderOnce writes the inputs under dir/name and runs the render.
func renderOnce(ctx context.Context, o Options, dir, name string, in renderInputs) (renderOutput, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return renderOutput{}, errors.Wrapf(err, "cannot make %s", d)
	}
	xr, comp := filepath.Join(d, "xr.yaml"), filepath.Join(d, "composition.yaml")
	if err := writeYAML(xr, in.xr); err != nil {
		return renderOutput{}, err
	}
	if err := writeYAML(comp, in.composition); err != nil {
		return renderOutput{}, err
	}
	args := []string{"render", xr, comp, o.Functions, "--include-full-xr", "--include-function-results"}
	if len(in.observed) > 0 {
		p := filepath.Join(d, "observed.yaml")
		if err := writeYAML(p, in.observed...); err != nil {
			return renderOutput{}, err
		}
		args = append(args, "--observed-resources", p)
	}
	if len(in.required) > 0 {
		p := filepath.Join(d, "required.yaml")
		if err := writeYAML(p, in.required...); err != nil {
			return renderOutput{}, err
		}
		args = append(args, "--required-resources", p)
	}
	if o.CrossplaneBinary != "" {
		args = append(args, "--crossplane-binary", o.CrossplaneBinary)
	}
	if o.Timeout > 0 {
		args = append(args, "--timeout", o.Timeout.String())
	}
	cmd := exec.CommandContext(ctx, o.Crossplane, args...) //nolint:gosec // the user names the crossplane CLI
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return renderOutput{}, errors.Wrapf(err, "%s %s: %s", o.Crossplane, strings.Join(args, " "), strings.TrimSpace(stderr.String()))
	}
	objs, err := decodeAll(stdout.Bytes())
	if err != nil {
		return renderOutput{}, errors.Wrap(err, "cannot parse the output of crossplane render")
	}
	var out renderOutput
	for _, u := range objs {
		switch {
		case u.GetAPIVersion() == "render.crossplane.io/v1beta1" && u.GetKind() == "Result":
			out.results = append(out.results, u)
		case strings.HasPrefix(u.GetAPIVersion(), "render.crossplane.io/"):
			// Context and the like: not a resource.
		default:
			out.objects = append(out.objects, u)
		}
	}
	return out, nil
}

// split tells the rendered XR (xr's kind and name) from the composed
// resources.
func split(objs []*unstructured.Unstructured, xr *unstructured.Unstructured) (*unstructured.Unstructured, []*unstructured.Unstructured) {
	var composite *unstructured.Unstructured
	var composed []*unstructured.Unstructured
	for _, u := range objs {
		if composite == nil && u.GroupVersionKind() == xr.GroupVersionKind() && u.GetName() == xr.GetName() {
			composite = u
			continue
		}
		composed = append(composed, u)
	}
	return composite, composed
}

func writeYAML(path string, objs ...*unstructured.Unstructured) error {
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

// decodeAll splits a YAML stream into objects.
func decodeAll(raw []byte) ([]*unstructured.Unstructured, error) {
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
