package plan

import (
	"context"
	"os"
	"path/filepath"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/crossplanerender"
)

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
	out := rendered{results: full.Results}
	out.xr, out.composed = split(full.Objects, in.xr)
	if out.xr == nil {
		return rendered{}, errors.Errorf("crossplane render printed no %s %s", in.xr.GetKind(), in.xr.GetName())
	}
	without, removed := crossplanerender.WithoutKausality(in.composition)
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
	_, out.wanted = split(w.Objects, in.xr)
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

// renderOnce renders in under dir/name, with the full XR and the
// function results.
func renderOnce(ctx context.Context, o Options, dir, name string, in renderInputs) (crossplanerender.Output, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return crossplanerender.Output{}, errors.Wrapf(err, "cannot make %s", d)
	}
	return crossplanerender.Run(ctx, crossplanerender.Options{Crossplane: o.Crossplane, CrossplaneBinary: o.CrossplaneBinary, Functions: o.Functions, Timeout: o.Timeout},
		d, crossplanerender.Inputs{XR: in.xr, Composition: in.composition, Observed: in.observed, Required: in.required, Full: true})
}
