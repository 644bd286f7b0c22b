package policy

import (
	"fmt"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Decided names the policy and rule behind a decision, as metrics and the
// audit log attribute it: bounded values (a policy's name, a rule's place),
// never an object's.
type Decided struct {
	// Policy is the AllowancePolicy's name; empty when none decided.
	Policy string
	// Rule is where the rule is in the policy, spec.rules[i]; empty when
	// no rule decided (a hand edit or a composition switch no rule names).
	Rule string
}

func ruleAt(i int) string { return fmt.Sprintf("spec.rules[%d]", i) }

// decidedBy is the decision's attribution: the rule that denied the first
// violation (or its policy alone, when no rule names the field), else the
// first rule that permitted the first permitted field.
func decidedBy(vs []Violation, first string, permittedBy, deniedBy map[string]Decided) Decided {
	switch {
	case len(vs) > 0:
		if d, ok := deniedBy[vs[0].Field]; ok {
			return d
		}
		return Decided{Policy: vs[0].Policy}
	case first != "":
		return permittedBy[first]
	}
	return Decided{}
}

// RestrictedBy is the name of the first policy, in priority order, with a
// ControllerChild entry that names the child's kind: the policy that makes
// changes to it need a cause. Metrics label the function's decisions with
// it, a value as bounded as the policies are. Empty when no policy names
// the kind (an unresolved target may still restrict it: see Restricts).
func (s Set) RestrictedBy(c Child) string {
	names := func(e entry) bool { return e.relation == v1alpha1.RelationControllerChild && MatchesChild(e.Target, c) }
	for _, p := range s.policies {
		if (Set{policies: []*Compiled{p}}).entries(names) {
			return p.Name()
		}
	}
	return ""
}
