package policy

import (
	"fmt"
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// Permitting is one place of a policy whose entry, once it is an
// allowance on the XR (or, for a phase, while the XR is in that phase),
// lets a change to a composed resource through. `kubectl kausality
// explain` lists them for a withheld change; they are found by the same
// matching the function decides with, so the two cannot disagree.
type Permitting struct {
	// Policy is the AllowancePolicy's name.
	Policy string `json:"policy"`
	// At is where the entry is: spec.rules[0].policies[1],
	// spec.initializing.policies[0], or spec.rules[2] for a rule without
	// policies, which permits everything.
	At string `json:"at"`
	// Rule is the rule whose trigger earns the allowance, without its
	// policies (Entry is the one that covers the change); nil for a phase
	// section.
	Rule *v1alpha1.Rule `json:"rule,omitempty"`
	// Entry is the entry that covers the change; nil for a rule without
	// policies.
	Entry *v1alpha1.PolicyEntry `json:"entry,omitempty"`
	// Subjects are the policy's subjects: who may start the rule's chain
	// (mayInitiate) or propagate it. None: everyone.
	Subjects []v1alpha1.Subject `json:"subjects,omitempty"`
}

// Change is a change to a composed resource, as the function withholds it.
type Change struct {
	// Relation is ControllerChild for the child object's own verbs and
	// field mutations, External for opening its gate to the cloud.
	Relation v1alpha1.Relation
	// Verb is Create or Delete of the object, Update for a mutation, or an
	// external verb ("*" for any) for External.
	Verb string
	// Mutation is the field mutation of an Update; nil covers any.
	Mutation *mutation.Mutation
}

// Permitting lists, in priority order, every rule entry and phase entry of
// the set that covers ch to a composed resource of kind c: it names the
// kind (MatchesChild, MatchesExternal), grants the verb and, for a
// mutation, its mutations cover the field. A rule without policies covers
// everything.
func (s Set) Permitting(c Child, ch Change) []Permitting {
	var out []Permitting
	for _, p := range s.policies {
		subjects := slices.Clone(p.policy.Spec.Subjects)
		for ri, r := range p.rules {
			rule := p.policy.Spec.Rules[ri].DeepCopy()
			rule.Policies = nil // Entry is the one that matters here
			at := fmt.Sprintf("spec.rules[%d]", ri)
			if len(r.entries) == 0 {
				out = append(out, Permitting{Policy: p.Name(), At: at, Rule: rule, Subjects: subjects})
				continue
			}
			for ei, e := range r.entries {
				if e.covers(c, ch) {
					out = append(out, Permitting{Policy: p.Name(), At: fmt.Sprintf("%s.policies[%d]", at, ei), Rule: rule, Entry: e.DeepCopy(), Subjects: subjects})
				}
			}
		}
		for _, sec := range []struct {
			at string
			ph phase
		}{{"spec.initializing", p.init}, {"spec.deleting", p.del}} {
			for ei, e := range sec.ph.entries {
				if e.covers(c, ch) {
					out = append(out, Permitting{Policy: p.Name(), At: fmt.Sprintf("%s.policies[%d]", sec.at, ei), Entry: e.DeepCopy(), Subjects: subjects})
				}
			}
		}
	}
	return out
}

// covers reports whether the entry names c and grants ch, as Bound's
// AllowsChild, AllowsMutation and ExternalVerbs read an entry.
func (e entry) covers(c Child, ch Change) bool {
	if e.relation != ch.Relation {
		return false
	}
	switch e.relation {
	case v1alpha1.RelationExternal:
		return MatchesExternal(e.Target, c) && (ch.Verb == v1alpha1.VerbAll || v1alpha1.GrantsVerb(e.Verbs, ch.Verb))
	default:
		if !MatchesChild(e.Target, c) || !v1alpha1.GrantsVerb(e.Verbs, ch.Verb) {
			return false
		}
		return ch.Verb != v1alpha1.VerbUpdate || ch.Mutation == nil || len(e.Mutations) == 0 || e.bounds.Covers(*ch.Mutation)
	}
}

// MayInitiate reports whether the user may start a chain under the
// policy: it has no subjects, or a subject with mayInitiate names the
// user (by name, group or service account).
func (c *Compiled) MayInitiate(id Identity) bool { return c.mayInitiate(id) }

// HasInitiatingGroup reports whether a Group subject with mayInitiate
// names someone: a trace records a user's name, not their groups, so
// whether such a user may initiate cannot be told from it.
func (c *Compiled) HasInitiatingGroup() bool {
	return slices.ContainsFunc(c.policy.Spec.Subjects, func(s v1alpha1.Subject) bool { return s.MayInitiate && s.Kind == v1alpha1.SubjectGroup })
}
