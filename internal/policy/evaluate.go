package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// Identity is who makes a request, as the API server authenticated them.
type Identity struct {
	Username string
	Groups   []string
}

// serviceAccountPrefix starts the username of a service account.
const serviceAccountPrefix = "system:serviceaccount:"

// Request is a write to an object of the Set's kind, seen at admission.
type Request struct {
	// Object is the object as it will be stored; OldObject as it was, nil
	// on create.
	Object, OldObject map[string]any
	User              Identity
	// Generation is the generation Object will have once stored. Zero means
	// derive it: 1 on create, the old generation plus one when spec changed.
	Generation int64
	Now        time.Time
	// Parent is the allowance of the object's parent that covers this
	// change when a controller propagates it (Crossplane's claim controller
	// writing an XR): the change then needs no mayInitiate, only a subject
	// (or no subjects), and the allowances it earns continue the parent's
	// trace and keep its initiator.
	Parent *allowance.Allowance
	// Namespace is the Namespace ModeNamespace names for Object, nil when
	// there is none; its kausality.io/mode annotation may override the
	// policies' mode.
	Namespace map[string]any
	// WatchSelection makes changes of CompositionSelection fields
	// violations unless a rule permits them: the writer is a user, not
	// Crossplane (which moves an XR to a new revision itself).
	WatchSelection bool
	// WatchAll makes every spec change a violation unless a rule permits
	// it: a hand edit of a gated managed resource, which would otherwise
	// wait in its spec and go to the cloud with the next change an
	// allowance opens the gate for (DESIGN §4a).
	WatchAll bool
}

// Violation is a change to a watched field that no rule permits.
type Violation struct {
	Field  string
	Policy string
	Reason string
}

// Error says what was not permitted and why, naming field and policy.
func (v Violation) Error() string {
	if v.Policy == "" {
		return fmt.Sprintf("change to %s is not permitted: %s", v.Field, v.Reason)
	}
	return fmt.Sprintf("change to %s is not permitted by AllowancePolicy %s: %s", v.Field, v.Policy, v.Reason)
}

// Permitted are the mutations of Changed no violation names: in Log mode
// the others are let in too, but nothing permits them.
func (d Decision) Permitted() []mutation.Mutation {
	out := make([]mutation.Mutation, 0, len(d.Changed))
	for _, m := range d.Changed {
		if !slices.ContainsFunc(d.Violations, func(v Violation) bool { return v.Field == m.Path }) {
			out = append(out, m)
		}
	}
	return out
}

// Decision is what admission does with a Request.
type Decision struct {
	Phase Phase
	Mode  v1alpha1.Mode
	// Changed are the spec mutations of the request.
	Changed []mutation.Mutation
	// Allowances are the allowances the change earns, sorted; their traces
	// start with Hop.
	Allowances []allowance.Allowance
	// Hop is the object's own hop for this change: the first permitted
	// field, the user, the attestations.
	Hop allowance.Hop
	// Violations are watched fields changed without permission, in field
	// order.
	Violations []Violation
	// Warnings are for the user who wrote the object, such as a
	// kausality.io/mode annotation that is ignored.
	Warnings []string
	// Decided names the rule behind the decision, for metrics and audit.
	Decided Decided
}

// Evaluate decides a write: which watched fields changed, whether the user
// may initiate each change and the rule's conditions hold, and which
// allowances each permitted change earns. It never modifies the request.
// The spec is diffed, and for a user's write the metadata in Crossplane's
// domain too (CrossplaneMetadata); a rule's trigger names a path of either.
func (s Set) Evaluate(req Request) (Decision, error) {
	if req.Object == nil {
		return Decision{}, errors.New("request has no object")
	}
	d, object, v, gen, err := s.begin(req)
	if err != nil || req.OldObject == nil || d.Phase != PhaseSteady {
		// Creation and the initializing and deleting phases are bounded by
		// the phase bound, which the function applies; no allowance needed.
		return d, err
	}
	o := s.applyRules(req, &d, object, v, gen)
	first := s.judge(req, &d, o)
	d.Hop.Field = first
	d.Decided = decidedBy(d.Violations, first, o.permittedBy, o.deniedBy)
	if first != "" {
		// The object's hop carries what the first permitted change captured.
		for _, a := range d.Allowances {
			if own := a.Trace[len(a.Trace)-1]; own.Field == first {
				d.Hop.Attestations = own.Attestations
				break
			}
		}
	}
	allowance.Sort(d.Allowances)
	return d, nil
}

// begin is what every write's decision starts from: the mode, the phase,
// the spec mutations, the generation they get and the object's hop. It
// also returns the object CEL reads (with the stored status), its
// variables and that generation.
func (s Set) begin(req Request) (Decision, map[string]any, vars, int64, error) {
	u := unstructured.Unstructured{Object: req.Object}
	d := Decision{Phase: PhaseSteady}
	var err error
	if d.Mode, err = s.Mode(req.Namespace); err != nil {
		return d, nil, nil, 0, errors.Wrapf(err, "%s %s", u.GetKind(), u.GetName())
	}
	if w := IgnoredMode(req.Object); w != "" {
		d.Warnings = append(d.Warnings, w)
	}
	// CEL and the phase read the stored status: the API server drops the
	// status a client sends with a write of the object itself, so the
	// request's status is whatever the client chose (no status at all makes
	// the default initializing.when true).
	object := withStatusOf(req.Object, req.OldObject)
	v := varsOf(object, req.OldObject)
	if d.Phase, err = s.phase(object, v); err != nil {
		// Steady is the strictest phase: the rules decide every watched
		// change. The error is a warning, not a violation: a violation
		// would refuse every write of every object the policy fails on,
		// even one that changes nothing the rules watch
		// (kausality.io/allow-delete, a finalizer, Crossplane's own
		// references), and lock the kind.
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s %s: %v; the phase is taken as Steady", u.GetKind(), u.GetName(), err))
	}
	var oldSpec any
	if req.OldObject != nil {
		oldSpec = req.OldObject["spec"]
	}
	d.Changed = mutation.Diff("spec", oldSpec, req.Object["spec"])
	gen := req.Generation
	if gen == 0 {
		// A write that changes no spec field keeps the stored generation.
		stored := (&unstructured.Unstructured{Object: req.OldObject}).GetGeneration()
		gen = allowance.NextGeneration(stored)
		if req.OldObject != nil && len(d.Changed) == 0 {
			gen = stored
		}
	}
	if req.WatchSelection || req.WatchAll {
		// A user's write: what it changes in Crossplane's domain is
		// watched too (judge), and a rule may name it as a trigger.
		d.Changed = append(d.Changed, CrossplaneMetadata(req.OldObject, req.Object)...)
	}
	d.Hop = allowance.HopOf(&u, gen).By(req.User.Username, req.Now)
	d.Hop.Labels = allowance.TraceLabels(u.GetAnnotations())
	d.Violations = append(d.Violations, sizeViolations(d.Hop)...)
	return d, object, v, gen, nil
}

// sizeViolations are the trace labels and attestations of h past the
// bounds of allowance.MaxHopValue and MaxHopValues, in field order: a
// write that carries them is refused rather than copied into every
// allowance of its chain.
func sizeViolations(h allowance.Hop) []Violation {
	errs := h.SizeErrors()
	out := make([]Violation, 0, len(errs))
	for _, f := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, Violation{Field: f, Reason: errs[f]})
	}
	return out
}

// outcome is what the rules said of each changed field: permitted, or
// denied with the first violation, and which rule said so.
type outcome struct {
	permitted             map[string]bool
	denied                map[string]Violation
	permittedBy, deniedBy map[string]Decided
}

// applyRules asks every rule whose trigger a change hits whether the
// request may start it, and adds the allowances of those that permit it
// to d.
func (s Set) applyRules(req Request, d *Decision, object map[string]any, v vars, gen int64) outcome {
	o := outcome{permitted: map[string]bool{}, denied: map[string]Violation{}, permittedBy: map[string]Decided{}, deniedBy: map[string]Decided{}}
	for _, p := range s.policies {
		for ri, r := range p.rules {
			var hit []string
			for _, m := range d.Changed {
				if r.trigger.Overlaps(m.Path) {
					hit = append(hit, m.Path)
				}
			}
			if len(hit) == 0 {
				continue
			}
			by := Decided{Policy: p.Name(), Rule: ruleAt(ri)}
			if reason := p.permits(ri, req, v); reason != "" {
				o.deny(hit, by, reason)
				continue
			}
			captured := capture(r.capture, object)
			// Bounded with the object's trace labels, which the same hop
			// carries; what begin reported of the labels alone is not this
			// rule's doing.
			withCaptured := d.Hop
			withCaptured.Attestations = captured
			if vs := slices.DeleteFunc(sizeViolations(withCaptured), func(v Violation) bool { return slices.Contains(d.Violations, v) }); len(vs) > 0 {
				d.Violations = append(d.Violations, vs...)
				o.deny(hit, by, fmt.Sprintf("the rule captures %s, which is too large to copy into the change's allowances", vs[0].Field))
				continue
			}
			o.permit(hit, by)
			hop := d.Hop
			hop.Field = hit[0]
			hop.Attestations = captured
			d.Allowances = appendUnique(d.Allowances, allowancesFor(r, hop, gen, req.Parent)...)
		}
	}
	return o
}

// deny records that the rule by denies the fields hit, unless an earlier
// rule denied them already.
func (o outcome) deny(hit []string, by Decided, reason string) {
	for _, f := range hit {
		if _, ok := o.denied[f]; !ok {
			o.denied[f] = Violation{Field: f, Policy: by.Policy, Reason: reason}
			o.deniedBy[f] = by
		}
	}
}

// permit records that the rule by permits the fields hit; the first rule
// that permits a field is the one named for it.
func (o outcome) permit(hit []string, by Decided) {
	for _, f := range hit {
		if !o.permitted[f] {
			o.permittedBy[f] = by
		}
		o.permitted[f] = true
	}
}

// judge adds to d a violation for every changed field no rule permits that
// a rule denied or the request watches, and returns the first permitted
// field.
func (s Set) judge(req Request, d *Decision, o outcome) string {
	var first string
	for _, m := range d.Changed {
		if o.permitted[m.Path] {
			if first == "" {
				first = m.Path
			}
			continue
		}
		if v, ok := o.denied[m.Path]; ok {
			d.Violations = append(d.Violations, v)
			continue
		}
		switch {
		case req.WatchAll:
			v := Violation{Field: m.Path, Reason: ReasonHandEdit}
			if len(s.policies) > 0 {
				v.Policy = s.policies[0].Name()
			}
			d.Violations = append(d.Violations, v)
		case req.WatchSelection && len(s.policies) > 0 && selection(m.Path):
			d.Violations = append(d.Violations, Violation{Field: m.Path, Policy: s.policies[0].Name(),
				Reason: "it chooses what composes the object, and no rule's trigger permits changing it"})
		case req.WatchSelection && len(s.policies) > 0 && strings.HasPrefix(m.Path, "metadata."):
			d.Violations = append(d.Violations, Violation{Field: m.Path, Policy: s.policies[0].Name(), Reason: ReasonCrossplaneMetadata})
		}
	}
	return first
}

// permits reports why the request may not start rule ri, or "" when it may.
func (c *Compiled) permits(ri int, req Request, v vars) string {
	switch {
	case req.Parent != nil:
		if len(c.policy.Spec.Subjects) > 0 && !c.IsSubject(req.User) {
			return fmt.Sprintf("user %q is not a subject and may not propagate changes", req.User.Username)
		}
	case !c.mayInitiate(req.User):
		return fmt.Sprintf("user %q is not a subject with mayInitiate", req.User.Username)
	}
	for _, cond := range c.rules[ri].conditions {
		ok, err := cond.eval(v)
		if err != nil {
			return fmt.Sprintf("condition %q cannot be evaluated: %v", cond.expr, err)
		}
		if !ok {
			return fmt.Sprintf("condition %q is false", cond.expr)
		}
	}
	return ""
}

// Policies are the compiled policies of the set, highest priority first.
func (s Set) Policies() []*Compiled { return slices.Clone(s.policies) }

// withStatusOf is obj with old's status (none when old is nil), sharing
// everything else with obj.
func withStatusOf(obj, old map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	if st, ok := old["status"]; ok {
		out["status"] = st
	}
	return out
}
