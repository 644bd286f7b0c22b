package compose

import (
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/request"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// TestLoad: the first stage reads the request once into what every later
// stage decides from. Whatever it cannot read fails closed (every change
// withheld) and is reported naming the object and field.
func TestLoad(t *testing.T) {
	freeze := `{"user":"carol@example.com","message":"incident 42","at":"2026-11-22T11:00:00Z"}`
	type want struct {
		restrictAll bool
		log         bool
		allowances  int
		frozen      string
		problem     string // substring of the one problem reported; "" for none
	}
	cases := map[string]struct {
		reason string
		req    func(*testing.T) *fnv1.RunFunctionRequest
		want   want
	}{
		"Resolved": {
			reason: "Policies resolved and the XR's allowances read: nothing restricted beyond the policies, both allowances loaded.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}), nil, nil, policyDB)
			},
			want: want{allowances: 2},
		},
		"PoliciesNotResolvedYet": {
			reason: "Until Crossplane resolves the policies requirement, every composed resource counts as restricted.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				req := newRequest(t, xr(t, 2, 1, nil), nil, nil)
				delete(req.RequiredResources, RequirementPolicies)
				return req
			},
			want: want{restrictAll: true},
		},
		"PolicyUnreadable": {
			reason: "A policy that does not decode fails closed and is named.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return newRequest(t, xr(t, 2, 1, nil), nil, nil, "apiVersion: kausality.io/v1alpha1\nkind: AllowancePolicy\nmetadata: {name: broken}\nspec: {for: 5}\n")
			},
			want: want{restrictAll: true, problem: "broken"},
		},
		"XRAllowancesMalformed": {
			reason: "Allowances that do not parse grant nothing, and the annotation and XR are named.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: "[{"}), nil, nil, policyDB)
			},
			want: want{problem: v1alpha1.AnnotationAllowances},
		},
		"XRFrozen": {
			reason: "The XR's freeze names who set it.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return newRequest(t, xr(t, 2, 1, map[string]string{v1alpha1.AnnotationFreeze: freeze}), nil, nil, policyDB)
			},
			want: want{frozen: "carol@example.com"},
		},
		"NamespaceFrozen": {
			reason: "A frozen Namespace freezes the Claim's XR, and says where the freeze is.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return inNamespace(t, newRequest(t, claimed(t, xr(t, 2, 1, nil)), nil, nil, policyDB), map[string]string{v1alpha1.AnnotationFreeze: freeze})
			},
			want: want{frozen: "carol@example.com on Namespace prod"},
		},
		"NamespaceInLogMode": {
			reason: "The Namespace's Log mode makes the run report instead of withholding.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return inNamespace(t, newRequest(t, claimed(t, xr(t, 2, 1, nil)), nil, nil, policyDB), map[string]string{v1alpha1.AnnotationMode: string(v1alpha1.ModeLog)})
			},
			want: want{log: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := tc.req(t)
			oxr, err := request.GetObservedCompositeResource(req)
			if err != nil {
				t.Fatal(err)
			}
			integers(oxr.Resource.Object)
			r := &run{compiled: newCompiled(), loaded: loaded{now: testNow, xr: &unstructured.Unstructured{Object: oxr.Resource.Object}}}
			problems := r.load(req, nil)

			got := want{restrictAll: r.restrictAll, log: r.log, allowances: len(r.allowances), frozen: r.frozen}
			if len(problems) > 1 {
				t.Errorf("%s\nproblems: %v, want at most one", tc.reason, problems)
			}
			if len(problems) == 1 {
				got.problem = tc.want.problem
				if tc.want.problem == "" || !strings.Contains(problems[0], tc.want.problem) {
					t.Errorf("%s\nproblem %q, want one naming %q", tc.reason, problems[0], tc.want.problem)
				}
			}
			if got != tc.want {
				t.Errorf("%s\nloaded %+v, want %+v (problems %v)", tc.reason, got, tc.want, problems)
			}
			if len(r.xrTrace) == 0 || r.xrTrace.Last().Kind != "XDatabase" {
				t.Errorf("%s\nthe XR's trace %v does not end with the XR's own hop", tc.reason, r.xrTrace)
			}
		})
	}
}
