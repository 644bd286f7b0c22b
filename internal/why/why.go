// Package why says, for what Kausality withholds from a composite's
// composed resources, which policy decided and what would permit it: the
// rules whose entries cover the change (found by internal/policy's own
// matching, so explain and the function cannot disagree), their subjects
// and conditions, whether the XR's initiator may start them, and the rule
// to add when none does. It reads objects handed to it and does no I/O;
// `kubectl kausality explain` reads the cluster.
package why

import (
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// Input is what an explanation is drawn from.
type Input struct {
	// XR is the composite whose conditions record what was withheld.
	XR *unstructured.Unstructured
	// Composed are the objects below the XR, as read: they give a withheld
	// line's kind its apiVersion, and hold pending allowances.
	Composed []report.Object
	// Kind and Name, when set, keep only what concerns that composed
	// resource (explain was asked about a managed resource).
	Kind, Name string
	// Field, when set, keeps only changes whose field it is a prefix of,
	// or which is a prefix of it.
	Field string
	// Policies are the AllowancePolicies of the cluster; those for the
	// XR's kind are used.
	Policies []v1alpha1.AllowancePolicy
	// PoliciesUnread, when set, says why the policies could not be read
	// (a user without the right to list them): the explanation then gives
	// the function's reasons alone, and no rule, remedy or suggestion that
	// would need the policies.
	PoliciesUnread string
}

// Explanation is what explain says about one XR.
type Explanation struct {
	// XR names the composite: Kind/name, and its namespace.
	XR        string `json:"xr"`
	Namespace string `json:"namespace,omitempty"`
	// Initiator is who started the XR's current change, from its trace.
	Initiator string `json:"initiator,omitempty"`
	// Policies are the AllowancePolicies for the XR's kind, highest
	// priority first.
	Policies []string `json:"policies"`
	// Frozen names who froze the XR; no gate below it opens meanwhile.
	Frozen string `json:"frozen,omitempty"`
	// Changes are the withheld changes the filters keep.
	Changes []Change `json:"changes,omitempty"`
	// Held is what propagation control holds back, as the XR's Propagated
	// condition says it: the change is permitted and waits its turn.
	Held []string `json:"held,omitempty"`
	// Pending are allowances stamped on managed resources that wait for
	// propagation control, as "Kind/name: allowance".
	Pending []string `json:"pending,omitempty"`
	// Problems are policies that do not compile: the function then
	// withholds every change.
	Problems []string `json:"problems,omitempty"`
	// PoliciesUnread says why the AllowancePolicies were not read; the
	// changes then carry no rules, remedies or suggestions.
	PoliciesUnread string `json:"policiesUnread,omitempty"`
}

// Change is one withheld change and what would permit it.
type Change struct {
	report.Withheld `json:",inline"`
	// APIVersion of the composed resource, "" when it is not known.
	APIVersion string `json:"apiVersion,omitempty"`
	// Cause classifies the reason: Allowance (no allowance covers it),
	// Upgrade (a logic change no UpgradeAllowance covers), Drift, Frozen,
	// Gate (changed since its last approval) or Other.
	Cause Cause `json:"cause"`
	// Permits are the policy entries that cover the change.
	Permits []Permit `json:"permits,omitempty"`
	// Remedy says what to do when no entry would help, or besides.
	Remedy string `json:"remedy,omitempty"`
	// Suggest is YAML to add: a rule for an AllowancePolicy, or policies
	// for an UpgradeAllowance, when nothing covers the change.
	Suggest string `json:"suggest,omitempty"`
}

// Cause is why the function withheld a change, read from its reason.
type Cause string

// Causes.
const (
	CauseAllowance Cause = "Allowance"
	CauseUpgrade   Cause = "Upgrade"
	CauseDrift     Cause = "Drift"
	CauseFrozen    Cause = "Frozen"
	CauseGate      Cause = "Gate"
	CauseUnknown   Cause = "Unknown"
	CauseOther     Cause = "Other"
)

// Permit is one policy entry that covers a change, with whether the XR's
// initiator may start its rule.
type Permit struct {
	policy.Permitting `json:",inline"`
	// Initiator says whether the XR's initiator may start the rule: Yes,
	// No, or Group when only a group subject could name them (the trace
	// does not record groups).
	Initiator string `json:"initiator,omitempty"`
}

// Initiator answers.
const (
	InitiatorYes   = "Yes"
	InitiatorNo    = "No"
	InitiatorGroup = "Group"
)

// Of explains in.
func Of(in Input) (Explanation, error) {
	if in.XR == nil {
		return Explanation{}, errors.New("no composite to explain")
	}
	xr := report.Of(in.XR, report.RoleComposite)
	e := Explanation{XR: xr.Kind + "/" + xr.Name, Namespace: xr.Namespace, Initiator: xr.Initiator, Frozen: xr.Frozen, PoliciesUnread: in.PoliciesUnread}
	set, errs := policy.NewCache().For(xr.APIVersion, xr.Kind, in.Policies)
	for _, err := range errs {
		e.Problems = append(e.Problems, err.Error())
	}
	e.Policies = set.Names()
	kinds := policy.KindsOf(in.Policies)
	for _, w := range report.ParseWithheld(xr.Withheld) {
		if !in.keeps(w.Kind, w.Name) || !fieldMatches(in.Field, w.Path) {
			continue
		}
		e.Changes = append(e.Changes, in.change(w, set, kinds, xr.Initiator))
	}
	for _, h := range splitHeld(xr.Held) {
		if in.Kind == "" || strings.Contains(h, "("+in.Kind+" "+in.Name+")") {
			e.Held = append(e.Held, h)
		}
	}
	for _, o := range in.Composed {
		if !in.keeps(o.Kind, o.Name) {
			continue
		}
		for _, p := range o.Pending {
			e.Pending = append(e.Pending, o.Kind+"/"+o.Name+": "+p)
		}
	}
	return e, nil
}

// inPhase reports whether the policy place at applies to the XR now: a
// rule always, spec.initializing while the XR is being created,
// spec.deleting while it is being deleted.
func (in Input) inPhase(at string) bool {
	switch {
	case strings.HasPrefix(at, "spec.initializing"):
		return report.Of(in.XR, report.RoleComposite).Creating
	case strings.HasPrefix(at, "spec.deleting"):
		return in.XR.GetDeletionTimestamp() != nil
	}
	return true
}

// keeps reports whether a composed resource passes the Kind/Name filter.
func (in Input) keeps(kind, name string) bool {
	return in.Kind == "" || (kind == in.Kind && name == in.Name)
}

// fieldMatches reports whether a change to path concerns field: either is
// a prefix of the other, segment-wise. An object verb (no path) concerns
// every field.
func fieldMatches(field, path string) bool {
	return field == "" || path == "" || mutation.Under(path, field) || mutation.Under(field, path)
}

// change explains one withheld line.
func (in Input) change(w report.Withheld, set policy.Set, kinds policy.Kinds, initiator string) Change {
	c := Change{Withheld: w, Cause: causeOf(w)}
	child := in.childOf(w.Kind, w.Name, kinds)
	c.APIVersion = gvString(child.APIGroup, child.APIVersion)
	if in.PoliciesUnread != "" && c.Cause != CauseDrift && c.Cause != CauseFrozen {
		// What would permit it is in the policies: saying "no rule
		// covers it" without them would be wrong.
		c.Remedy = "ask someone who may read AllowancePolicies which rule would permit it (kubectl kausality explain as a platform engineer)"
		return c
	}
	switch c.Cause {
	case CauseDrift:
		c.Remedy = "the composition wants the value it last applied and the resource was changed outside it: set spec.drift: Allow on every AllowancePolicy for the kind to let the composition correct it, or change the value back"
		return c
	case CauseFrozen:
		c.Remedy = "lift the freeze: remove the " + v1alpha1.AnnotationFreeze + " annotation of the XR (whoever set it, or a subject with mayInitiate of a policy for the kind)"
		return c
	case CauseUnknown:
		c.Remedy = "make every AllowancePolicy for the kind compile and resolve its targets (its Ready condition says what is wrong)"
		return c
	}
	ch := changeOf(w)
	for _, p := range set.Permitting(child, ch) {
		if !in.inPhase(p.At) {
			// A phase section permits only while the XR is in it:
			// offering a deleting entry for a change to a live XR would
			// send its reader the wrong way.
			continue
		}
		c.Permits = append(c.Permits, Permit{Permitting: p, Initiator: initiatorMay(set, p.Policy, initiator)})
	}
	switch {
	case c.Cause == CauseUpgrade:
		c.Remedy = "an UpgradeAllowance naming the logic change must cover it in spec.policies"
		c.Suggest = suggestUpgrade(child, ch)
	case len(c.Permits) == 0:
		c.Remedy = "no rule of the policies for the kind covers it: add one whose trigger is the XR field whose change should permit it"
		c.Suggest = suggestRule(child, ch)
	case c.Cause == CauseGate:
		c.Remedy = "the field changed since the gate last let a change through and no open allowance covers it: change the XR under one of these rules so an allowance covers it"
	default:
		c.Remedy = "change the XR field a rule triggers on, as a subject the rule's policy lets initiate, with its conditions true"
	}
	return c
}

// causeOf classifies a withheld line by its reason, as the function
// words it (internal/compose/permit.go, decide.go and, for the gate,
// gate.go).
func causeOf(w report.Withheld) Cause {
	switch r := w.Reason; {
	case strings.HasPrefix(r, "drift:"):
		return CauseDrift
	case strings.Contains(r, " is frozen by "):
		return CauseFrozen
	case strings.Contains(r, "AllowancePolicies are not known"):
		return CauseUnknown
	case strings.Contains(r, "no UpgradeAllowance"):
		return CauseUpgrade
	case w.Verb == report.VerbOpenGate && strings.Contains(r, "no open allowance covers it"):
		return CauseGate
	case strings.HasPrefix(r, "no unconsumed allowance"):
		return CauseAllowance
	}
	return CauseOther
}

// changeOf is the policy change a withheld line names.
func changeOf(w report.Withheld) policy.Change {
	switch {
	case w.Verb == report.VerbOpenGate:
		return policy.Change{Relation: v1alpha1.RelationExternal, Verb: v1alpha1.VerbAll}
	case w.Path == "":
		return policy.Change{Relation: v1alpha1.RelationControllerChild, Verb: w.Verb}
	}
	return policy.Change{Relation: v1alpha1.RelationControllerChild, Verb: v1alpha1.VerbUpdate,
		Mutation: &mutation.Mutation{Path: w.Path, Verb: v1alpha1.MutationVerb(w.Verb)}}
}

// childOf is the policy Child of a composed resource: its apiVersion from
// the objects read, else the group a policy's resolved targets record for
// the kind.
func (in Input) childOf(kind, name string, kinds policy.Kinds) policy.Child {
	for _, o := range in.Composed {
		if o.Kind == kind && o.Name == name {
			return kinds.ChildOf(o.APIVersion, kind)
		}
	}
	for _, p := range in.Policies {
		for _, t := range p.Status.Targets {
			if t.Kind == kind {
				return policy.Child{APIGroup: t.APIGroup, Kind: kind, Resource: t.Resource}
			}
		}
	}
	return kinds.ChildOf("", kind)
}

// initiatorMay says whether initiator may start a chain under the named
// policy of set.
func initiatorMay(set policy.Set, name, initiator string) string {
	if initiator == "" {
		return ""
	}
	i := slices.IndexFunc(set.Policies(), func(c *policy.Compiled) bool { return c.Name() == name })
	if i < 0 {
		return ""
	}
	p := set.Policies()[i]
	if p.MayInitiate(policy.Identity{Username: initiator}) {
		return InitiatorYes
	}
	if p.HasInitiatingGroup() {
		return InitiatorGroup
	}
	return InitiatorNo
}

// splitHeld cuts a Propagated condition's message into its lines, each
// starting "resource " or naming a freeze.
func splitHeld(msg string) []string {
	if msg == "" {
		return nil
	}
	var out []string
	for _, part := range strings.Split(msg, "; ") {
		if len(out) > 0 && !strings.HasPrefix(part, "resource ") && !strings.HasPrefix(part, "frozen by ") {
			out[len(out)-1] += "; " + part
			continue
		}
		out = append(out, part)
	}
	return out
}
