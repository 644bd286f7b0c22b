package why

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// placeholderTrigger stands for the XR field a suggested rule triggers on:
// only the platform engineer knows which field's change should permit the
// withheld one.
const placeholderTrigger = "spec.CHANGE-ME"

// Text is the explanation as a person reads it.
func (e Explanation) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", e.XR)
	if e.Namespace != "" {
		fmt.Fprintf(&b, " in namespace %s", e.Namespace)
	}
	if e.Initiator != "" {
		fmt.Fprintf(&b, ", current change started by %s", e.Initiator)
	}
	b.WriteString("\n")
	if e.PoliciesUnread != "" {
		fmt.Fprintf(&b, "AllowancePolicies for its kind: not read (%s): the rules that would permit a change are not listed\n", e.PoliciesUnread)
	} else {
		fmt.Fprintf(&b, "AllowancePolicies for its kind: %s\n", orNone(strings.Join(e.Policies, ", ")))
	}
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "Problem: %s\n", p)
	}
	if e.Frozen != "" {
		fmt.Fprintf(&b, "Frozen by %s: no gate below it opens until the %s annotation is removed.\n", e.Frozen, v1alpha1.AnnotationFreeze)
	}
	for _, c := range e.Changes {
		b.WriteString("\n")
		c.text(&b)
	}
	if len(e.Held) > 0 {
		b.WriteString("\nHeld by propagation control (permitted; released when its batch's turn or window comes):\n")
		for _, h := range e.Held {
			fmt.Fprintf(&b, "  %s\n", h)
		}
	}
	if len(e.Pending) > 0 {
		b.WriteString("\nPending allowances (permitted; waiting for propagation control):\n")
		for _, p := range e.Pending {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	if len(e.Changes) == 0 && len(e.Held) == 0 && len(e.Pending) == 0 && e.Frozen == "" {
		b.WriteString("\nNothing is withheld, held or pending.\n")
	}
	return b.String()
}

func (c Change) text(b *strings.Builder) {
	what := c.Verb
	if c.Path != "" {
		what += " " + c.Path
	}
	mode := "Withheld"
	switch {
	case c.LogOnly && c.Audit:
		mode = "Would be withheld (Audit mode let it through)"
	case c.LogOnly:
		mode = "Would be withheld (Log mode let it through)"
	}
	fmt.Fprintf(b, "%s: %s of %s/%s (resource %s)\n", mode, what, c.Kind, c.Name, c.Resource)
	fmt.Fprintf(b, "  Decided: %s\n", c.Reason)
	if len(c.Permits) > 0 {
		b.WriteString("  Would permit it:\n")
		for _, p := range c.Permits {
			p.text(b)
		}
	}
	if c.Remedy != "" {
		fmt.Fprintf(b, "  To do: %s\n", c.Remedy)
	}
	if c.Suggest != "" {
		b.WriteString("  Suggested:\n")
		for _, l := range strings.Split(strings.TrimRight(c.Suggest, "\n"), "\n") {
			fmt.Fprintf(b, "    %s\n", l)
		}
	}
}

func (p Permit) text(b *strings.Builder) {
	fmt.Fprintf(b, "    AllowancePolicy %s %s\n", p.Policy, p.At)
	if p.Rule != nil {
		fmt.Fprintf(b, "      trigger: %s\n", p.Rule.Trigger)
		for _, c := range p.Rule.Conditions {
			fmt.Fprintf(b, "      condition: %s\n", c)
		}
	} else {
		b.WriteString("      while the XR is in this phase\n")
	}
	if p.Entry == nil {
		b.WriteString("      a rule without policies permits everything\n")
	}
	subs := make([]string, 0, len(p.Subjects))
	for _, s := range p.Subjects {
		subs = append(subs, subject(s))
	}
	fmt.Fprintf(b, "      subjects: %s\n", orValue(strings.Join(subs, ", "), "none (everyone may initiate)"))
	switch p.Initiator {
	case InitiatorYes:
		b.WriteString("      the XR's initiator may start it\n")
	case InitiatorNo:
		b.WriteString("      the XR's initiator is not a subject with mayInitiate\n")
	case InitiatorGroup:
		b.WriteString("      the XR's initiator may start it only through a group subject (groups are not in the trace)\n")
	}
}

// subject reads as RBAC writes one: User alice, ServiceAccount ns/name.
func subject(s v1alpha1.Subject) string {
	n := s.Name
	if s.Namespace != "" {
		n = s.Namespace + "/" + n
	}
	out := string(s.Kind) + " " + n
	if s.MayInitiate {
		out += " (mayInitiate)"
	}
	return out
}

func orNone(s string) string { return orValue(s, "none") }

func orValue(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// entryFor is the narrowest policy entry that covers ch on c.
func entryFor(c policy.Child, ch policy.Change) v1alpha1.PolicyEntry {
	if ch.Relation == v1alpha1.RelationExternal {
		ext := map[string]string{"kind": c.Kind}
		if c.APIGroup != "" {
			ext["apiGroup"] = c.APIGroup
		}
		return v1alpha1.PolicyEntry{Target: v1alpha1.Target{External: ext}, Relation: v1alpha1.RelationExternal, Verbs: []string{v1alpha1.VerbUpdate}}
	}
	e := v1alpha1.PolicyEntry{Target: v1alpha1.Target{APIGroup: c.APIGroup, Resource: c.Resource}, Verbs: []string{ch.Verb}}
	if ch.Mutation != nil {
		e.Mutations = []v1alpha1.MutationBound{{JSONPath: ch.Mutation.Path, Verbs: []v1alpha1.MutationVerb{ch.Mutation.Verb}}}
	}
	return e
}

// suggestRule is an AllowancePolicy rule that would permit ch on c.
func suggestRule(c policy.Child, ch policy.Change) string {
	// Written by hand around the entry so the trigger comes first, as
	// people write rules; YAML from JSON would sort it last.
	entries := strings.TrimRight(marshal([]v1alpha1.PolicyEntry{entryFor(c, ch)}), "\n")
	return "# in the AllowancePolicy for the XR's kind, spec.rules:\n" +
		"- trigger: " + placeholderTrigger + " # the XR field whose change should permit this\n" +
		"  policies:\n  " + strings.ReplaceAll(entries, "\n", "\n  ") + "\n"
}

// suggestUpgrade is the spec.policies of an UpgradeAllowance that would
// let ch on c through.
func suggestUpgrade(c policy.Child, ch policy.Change) string {
	ps := []v1alpha1.PolicyEntry{entryFor(c, ch)}
	return "# in an UpgradeAllowance naming the logic change, spec.policies:\n" + marshal(ps)
}

func marshal(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		// The values are plain API types; this cannot fail.
		return fmt.Sprintf("# cannot render: %v\n", err)
	}
	return string(b)
}

// gvString is the apiVersion of a group and version, "" without a version.
func gvString(group, version string) string {
	if version == "" {
		return ""
	}
	return schema.GroupVersion{Group: group, Version: version}.String()
}
