// Package preview says what a change to a Claim or XR would do before it is
// applied (`kubectl kausality plan`): whether admission lets it in and with
// which allowances, and, per composed resource, which fields would change,
// whether each reaches the cloud, is withheld by function-kausality or is
// held behind a closed gate (propagation control's later batch, a freeze).
// It compares what `crossplane render` produced with what is observed and
// does no I/O: the CLI gathers the objects and runs the render.
package preview

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// Outcome is what becomes of one change.
type Outcome string

// Outcomes of a change.
const (
	// Reaches: the change is let through and the resource's gate opens
	// for it (or the resource is not gated), so the provider writes it
	// to the cloud.
	Reaches Outcome = "Reaches"
	// Withheld: function-kausality keeps the observed value; no cause
	// covers the change.
	Withheld Outcome = "Withheld"
	// Held: the change is let into the managed resource's spec but its
	// gate stays closed for now: propagation control holds it for a later
	// batch, a freeze keeps the gate shut, or no open allowance covers it.
	Held Outcome = "Held"
)

// Action is what happens to a composed resource as a whole.
type Action string

// Actions on a composed resource.
const (
	ActionCreate Action = "Create"
	ActionUpdate Action = "Update"
	ActionDelete Action = "Delete"
	ActionNone   Action = "None"
)

// Admission is what the server-side dry run of the change said, as the CLI
// saw it: the input of Compare.
type Admission struct {
	// Allowed is false when admission (or the API server) refused the
	// write; Message is then why.
	Allowed  bool
	Message  string
	Warnings []string
	// Before are the allowances the live object carries (none when it
	// does not exist yet), After those the dry-run result carries.
	Before, After []allowance.Allowance
	// Composite, for a Claim, is what admission would do when Crossplane
	// syncs the change to the Claim's XR, simulated with admission's own
	// code; nil for an XR.
	Composite *Admission
}

// Inputs are the objects Compare compares.
type Inputs struct {
	Admission Admission
	// XR is the composite as the full pipeline rendered it (with
	// --include-full-xr), nil when admission refused the change.
	XR *unstructured.Unstructured
	// Rendered are the composed resources the full pipeline desires;
	// Wanted those the pipeline desires without its function-kausality
	// steps: what the change asks for before Kausality decides.
	Rendered, Wanted []*unstructured.Unstructured
	// Observed are the live composed resources.
	Observed []*unstructured.Unstructured
	// Results are the render's Result objects (function results).
	Results []*unstructured.Unstructured
	// Notes are what the CLI could not do and the reader should know.
	Notes []string
}

// Plan is what a change would do. Its JSON form is stable, for CI.
type Plan struct {
	Admission AdmissionPlan `json:"admission"`
	// Composite is the XR the render composed, with what Kausality says
	// on it; nil when nothing was rendered.
	Composite *Composite `json:"composite,omitempty"`
	Resources []Resource `json:"resources,omitempty"`
	Summary   Summary    `json:"summary"`
	Notes     []string   `json:"notes,omitempty"`
}

// AdmissionPlan is admission's verdict and the allowances the change earns.
type AdmissionPlan struct {
	Allowed  bool     `json:"allowed"`
	Message  string   `json:"message,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// New are the allowances the change adds, Kept those the object
	// already carried and keeps.
	New  []allowance.Allowance `json:"new,omitempty"`
	Kept []allowance.Allowance `json:"kept,omitempty"`
	// Composite is the same for the XR a Claim's change reaches.
	Composite *AdmissionPlan `json:"composite,omitempty"`
}

// Composite is the rendered XR and what the function says on it.
type Composite struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Withheld is the KausalityAllowed condition's message when False,
	// Propagation the Propagated condition's when False.
	Withheld    string `json:"withheld,omitempty"`
	Propagation string `json:"propagation,omitempty"`
}

// Resource is one composed resource.
type Resource struct {
	// Resource is the composition resource name.
	Resource   string `json:"resource"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	Action     Action `json:"action"`
	// Gated says whether Kausality gates the resource; Gate is its
	// rendered spec.managementPolicies.
	Gated bool     `json:"gated"`
	Gate  []string `json:"gate,omitempty"`
	// Pending are the External allowances propagation control holds for a
	// later batch, Open the ones that open the gate.
	Pending []string `json:"pending,omitempty"`
	Open    []string `json:"open,omitempty"`
	Changes []Change `json:"changes,omitempty"`
}

// Change is one field that would change, or the resource's creation or
// deletion (Path "").
type Change struct {
	Path    string  `json:"path,omitempty"`
	Verb    string  `json:"verb"`
	From    any     `json:"from,omitempty"`
	To      any     `json:"to,omitempty"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
}

// Summary counts the changes by outcome.
type Summary struct {
	Denied   bool `json:"denied"`
	Reaches  int  `json:"reaches"`
	Withheld int  `json:"withheld"`
	Held     int  `json:"held"`
}

// Blocked reports whether admission would refuse the change or Kausality
// would withhold part of it: what `--exit-code` fails on. Held changes are
// not blocked; they reach the cloud with a later batch or once a freeze
// lifts.
func (p Plan) Blocked() bool { return p.Summary.Denied || p.Summary.Withheld > 0 }

// Compare works out the plan.
func Compare(in Inputs) Plan {
	p := Plan{Admission: admissionPlan(in.Admission), Notes: slices.Clone(in.Notes)}
	p.Summary.Denied = !in.Admission.Allowed || (in.Admission.Composite != nil && !in.Admission.Composite.Allowed)
	if in.XR == nil {
		return p
	}
	p.Composite = compositeOf(in.XR)
	p.Resources = resources(in)
	for _, r := range p.Resources {
		for _, c := range r.Changes {
			switch c.Outcome {
			case Reaches:
				p.Summary.Reaches++
			case Withheld:
				p.Summary.Withheld++
			case Held:
				p.Summary.Held++
			}
		}
	}
	return p
}

func admissionPlan(a Admission) AdmissionPlan {
	out := AdmissionPlan{Allowed: a.Allowed, Message: a.Message, Warnings: slices.Clone(a.Warnings)}
	for _, x := range a.After {
		if slices.ContainsFunc(a.Before, x.Same) {
			out.Kept = append(out.Kept, x)
		} else {
			out.New = append(out.New, x)
		}
	}
	if a.Composite != nil {
		c := admissionPlan(*a.Composite)
		out.Composite = &c
	}
	return out
}
