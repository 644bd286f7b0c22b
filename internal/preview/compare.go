package preview

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// annotationResourceName is Crossplane's name of a composed resource in its
// Composition, which matches rendered to observed resources.
const annotationResourceName = "crossplane.io/composition-resource-name"

// gateField is the gate itself: the function opens and closes it, so it
// is no change the user's change asks for.
const gateField = "spec.managementPolicies"

func compositeOf(xr *unstructured.Unstructured) *Composite {
	c := &Composite{APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Namespace: xr.GetNamespace(), Name: xr.GetName()}
	if cond := condition(xr, v1alpha1.ConditionAllowed); cond.Status == "False" {
		c.Withheld = cond.Message
	}
	if cond := condition(xr, v1alpha1.ConditionPropagated); cond.Status == "False" {
		c.Propagation = cond.Message
	}
	return c
}

func condition(u *unstructured.Unstructured, t string) xpv2.Condition {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(u.Object).GetValueInto("status", cs)
	return cs.GetCondition(xpv2.ConditionType(t))
}

// key names a composed resource across render and cluster: its
// composition resource name, or its kind and name when it has none.
func key(u *unstructured.Unstructured) string {
	if n := u.GetAnnotations()[annotationResourceName]; n != "" {
		return n
	}
	return u.GetKind() + "/" + u.GetName()
}

func index(us []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := make(map[string]*unstructured.Unstructured, len(us))
	for _, u := range us {
		m[key(u)] = u
	}
	return m
}

// resources compares each composed resource, in composition resource
// name order.
func resources(in Inputs) []Resource {
	obs, ren, wan := index(in.Observed), index(in.Rendered), index(in.Wanted)
	var keys []string
	for _, m := range []map[string]*unstructured.Unstructured{obs, ren, wan} {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	why := reasons(in)
	out := make([]Resource, 0, len(keys))
	for _, k := range keys {
		r := resource(k, obs[k], ren[k], wan[k], why)
		out = append(out, r)
	}
	return out
}

// resource compares one composed resource: o observed, r rendered by the
// full pipeline, w wanted by the pipeline without Kausality; any may be
// nil.
func resource(k string, o, r, w *unstructured.Unstructured, why reasoner) Resource {
	shown := firstOf(r, o, w)
	res := Resource{Resource: k, APIVersion: shown.GetAPIVersion(), Kind: shown.GetKind(), Namespace: shown.GetNamespace(), Name: shown.GetName(), Action: ActionNone}
	if r != nil {
		res.Gated = r.GetLabels()[v1alpha1.LabelGated] == "true"
		res.Gate, _ = fieldpath.Pave(r.Object).GetStringArray(gateField)
		res.Open, res.Pending = allowancesOf(r)
	}
	switch {
	case o == nil && r != nil:
		res.Action = ActionCreate
		out, reason := gateOutcome(res, v1alpha1.VerbCreate, why.propagation)
		res.Changes = []Change{{Verb: v1alpha1.VerbCreate, Outcome: out, Reason: reason}}
	case o == nil && w != nil:
		res.Action = ActionCreate
		res.Changes = []Change{{Verb: v1alpha1.VerbCreate, Outcome: Withheld, Reason: why.withheld(k, "")}}
	case o != nil && r == nil:
		res.Action = ActionDelete
		res.Changes = []Change{{Verb: v1alpha1.VerbDelete, Outcome: Reaches, Reason: "the pipeline drops it and Kausality lets the deletion through"}}
	case o != nil && w == nil:
		res.Action = ActionDelete
		res.Changes = []Change{{Verb: v1alpha1.VerbDelete, Outcome: Withheld, Reason: why.withheld(k, "")}}
	default:
		res.Changes = updates(k, res, o, r, w, why)
		if len(res.Changes) > 0 {
			res.Action = ActionUpdate
		}
	}
	return res
}

func firstOf(us ...*unstructured.Unstructured) *unstructured.Unstructured {
	for _, u := range us {
		if u != nil {
			return u
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{}}
}

func skipGate(p string) bool { return mutation.Under(p, gateField) }

// updates are the spec fields of an existing resource that would change:
// those the full pipeline changes go to the gate; those only the pipeline
// without Kausality changes are withheld.
func updates(k string, res Resource, o, r, w *unstructured.Unstructured, why reasoner) []Change {
	let := mutation.Diff("spec", o.Object["spec"], r.Object["spec"], mutation.WithSkip(skipGate))
	var out []Change
	for _, m := range let {
		c := change(m, o, r)
		c.Outcome, c.Reason = gateOutcome(res, v1alpha1.VerbUpdate, why.propagation)
		out = append(out, c)
	}
	if w == nil {
		return out
	}
	for _, m := range mutation.Diff("spec", o.Object["spec"], w.Object["spec"], mutation.WithSkip(skipGate)) {
		if slices.ContainsFunc(let, func(l mutation.Mutation) bool { return l.Path == m.Path }) {
			continue
		}
		c := change(m, o, w)
		c.Outcome, c.Reason = Withheld, why.withheld(k, m.Path)
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func change(m mutation.Mutation, from, to *unstructured.Unstructured) Change {
	c := Change{Path: m.Path, Verb: string(m.Verb)}
	if m.Verb != v1alpha1.MutationInsert {
		c.From, _ = fieldpath.Pave(from.Object).GetValue(m.Path)
	}
	if m.Verb != v1alpha1.MutationDelete {
		c.To, _ = fieldpath.Pave(to.Object).GetValue(m.Path)
	}
	return c
}

// gateOutcome says whether a change the function lets into the spec
// reaches the cloud: the rendered gate must grant verb.
func gateOutcome(r Resource, verb, propagation string) (Outcome, string) {
	switch {
	case !r.Gated:
		return Reaches, "not gated: no AllowancePolicy restricts its kind"
	case slices.Contains(r.Gate, "*") || slices.Contains(r.Gate, verb):
		return Reaches, "the gate opens for " + verb
	case len(r.Pending) > 0:
		msg := "propagation control holds it for a later batch"
		if propagation != "" {
			msg += ": " + propagation
		}
		return Held, msg
	case propagation != "":
		return Held, "the gate stays closed: " + propagation
	default:
		return Held, "the gate stays closed: no open allowance covers it"
	}
}

// allowancesOf are a rendered resource's open and pending External
// allowances, one line each.
func allowancesOf(r *unstructured.Unstructured) (open, pending []string) {
	as, err := allowance.Parse(r.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil {
		return nil, nil
	}
	for _, a := range allowance.Unconsumed(as, r.Object) {
		if a.Relation != v1alpha1.RelationExternal {
			continue
		}
		s := Describe(a)
		switch {
		case a.IsPending():
			pending = append(pending, s)
		case !a.Held:
			open = append(open, s)
		}
	}
	return open, pending
}

// Describe is an allowance on one line: its verbs, the fields it ships, its
// generation and who started it.
func Describe(a allowance.Allowance) string {
	s := fmt.Sprintf("%s %s", a.Relation, strings.Join(a.Verbs, ","))
	if len(a.Mutations) > 0 {
		fs := make([]string, 0, len(a.Mutations))
		for _, m := range a.Mutations {
			fs = append(fs, m.JSONPath)
		}
		s += " of " + strings.Join(fs, ", ")
	}
	s += fmt.Sprintf(" (generation %d", a.Generation)
	if a.Initiator != "" {
		s += ", by " + a.Initiator
	}
	return s + ")"
}

// reasoner finds why the function withheld a change in what it said: its
// Warning results and the XR's KausalityAllowed condition.
type reasoner struct {
	messages    []string
	propagation string
}

func reasons(in Inputs) reasoner {
	var r reasoner
	for _, res := range in.Results {
		if m, _, _ := unstructured.NestedString(res.Object, "message"); m != "" {
			r.messages = append(r.messages, m)
		}
	}
	if in.XR != nil {
		c := compositeOf(in.XR)
		if c.Withheld != "" {
			r.messages = append(r.messages, c.Withheld)
		}
		r.propagation = c.Propagation
	}
	return r
}

// withheld is why the function withheld resource k's change of path ("" for
// the resource as a whole), read with the parser of the lines it writes
// (report.ParseWithheld): the reason of the line naming the path, or a
// field under or above it.
func (r reasoner) withheld(k, path string) string {
	for _, m := range r.messages {
		for _, w := range report.ParseWithheld(m) {
			if w.Resource != k {
				continue
			}
			if path == "" || w.Path == "" || mutation.Under(path, w.Path) || mutation.Under(w.Path, path) {
				return w.Reason
			}
		}
	}
	return "function-kausality keeps the observed value"
}
