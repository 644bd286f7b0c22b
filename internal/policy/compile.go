package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// entry is one compiled policy entry.
type entry struct {
	v1alpha1.PolicyEntry
	relation v1alpha1.Relation
	bounds   mutation.Bounds
}

// phase is a compiled initializing or deleting section.
type phase struct {
	present      bool
	unrestricted bool // present with no policies: unrestricted (DESIGN §3)
	entries      []entry
}

// rule is one compiled steady-state rule.
type rule struct {
	trigger    mutation.Pattern
	conditions []program
	capture    []string
	entries    []entry // empty: the trigger allows unrestricted operations
}

// Compiled is an AllowancePolicy with every CEL expression and path
// compiled. It is immutable and safe to share.
type Compiled struct {
	policy v1alpha1.AllowancePolicy
	when   program
	init   phase
	del    phase
	rules  []rule
}

// Name is the policy's name.
func (c *Compiled) Name() string { return c.policy.GetName() }

// Compile compiles an AllowancePolicy. It reports every problem, not just the
// first, each naming the field and the expression or path, so the policy's
// Ready condition and an admission denial can say exactly what to fix.
func Compile(p *v1alpha1.AllowancePolicy) (*Compiled, error) {
	c := &Compiled{policy: *p.DeepCopy()}
	var errs []string
	fail := func(field string, err error) { errs = append(errs, fmt.Sprintf("%s: %v", field, err)) }

	if p.Spec.For.Kind == "" {
		fail("spec.for.kind", errors.New("is required"))
	}
	switch p.Spec.Mode {
	case "", v1alpha1.ModeEnforce, v1alpha1.ModeLog, v1alpha1.ModeAudit:
	default:
		fail("spec.mode", errors.Errorf("%q is not Enforce, Log or Audit", p.Spec.Mode))
	}
	switch p.Spec.Drift {
	case "", v1alpha1.DriftAllow, v1alpha1.DriftDeny:
	default:
		fail("spec.drift", errors.Errorf("%q is not Allow or Deny", p.Spec.Drift))
	}
	for i, s := range p.Spec.Subjects {
		if err := validSubject(s); err != nil {
			fail(fmt.Sprintf("spec.subjects[%d]", i), err)
		}
	}

	when := DefaultInitializingWhen
	if p.Spec.Initializing != nil && p.Spec.Initializing.When != "" {
		when = p.Spec.Initializing.When
	}
	var err error
	if c.when, err = compileBool(when); err != nil {
		fail("spec.initializing.when "+quote(when), err)
	}
	if p.Spec.Initializing != nil {
		c.init = compilePhase("spec.initializing", p.Spec.Initializing.Policies, fail)
	}
	if p.Spec.Deleting != nil {
		c.del = compilePhase("spec.deleting", p.Spec.Deleting.Policies, fail)
	}
	for i, r := range p.Spec.Rules {
		at := fmt.Sprintf("spec.rules[%d]", i)
		cr := rule{capture: r.Capture}
		if cr.trigger, err = mutation.ParsePattern(r.Trigger); err != nil {
			fail(at+".trigger", err)
		}
		for j, expr := range r.Conditions {
			prg, err := compileBool(expr)
			if err != nil {
				fail(fmt.Sprintf("%s.conditions[%d] %s", at, j, quote(expr)), err)
				continue
			}
			cr.conditions = append(cr.conditions, prg)
		}
		for j, path := range r.Capture {
			if _, err := fieldpath.Parse(path); err != nil || path == "" {
				if err == nil {
					err = errors.New("path is empty")
				}
				fail(fmt.Sprintf("%s.capture[%d]", at, j), err)
			}
		}
		cr.entries = compileEntries(at+".policies", r.Policies, fail)
		c.rules = append(c.rules, cr)
	}
	if len(errs) > 0 {
		return nil, errors.Errorf("AllowancePolicy %s is invalid: %s", p.GetName(), strings.Join(errs, "; "))
	}
	return c, nil
}

func quote(expr string) string { return fmt.Sprintf("%q", expr) }

func validSubject(s v1alpha1.Subject) error {
	switch s.Kind {
	case v1alpha1.SubjectUser, v1alpha1.SubjectGroup:
	case v1alpha1.SubjectServiceAccount:
		if s.Namespace == "" {
			return errors.New("a ServiceAccount subject needs a namespace")
		}
	default:
		return errors.Errorf("kind %q is not User, Group or ServiceAccount", s.Kind)
	}
	if s.Name == "" {
		return errors.New("name is required")
	}
	return nil
}

func compilePhase(at string, es []v1alpha1.PolicyEntry, fail func(string, error)) phase {
	return phase{present: true, unrestricted: len(es) == 0, entries: compileEntries(at+".policies", es, fail)}
}

// entryVerbs are the verbs an entry may name: for ControllerChild the
// object operations, for External Crossplane's external verbs, the ones a
// gate can open. Both are the same four.
var entryVerbs = []string{v1alpha1.VerbCreate, v1alpha1.VerbUpdate, v1alpha1.VerbDelete, v1alpha1.VerbAll}

func compileEntries(at string, es []v1alpha1.PolicyEntry, fail func(string, error)) []entry {
	out := make([]entry, 0, len(es))
	for i, e := range es {
		here := fmt.Sprintf("%s[%d]", at, i)
		ce := entry{PolicyEntry: e, relation: e.Relation}
		if ce.relation == "" {
			ce.relation = v1alpha1.RelationControllerChild
			if len(e.Target.External) > 0 {
				ce.relation = v1alpha1.RelationExternal
			}
		}
		switch ce.relation {
		case v1alpha1.RelationControllerChild:
			if e.Target.Resource == "" {
				fail(here+".target.resource", errors.New("is required for relation ControllerChild"))
			}
			if len(e.Target.External) > 0 {
				fail(here+".target.external", errors.New("is only for relation External"))
			}
			b, err := mutation.CompileBounds(e.Mutations)
			if err != nil {
				fail(here, err)
			}
			ce.bounds = b
		case v1alpha1.RelationExternal:
			if !slices.ContainsFunc(externalKeys, func(k string) bool { _, ok := e.Target.External[k]; return ok }) {
				fail(here+".target.external", errors.Errorf("must name at least one of %s", strings.Join(externalKeys, ", ")))
			}
			if len(e.Mutations) > 0 {
				fail(here+".mutations", errors.New("are only for relation ControllerChild"))
			}
		default:
			fail(here+".relation", errors.Errorf("%q is not ControllerChild or External", e.Relation))
		}
		if len(e.Verbs) == 0 {
			fail(here+".verbs", errors.New("at least one verb is required"))
		}
		for j, v := range e.Verbs {
			if !slices.Contains(entryVerbs, v) {
				fail(fmt.Sprintf("%s.verbs[%d]", here, j), errors.Errorf("%q is not one of %s", v, strings.Join(entryVerbs, ", ")))
			}
		}
		out = append(out, ce)
	}
	return out
}
