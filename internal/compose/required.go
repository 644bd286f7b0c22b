package compose

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// Names of the required resources the function asks Crossplane for. `crossplane
// render --required-resources` supplies them from a file.
const (
	RequirementPolicies = "kausality-allowance-policies"
	RequirementUpgrades = "kausality-upgrade-allowances"
	// RequirementRevision is the XR's CompositionRevision, whose
	// Composition and number UpgradeAllowances may name.
	RequirementRevision = "kausality-composition-revision"
	// RequirementNamespace is the Namespace of the XR, or of a legacy XR's
	// Claim, whose kausality.io/mode and kausality.io/freeze annotations
	// apply to it.
	RequirementNamespace = "kausality-namespace"
	// RequirementFunctions and RequirementFunctionRevisions are every
	// Function and FunctionRevision: the package each step of the pipeline
	// runs is part of the logic that produces composed resources.
	RequirementFunctions         = "kausality-functions"
	RequirementFunctionRevisions = "kausality-function-revisions"
)

// requirements asks for every AllowancePolicy, UpgradeAllowance, Function
// and FunctionRevision and, when
// the XR names them, its CompositionRevision and Namespace, on every call:
// Crossplane calls again until the requirements are stable, and only the
// last response counts.
func requirements(xr map[string]any) *fnv1.Requirements {
	rs := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		RequirementPolicies:          selectAll(v1alpha1.AllowancePolicyGroupVersionKind.GroupVersion().String(), v1alpha1.AllowancePolicyKind),
		RequirementUpgrades:          selectAll(v1alpha1.UpgradeAllowanceGroupVersionKind.GroupVersion().String(), v1alpha1.UpgradeAllowanceKind),
		RequirementFunctions:         selectAll("pkg.crossplane.io/v1", "Function"),
		RequirementFunctionRevisions: selectAll("pkg.crossplane.io/v1", "FunctionRevision"),
	}}
	if revision := rollout.Revision(xr); revision != "" {
		rs.Resources[RequirementRevision] = &fnv1.ResourceSelector{
			ApiVersion: "apiextensions.crossplane.io/v1", Kind: "CompositionRevision",
			Match: &fnv1.ResourceSelector_MatchName{MatchName: revision},
		}
	}
	if ns := policy.ModeNamespace(xr); ns != "" {
		rs.Resources[RequirementNamespace] = &fnv1.ResourceSelector{
			ApiVersion: "v1", Kind: "Namespace",
			Match: &fnv1.ResourceSelector_MatchName{MatchName: ns},
		}
	}
	return rs
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
		if ers, eok := req.GetExtraResources()[name]; eok && err == nil { //nolint:staticcheck // read for Crossplane before v2, which knows no required resources
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
			errs = append(errs, errors.Wrapf(err, errFmtDecodeRequired, u.GetKind(), u.GetName()))
			continue
		}
		into(t)
	}
	return errs
}
