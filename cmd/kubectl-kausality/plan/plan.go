// Package plan is `kubectl kausality plan -f FILE`: what a change to a
// Claim or XR would do before anything is applied. It dry-runs the change
// through admission as the user, works out the XR the change would reach
// (for a Claim: the live XR with the Claim's spec synced onto it and the
// allowances admission would carry over), renders that XR's Composition
// with the real `crossplane render` against the live composed resources,
// and hands the result to internal/preview to compare.
package plan

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/preview"
)

// DefaultCrossplaneUser is the user Crossplane core writes as in a
// default install: a Claim's change reaches its XR as this user, and
// admission checks it against the Claim's allowances.
const DefaultCrossplaneUser = "system:serviceaccount:crossplane-system:crossplane"

// Options are what a plan needs.
type Options struct {
	// Client writes the dry run as the user and reads the rest.
	Client client.Client
	Mapper meta.RESTMapper
	// Namespace is the namespace of a namespaced object whose file names
	// none.
	Namespace string
	// File holds the changed Claim or XR.
	File string
	// Functions is the Functions file `crossplane render` runs the
	// pipeline with; Crossplane is the crossplane CLI and CrossplaneBinary,
	// when set, the Crossplane core binary it renders with instead of
	// Docker.
	Functions, Crossplane, CrossplaneBinary string
	// CrossplaneUser is who Crossplane core writes as.
	CrossplaneUser string
	// Warnings collects the API server's warnings; the client's REST
	// config must report to it.
	Warnings *Warnings
	Now      func() time.Time
	// Timeout bounds each render.
	Timeout time.Duration
}

// Warnings collects the warnings the API server sends, as the client's
// rest.WarningHandlerWithContext: admission's warnings come only in
// response headers.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns and forgets the warnings so far.
func (w *Warnings) take() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// Build works out the plan of the change in o.File.
func Build(ctx context.Context, o Options) (preview.Plan, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CrossplaneUser == "" {
		o.CrossplaneUser = DefaultCrossplaneUser
	}
	if o.Crossplane == "" {
		o.Crossplane = "crossplane"
	}
	obj, err := readObject(o.File)
	if err != nil {
		return preview.Plan{}, err
	}
	dr, err := dryRun(ctx, o, obj)
	if err != nil {
		return preview.Plan{}, err
	}
	in := preview.Inputs{Admission: dr.admission}
	if !dr.admission.Allowed {
		return preview.Compare(in), nil
	}
	cluster, err := readCluster(ctx, o)
	if err != nil {
		return preview.Plan{}, err
	}
	in.Notes = append(in.Notes, cluster.notes...)

	xr := dr.result
	if policy.IsClaim(dr.result.Object) {
		var sim *preview.Admission
		var notes []string
		xr, sim, notes, err = syncClaim(ctx, o, dr.live, dr.result, cluster.policies)
		if err != nil {
			return preview.Plan{}, err
		}
		in.Notes = append(in.Notes, notes...)
		in.Admission.Composite = sim
		if xr == nil || !sim.Allowed {
			return preview.Compare(in), nil
		}
	}
	observed, notes, err := observedOf(ctx, o.Client, xr)
	if err != nil {
		return preview.Plan{}, err
	}
	in.Notes = append(in.Notes, notes...)
	in.Observed = observed
	required, err := cluster.requiredFor(ctx, o, xr)
	if err != nil {
		return preview.Plan{}, err
	}
	comp, err := compositionOf(ctx, o.Client, xr)
	if err != nil {
		return preview.Plan{}, err
	}
	r, err := render(ctx, o, renderInputs{xr: xr, composition: comp, observed: observed, required: required})
	if err != nil {
		return preview.Plan{}, err
	}
	in.XR, in.Rendered, in.Wanted, in.Results = r.xr, r.composed, r.wanted, r.results
	in.Notes = append(in.Notes, r.notes...)
	return preview.Compare(in), nil
}

// readObject reads the one Claim or XR in file.
func readObject(file string) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(file) //nolint:gosec // the user names the file to plan
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read %s", file)
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, errors.Wrapf(err, "cannot parse %s (one Claim or XR)", file)
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
		return nil, errors.Errorf("%s: the object needs apiVersion, kind and metadata.name", file)
	}
	return u, nil
}
