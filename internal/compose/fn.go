// Package compose is the Kausality composition function's body: for one
// RunFunctionRequest it decides what of the desired composed resources an
// allowance covers, withholds the rest, paces propagation and upgrade
// roll-outs, stamps allowances and traces onto each composed resource and
// sets its gate (docs/DESIGN.md §3 to §6). It reads nothing but the
// request, so every stage is a table test without a server; fn/ serves it
// over gRPC.
package compose

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/memo"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// Function is the Kausality composition function.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log      logging.Logger
	compiled *compiled
	now      func() time.Time
	metrics  *metrics.Function // nil: counts nothing
}

// Options are what a Function may be given beyond its logger; the zero
// value counts nothing and reads the wall clock.
type Options struct {
	// Metrics count what the function decides; nil counts nothing, so
	// tests and renders need no registry.
	Metrics *metrics.Function
	// Now is the clock hops and gate expiry are read from; nil is
	// time.Now. crossplane render pins it so golden files do not drift.
	Now func() time.Time
}

// NewFunction returns a function that logs to log.
func NewFunction(log logging.Logger, o Options) *Function {
	f := &Function{log: log, compiled: newCompiled(), now: o.Now, metrics: o.Metrics}
	if f.now == nil {
		f.now = time.Now
	}
	return f
}

// compiled is the CEL the function compiled, kept across runs: every run of
// every XR of a Composition compiles the same policies, propagation plan
// and roll-outs, and compiling costs more than deciding. The Function owns
// it; each run reads through it.
type compiled struct {
	policies *policy.Cache
	plans    *memo.Cache[*plan]
	rollouts *rollout.Rules
}

func newCompiled() *compiled {
	return &compiled{policies: policy.NewCache(), plans: memo.New[*plan](maxPlans), rollouts: rollout.NewRules()}
}

// RunFunction gates the desired composed resources of one XR.
//
// A panic while deciding one XR fails that XR's run, not the server: gRPC
// does not recover a handler's panic, so the process would exit and every
// XR's composition would wait for a restart. The run answers a Fatal
// result instead, on which Crossplane applies nothing of it (fail closed).
func (f *Function) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (rsp *fnv1.RunFunctionResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			xr := "the XR"
			if s := req.GetObserved().GetComposite().GetResource(); s != nil {
				xr = ref(s.AsMap())
			}
			f.log.Info("Recovered from a panic: nothing of this run is applied", "tag", req.GetMeta().GetTag(), "xr", xr, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			rsp, err = response.To(req, response.DefaultTTL), nil
			response.Fatal(rsp, errors.Errorf(errFmtPanic, xr, p))
		}
	}()
	return f.runFunction(ctx, req)
}

func (f *Function) runFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	log := f.log.WithValues("tag", req.GetMeta().GetTag())

	in := &v1beta1.Input{}
	if err := request.GetInput(req, in); err != nil {
		response.Fatal(rsp, errors.Wrap(err, errGetFunctionInput))
		return rsp, nil
	}
	cfg, err := configFrom(in, f.compiled.plans)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}

	oxr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		rsp.Requirements = requirements(nil)
		response.Fatal(rsp, errors.Wrap(err, errGetObservedCompositeResource))
		return rsp, nil
	}
	rsp.Requirements = requirements(oxr.Resource.Object)
	inputRequirements(rsp.Requirements, cfg.inputs)
	blockerRequirements(rsp.Requirements, cfg.plan, oxr.Resource.Object)
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, errGetObservedComposedResources))
		return rsp, nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, errGetDesiredComposedResources))
		return rsp, nil
	}

	// The SDK decodes numbers as float64; Kubernetes objects hold int64.
	// Of composed resources only metadata.generation is read as an
	// integer through unstructured's getters. Their status is read for
	// its observed generation only (allowance.ObservedGeneration), which
	// takes either form; specs are compared and hashed by numeric value
	// (mutation.Equal, Record) and encoded back as numbers either way. So
	// the rest is left as decoded: a real provider reports dozens of
	// status fields.
	integers(oxr.Resource.Object)
	for _, o := range observed {
		composedIntegers(o.Resource.Object)
	}
	for _, d := range desired {
		composedIntegers(d.Resource.Object)
	}

	now := f.now().UTC()
	run := &run{compiled: f.compiled, metrics: f.metrics, loaded: loaded{cfg: cfg, now: now, stampedAt: allowance.Timestamp(now), xr: &unstructured.Unstructured{Object: oxr.Resource.Object}}}
	loadProblems := run.load(req, observed)
	run.rolloutRequirements(rsp.Requirements)

	// What would change in each resource first, then propagation
	// control's batch of those changes, then each resource's verdict:
	// whether a member of a collection counts as updated depends on every
	// member's decision, so the batch cannot come before them.
	out, items, decided := run.decideAll(observed, desired)
	decided.problems = slices.Concat(loadProblems, decided.problems)
	batch, paced := run.pace(items)
	t := newTally(run)
	for i, it := range items {
		var p pacing
		if batch != nil {
			p = batch[i]
		}
		v := run.verdictOf(it, p)
		if it.ok {
			n := resource.Name(it.resName)
			out[n] = answer{DesiredComposed: desired[n], body: v.ch.body(), stamp: v.stamp}
		}
		t.add(run, &v)
	}
	found := gather(decided, paced, t)
	run.leaveAsStored(out, found.untouched, found.rideable)

	if err := setDesired(rsp, req, out); err != nil {
		response.Fatal(rsp, errors.Wrap(err, errSetDesiredComposedResources))
		return rsp, nil
	}
	run.report(rsp, &found)
	run.record(&found, t.counts)
	log.Debug("Gated composed resources", "xr", ref(run.xr.Object), "generation", run.xr.GetGeneration(),
		"allowances", len(run.allowances), "resources", len(out), "withheld", len(found.withheld))
	return rsp, nil
}

// decideAll decides every composed resource, in name order: one the
// pipeline still wants becomes an item to pace and stamp; one it dropped
// is deleted or kept, as observed, in out. It returns what deciding
// found, resource by resource.
func (r *run) decideAll(observed map[resource.Name]resource.ObservedComposed, desired map[resource.Name]*resource.DesiredComposed) (map[resource.Name]answer, []*item, findings) {
	names := make([]string, 0, len(desired)+len(observed))
	for n := range desired {
		names = append(names, string(n))
	}
	for n := range observed {
		if _, ok := desired[n]; !ok {
			names = append(names, string(n))
		}
	}
	sort.Strings(names)

	out := make(map[resource.Name]answer, len(desired))
	items := make([]*item, 0, len(desired))
	var f findings
	for _, n := range names {
		name := resource.Name(n)
		var obs map[string]any
		if o, ok := observed[name]; ok {
			obs = o.Resource.Object
		}
		d, ok := desired[name]
		if ok {
			it := r.decide(n, obs, d.Resource.Object)
			f.problems = append(f.problems, it.problems...)
			f.withheld = append(f.withheld, it.ch.reports...)
			items = append(items, it)
			continue
		}
		del := r.deleted(n, obs)
		f.problems = append(f.problems, del.problems...)
		if del.withheld != nil {
			f.withheld = append(f.withheld, *del.withheld)
		}
		if del.kept != nil {
			// As ready as it is: a kept resource the pipeline no longer
			// reports on must not hold the XR unready.
			ready := resource.ReadyUnspecified
			if policy.ConditionTrue(obs, "Ready") {
				ready = resource.ReadyTrue
			}
			out[name] = answer{DesiredComposed: &resource.DesiredComposed{Resource: del.kept, Ready: ready}}
		}
	}
	return out, items, f
}

// integers turns every whole float64 in obj into int64, in place, so that
// metadata.generation and friends read as Kubernetes objects do.
func integers(obj map[string]any) {
	for k, v := range obj {
		if n, ok := integer(v); ok {
			obj[k] = n
		}
	}
}

// composedIntegers is integers for what the function reads of a composed
// resource as an integer: metadata.generation.
func composedIntegers(obj map[string]any) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		if n, ok := integer(md["generation"]); ok {
			md["generation"] = n
		}
	}
}

func integer(v any) (any, bool) {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t), true
		}
	case map[string]any:
		integers(t)
	case []any:
		for i := range t {
			if n, ok := integer(t[i]); ok {
				t[i] = n
			}
		}
	}
	return nil, false
}
