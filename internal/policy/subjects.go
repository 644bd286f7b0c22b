package policy

import (
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// NamesInitiator reports whether some policy of the set names id as a
// subject with mayInitiate: such a user may also lift another user's
// freeze. A policy without subjects lets everyone initiate but names
// nobody, so it does not count: lifting someone else's freeze stays with
// the people a policy names.
func (s Set) NamesInitiator(id Identity) bool {
	return slices.ContainsFunc(s.policies, func(p *Compiled) bool {
		return len(p.policy.Spec.Subjects) > 0 && p.mayInitiate(id)
	})
}

// mayInitiate reports whether the user may start a chain under this policy.
func (c *Compiled) mayInitiate(id Identity) bool {
	if len(c.policy.Spec.Subjects) == 0 {
		return true
	}
	return slices.ContainsFunc(c.policy.Spec.Subjects, func(s v1alpha1.Subject) bool { return s.MayInitiate && names(s, id) })
}

// IsSubject reports whether the user is named by the policy's subjects at
// all, mayInitiate or not: such a user may propagate existing allowances.
func (c *Compiled) IsSubject(id Identity) bool {
	return slices.ContainsFunc(c.policy.Spec.Subjects, func(s v1alpha1.Subject) bool { return names(s, id) })
}

// names reports whether subject s names the user, by name, group or
// service account.
func names(s v1alpha1.Subject, id Identity) bool {
	switch s.Kind {
	case v1alpha1.SubjectUser:
		return id.Username == s.Name
	case v1alpha1.SubjectGroup:
		return slices.Contains(id.Groups, s.Name)
	case v1alpha1.SubjectServiceAccount:
		return id.Username == serviceAccountPrefix+s.Namespace+":"+s.Name
	}
	return false
}
