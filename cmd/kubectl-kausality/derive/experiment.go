package derive

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/crossplanerender"
	"github.com/kausality-io/kausality-crossplane/internal/derivation"
)

// RenderOptions say how a render experiment runs `crossplane render`.
type RenderOptions struct {
	// Functions is the Functions file (or directory) crossplane render
	// runs the pipeline with.
	Functions string
	// Crossplane is the crossplane CLI; default "crossplane".
	Crossplane string
	// CrossplaneBinary, when set, is a Crossplane core binary crossplane
	// render uses instead of Docker.
	CrossplaneBinary string
	// XR is a file holding the baseline XR; empty makes one up from the
	// XRD's schema.
	XR string
	// Timeout bounds each render.
	Timeout time.Duration
	// Parallel renders run at once; default 4. Each render starts its own
	// Crossplane core, and the functions serve them all.
	Parallel int
}

// experiment renders c with a baseline XR and once per perturbed field of
// the XR's schema, and reads the differences as a Model.
func experiment(ctx context.Context, o RenderOptions, c *xpv1.Composition, s *derivation.Schema) (*derivation.Model, error) {
	at := "Composition " + c.GetName()
	gv, err := schemaGV(c)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.Errorf("%s: derive by experiment needs the XR's schema: pass --xrd (or a cluster that serves the XRD)", at)
	}
	var xr map[string]any
	if o.XR != "" {
		objs, err := ReadObjects(o.XR)
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			if u.GroupVersionKind() == gv {
				xr = u.Object
				break
			}
		}
		if xr == nil {
			return nil, errors.Errorf("%s holds no %s for %s", o.XR, gv.Kind, at)
		}
	}
	dir, err := os.MkdirTemp("", "kausality-derive-")
	if err != nil {
		return nil, errors.Wrap(err, "cannot make a temporary directory")
	}
	defer os.RemoveAll(dir) //nolint:errcheck // best effort
	comp, err := withoutKausality(c)
	if err != nil {
		return nil, err
	}
	base := derivation.Baseline(gv, s, xr)
	baseline, passes, err := settle(ctx, o, dir, "baseline", comp, base, nil)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: cannot render the baseline XR", at)
	}
	perts, notes := derivation.Perturbations(s, base)
	if passes > derivation.MaxPasses {
		notes = append(notes, fmt.Sprintf("the baseline did not settle: after %d renders, each with the last one's resources fed back as observed and ready, the pipeline still composed something new; resources it composes later are not in this policy", derivation.MaxPasses))
	}
	e := &derivation.Experiment{Name: c.GetName(), XR: gv, Baseline: baseline, Notes: notes}
	e.Notes = append([]string{fmt.Sprintf("derived by experiment: %d renders with one XR field changed each, compared with a baseline render; a rule says what a change did from this baseline, and a transform or condition may act differently for other values", len(perts))}, e.Notes...)
	e.Observations = make([]derivation.Observation, len(perts))
	parallel := o.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, p := range perts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			objs, _, err := settle(ctx, o, dir, fmt.Sprintf("perturbation-%d", i), comp, p.XR, baseline)
			e.Observations[i] = derivation.Observation{Perturbation: p, Composed: objs, Err: err}
		}()
	}
	wg.Wait()
	return derivation.FromExperiment(e)
}

// schemaGV is the composite kind c composes.
func schemaGV(c *xpv1.Composition) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(c.Spec.CompositeTypeRef.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, errors.Wrapf(err, "Composition %s: spec.compositeTypeRef.apiVersion", c.GetName())
	}
	return gv.WithKind(c.Spec.CompositeTypeRef.Kind), nil
}

// withoutKausality is c as unstructured without Kausality's steps: they
// compose nothing, and would withhold the very changes the experiment
// looks for.
func withoutKausality(c *xpv1.Composition) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot convert Composition %s", c.GetName())
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(xpv1.SchemeGroupVersion.String())
	u.SetKind(xpv1.CompositionKind)
	u, _ = crossplanerender.WithoutKausality(u)
	return u, nil
}

// settle renders xr, first with the resources from observed as
// derive.Observed makes them, then again with each render's own fed back,
// until a render composes exactly what the one before it did: what a
// creation on a cluster composes in the end, including what a pipeline
// holds back until earlier resources are ready. It returns the last
// render's desired composed resources and how many renders it took
// (derive.MaxPasses+1 when it never settled).
func settle(ctx context.Context, o RenderOptions, dir, name string, comp *unstructured.Unstructured, xr map[string]any, observed []*unstructured.Unstructured) ([]*unstructured.Unstructured, int, error) {
	last := observed
	for pass := 1; pass <= derivation.MaxPasses; pass++ {
		composed, err := renderXR(ctx, o, dir, fmt.Sprintf("%s-%d", name, pass), comp, xr, derivation.Observed(xr, last))
		if err != nil {
			return nil, pass, err
		}
		if pass > 1 && derivation.Settled(last, composed) || pass == 1 && observed != nil && derivation.Settled(observed, composed) {
			return composed, pass, nil
		}
		last = composed
	}
	return last, derivation.MaxPasses + 1, nil
}

// renderXR runs crossplane render for xr with the observed composed
// resources under dir/name and returns the desired composed resources it
// prints.
func renderXR(ctx context.Context, o RenderOptions, dir, name string, comp *unstructured.Unstructured, xr map[string]any, observed []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, errors.Wrapf(err, "cannot make %s", d)
	}
	out, err := crossplanerender.Run(ctx, crossplanerender.Options{Crossplane: o.Crossplane, CrossplaneBinary: o.CrossplaneBinary, Functions: o.Functions, Timeout: o.Timeout},
		d, crossplanerender.Inputs{XR: &unstructured.Unstructured{Object: xr}, Composition: comp, Observed: observed})
	if err != nil {
		return nil, err
	}
	var composed []*unstructured.Unstructured
	for _, u := range out.Objects {
		// The XR carries no composition resource name.
		if _, ok := u.GetAnnotations()[derivation.AnnotationCompositionResourceName]; ok {
			composed = append(composed, u)
		}
	}
	return composed, nil
}

// ModelOf reads c structurally, or by experiment (with the structural
// reading of its patch-and-transform steps beside it, derivation.Beside):
// when experimentAlways says so, or when a step is not
// patch-and-transform and render names the Functions to render it with.
// Without Functions such a step is noted in the policy, not rendered:
// rendering needs the functions running, which only the user can arrange.
// A Composition that only such steps compose is an error then
// (derivation.NeedsRender).
func ModelOf(ctx context.Context, render RenderOptions, experimentAlways bool, c *xpv1.Composition, schemaOf func(schema.GroupVersionKind) *derivation.Schema) (*derivation.Model, error) {
	other := derivation.OtherSteps(c)
	if !experimentAlways && (len(other) == 0 || render.Functions == "") {
		m, err := derivation.Read(c)
		if err != nil {
			return nil, err
		}
		return m, derivation.NeedsRender(c, m)
	}
	if render.Functions == "" {
		return nil, errors.Errorf("Composition %s: --experiment renders the Composition and needs --functions", c.GetName())
	}
	gvk, err := schemaGV(c)
	if err != nil {
		return nil, err
	}
	e, err := experiment(ctx, render, c, schemaOf(gvk))
	if err != nil {
		return nil, err
	}
	structural, err := derivation.Read(c)
	if err != nil {
		return nil, err
	}
	return derivation.Beside(c, e, structural), nil
}
