package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Names of the required resources the function asks Crossplane for. `crossplane
// render --required-resources` supplies them from a file.
const (
	RequirementPolicies = "kausality-allowance-policies"
	RequirementUpgrades = "kausality-upgrade-allowances"
)

// XR condition types the function sets.
const (
	// ConditionAllowed is False while the function withholds a mutation, and
	// says which and why.
	ConditionAllowed = "KausalityAllowed"
	// ConditionAnnotations is False while a kausality.io annotation on the XR
	// cannot be parsed; the function then acts as if it had no allowances.
	ConditionAnnotations = "KausalityAnnotationsValid"
)

// Condition reasons.
const (
	ReasonAllAllowed       = "AllMutationsAllowed"
	ReasonWithheld         = "MutationsWithheld"
	ReasonLogOnly          = "WouldWithhold"
	ReasonAnnotationsValid = "AnnotationsValid"
	ReasonMalformed        = "MalformedAnnotation"
)

// DefaultMaxGateOpen is how long a gate may stay open for one allowance when
// the input does not say.
const DefaultMaxGateOpen = time.Hour

// Function is the Kausality composition function.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log      logging.Logger
	policies *policy.Cache
	now      func() time.Time
}

// NewFunction returns a function that logs to log.
func NewFunction(log logging.Logger) *Function {
	return &Function{log: log, policies: policy.NewCache(), now: time.Now}
}

// config is the validated input.
type config struct {
	mode        v1beta1.Mode
	readOnly    []string
	maxGateOpen time.Duration
}

func configFrom(in *v1beta1.Input) (config, error) {
	c := config{mode: v1beta1.ModeEnforce, readOnly: gate.DefaultReadOnly, maxGateOpen: DefaultMaxGateOpen}
	switch in.Mode {
	case "", v1beta1.ModeEnforce:
	case v1beta1.ModeLog:
		c.mode = v1beta1.ModeLog
	default:
		return c, errors.Errorf("input mode %q is not Enforce or Log", in.Mode)
	}
	if len(in.ReadOnlyPolicies) > 0 {
		if err := gate.ValidateReadOnly(in.ReadOnlyPolicies); err != nil {
			return c, errors.Wrap(err, "input readOnlyPolicies")
		}
		c.readOnly = in.ReadOnlyPolicies
	}
	if in.MaxGateOpen != nil {
		if in.MaxGateOpen.Duration <= 0 {
			return c, errors.Errorf("input maxGateOpen %s must be positive", in.MaxGateOpen.Duration)
		}
		c.maxGateOpen = in.MaxGateOpen.Duration
	}
	return c, nil
}

// RunFunction gates the desired composed resources of one XR.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	log := f.log.WithValues("tag", req.GetMeta().GetTag())

	in := &v1beta1.Input{}
	if err := request.GetInput(req, in); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get function input"))
		return rsp, nil
	}
	cfg, err := configFrom(in)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}

	// Ask for the policies on every call: Crossplane calls again until the
	// requirements are stable, and only the last response counts.
	rsp.Requirements = &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		RequirementPolicies: selectAll(v1alpha1.AllowancePolicyGroupVersionKind.GroupVersion().String(), v1alpha1.AllowancePolicyKind),
		RequirementUpgrades: selectAll(v1alpha1.UpgradeAllowanceGroupVersionKind.GroupVersion().String(), v1alpha1.UpgradeAllowanceKind),
	}}

	oxr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get observed composite resource"))
		return rsp, nil
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get observed composed resources"))
		return rsp, nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot get desired composed resources"))
		return rsp, nil
	}

	// The SDK decodes numbers as float64; Kubernetes objects hold int64.
	integers(oxr.Resource.Object)
	for _, o := range observed {
		integers(o.Resource.Object)
	}
	for _, d := range desired {
		integers(d.Resource.Object)
	}

	run := &run{cfg: cfg, now: f.now().UTC(), xr: oxr.Resource.Object}
	run.load(f.policies, req)

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

	out := map[resource.Name]*resource.DesiredComposed{}
	for _, n := range names {
		name := resource.Name(n)
		var obs map[string]any
		if o, ok := observed[name]; ok {
			obs = o.Resource.Object
		}
		d, ok := desired[name]
		if !ok {
			if kept := run.deleted(n, obs); kept != nil {
				out[name] = &resource.DesiredComposed{Resource: kept}
			}
			continue
		}
		if run.composed(n, obs, d.Resource.Object) {
			out[name] = d
		}
	}

	if err := setDesired(rsp, out); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot set desired composed resources"))
		return rsp, nil
	}
	run.report(rsp)
	log.Debug("Gated composed resources", "resources", len(out), "withheld", len(run.withheld))
	return rsp, nil
}

// setDesired replaces the response's desired composed resources, keeping the
// Ready flags earlier steps set.
func setDesired(rsp *fnv1.RunFunctionResponse, out map[resource.Name]*resource.DesiredComposed) error {
	keep := rsp.GetDesired().GetResources()
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	rsp.Desired.Resources = map[string]*fnv1.Resource{}
	if err := response.SetDesiredComposedResources(rsp, out); err != nil {
		return err
	}
	for n, r := range rsp.Desired.Resources {
		if k, ok := keep[n]; ok {
			r.Ready = k.GetReady()
			r.ConnectionDetails = k.GetConnectionDetails()
		}
	}
	return nil
}

func selectAll(apiVersion, kind string) *fnv1.ResourceSelector {
	return &fnv1.ResourceSelector{
		ApiVersion: apiVersion,
		Kind:       kind,
		Match:      &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{}}},
	}
}

// required returns the resources Crossplane resolved for a requirement, and
// whether it has resolved it at all.
func required(req *fnv1.RunFunctionRequest, name string) ([]*unstructured.Unstructured, bool, error) {
	rs, ok, err := request.GetRequiredResource(req, name)
	if err != nil || !ok {
		// Crossplane before v2 only fills the deprecated extra resources.
		if ers, eok := req.GetExtraResources()[name]; eok && err == nil {
			out := make([]*unstructured.Unstructured, 0, len(ers.GetItems()))
			for _, i := range ers.GetItems() {
				u := &unstructured.Unstructured{}
				if err := resource.AsObject(i.GetResource(), u); err != nil {
					return nil, true, err
				}
				out = append(out, u)
			}
			return out, true, nil
		}
		return nil, ok, err
	}
	out := make([]*unstructured.Unstructured, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Resource)
	}
	return out, true, nil
}

func decodeAll[T any](us []*unstructured.Unstructured, into func(*T)) []error {
	var errs []error
	for _, u := range us {
		t := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
			errs = append(errs, errors.Wrapf(err, "cannot decode %s %q", u.GetKind(), u.GetName()))
			continue
		}
		into(t)
	}
	return errs
}

// ref names an object for messages: Kind/name.
func ref(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	return fmt.Sprintf("%s/%s", u.GetKind(), u.GetName())
}

// integers turns every whole float64 in obj into int64, in place, so that
// metadata.generation and friends read as Kubernetes objects do.
func integers(obj map[string]any) {
	for k, v := range obj {
		obj[k] = integer(v)
	}
}

func integer(v any) any {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t)
		}
	case map[string]any:
		integers(t)
	case []any:
		for i := range t {
			t[i] = integer(t[i])
		}
	}
	return v
}

func joinLines(ls []string) string { return strings.Join(ls, "; ") }
