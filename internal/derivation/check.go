package derivation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// FindingKind says what kind of gap a Finding is.
type FindingKind string

// Finding kinds.
const (
	// FindingNoPolicy: no AllowancePolicy is for the composite kind, so
	// nothing a change of it does below is bounded.
	FindingNoPolicy FindingKind = "NoPolicy"
	// FindingUncovered: a patch no rule covers; the change it carries is
	// withheld.
	FindingUncovered FindingKind = "Uncovered"
	// FindingUnused: a rule, or a part of one, no patch uses; it permits
	// more than the Compositions do.
	FindingUnused FindingKind = "Unused"
	// FindingUnrestricted: a managed kind the Composition composes that no
	// policy for the composite restricts: a change of it, a Composition
	// edit included, reaches the cloud without a cause.
	FindingUnrestricted FindingKind = "Unrestricted"
)

// Finding is one gap between Compositions and policies.
type Finding struct {
	Kind FindingKind
	// XR is the composite kind, Kind.group.
	XR string
	// Policy names the policy of an Unused finding.
	Policy string
	// Field is the XR field: the patch's source or the rule's trigger.
	Field string
	// Message says what is missing, for people.
	Message string
}

// String is the finding on one line.
func (f Finding) String() string {
	at := f.XR
	if f.Policy != "" {
		at = "AllowancePolicy " + f.Policy
	}
	return fmt.Sprintf("%s %s: %s: %s", f.Kind, at, f.Field, f.Message)
}

// Report is what Check found.
type Report struct {
	// Findings are the gaps, sorted.
	Findings []Finding
	// Notes say what Check could not see, such as steps it cannot read.
	Notes []string
}

// edge is a flow's source, resolved to the composed kind it reaches.
type edge struct {
	from  string
	flow  Flow
	child policy.Child
}

// Check compares Compositions with AllowancePolicies: the patches from an
// XR's spec that no rule of the policies for its kind covers (the change
// is withheld), and the rules and rule entries that no patch of any of the
// kind's Compositions uses (they permit more than the patches need).
// Policies for kinds no Composition composes, such as Claims, are ignored.
func Check(models []*Model, policies []v1alpha1.AllowancePolicy, r Resolver) (*Report, error) {
	rep := &Report{}
	byXR := map[schema.GroupVersionKind][]*Model{}
	var xrs []schema.GroupVersionKind
	for _, m := range models {
		if _, ok := byXR[m.XR]; !ok {
			xrs = append(xrs, m.XR)
		}
		byXR[m.XR] = append(byXR[m.XR], m)
		for _, n := range m.Notes {
			rep.Notes = append(rep.Notes, fmt.Sprintf("Composition %s: %s", m.Name, n))
		}
	}
	for _, xr := range xrs {
		var edges []edge
		for _, m := range byXR[xr] {
			es, err := edgesOf(m, r)
			if err != nil {
				return nil, err
			}
			edges = append(edges, es...)
		}
		// The policies admission and the function apply to this version
		// of the kind: a policy for another version bounds nothing here.
		var mine []v1alpha1.AllowancePolicy
		for _, p := range policies {
			if f := p.Spec.For; f.APIGroup == xr.Group && f.Kind == xr.Kind && (f.APIVersion == "" || f.APIVersion == xr.Version) {
				mine = append(mine, p)
			}
		}
		name := xr.GroupKind().String()
		if len(mine) == 0 {
			rep.Findings = append(rep.Findings, Finding{Kind: FindingNoPolicy, XR: name, Field: "*",
				Message: fmt.Sprintf("no AllowancePolicy is for %s: what a change of it does below is not bounded", xr.GroupVersion())})
			continue
		}
		for i := range mine {
			if _, err := policy.Compile(&mine[i]); err != nil {
				return nil, errors.Wrapf(err, "cannot check %s", name)
			}
		}
		set, _ := policy.NewCache().For(xr.GroupVersion().String(), xr.Kind, mine)
		rep.Findings = append(rep.Findings, uncovered(name, edges, mine, set)...)
		rep.Findings = append(rep.Findings, unused(edges, mine)...)
		found, err := unrestricted(name, byXR[xr], set, r)
		if err != nil {
			return nil, err
		}
		rep.Findings = append(rep.Findings, found...)
	}
	slices.SortStableFunc(rep.Findings, func(a, b Finding) int {
		return strings.Compare(a.String(), b.String())
	})
	rep.Findings = slices.Compact(rep.Findings)
	return rep, nil
}

// edgesOf are the model's flows from the XR's spec, one per source field.
func edgesOf(m *Model, r Resolver) ([]edge, error) {
	var out []edge
	for _, f := range m.Flows {
		k, err := resolveOne(f.Template.GVK, r, nil)
		if err != nil {
			return nil, errors.Wrapf(err, "Composition %s resource %s", m.Name, f.Template.Name)
		}
		c := policy.Child{APIGroup: f.Template.GVK.Group, APIVersion: f.Template.GVK.Version, Kind: f.Template.GVK.Kind, Resource: k.Resource, Class: k.Class}
		for _, from := range f.From {
			if root(from) == "spec" {
				out = append(out, edge{from: from, flow: f, child: c})
			}
		}
	}
	return out, nil
}

// triggers are the rules of ps whose trigger a change of from hits.
func triggers(ps []v1alpha1.AllowancePolicy, from string) []v1alpha1.Rule {
	var out []v1alpha1.Rule
	for _, p := range ps {
		for _, rl := range p.Spec.Rules {
			if t, err := mutation.ParsePattern(rl.Trigger); err == nil && t.Overlaps(from) {
				out = append(out, rl)
			}
		}
	}
	return out
}

func uncovered(xr string, edges []edge, ps []v1alpha1.AllowancePolicy, set policy.Set) []Finding {
	var out []Finding
	for _, e := range edges {
		rs := triggers(ps, e.from)
		m := mutation.Mutation{Path: e.flow.To, Verb: v1alpha1.MutationMutate}
		child := !set.Restricts(e.child) || slices.ContainsFunc(rs, func(rl v1alpha1.Rule) bool {
			return len(rl.Policies) == 0 || slices.ContainsFunc(rl.Policies, func(pe v1alpha1.PolicyEntry) bool {
				return !isExternal(pe) && policy.MatchesChild(pe.Target, e.child) && v1alpha1.GrantsVerb(pe.Verbs, v1alpha1.VerbUpdate) &&
					(len(pe.Mutations) == 0 || mutation.CoveredBy(m, pe.Mutations))
			})
		})
		external := !e.child.Class.Gated() || !set.RestrictsExternal(e.child) || slices.ContainsFunc(rs, func(rl v1alpha1.Rule) bool {
			return len(rl.Policies) == 0 || slices.ContainsFunc(rl.Policies, func(pe v1alpha1.PolicyEntry) bool {
				return isExternal(pe) && policy.MatchesExternal(pe.Target, e.child) && len(pe.Verbs) > 0
			})
		})
		f := Finding{Kind: FindingUncovered, XR: xr, Field: e.from}
		switch {
		case !child:
			f.Message = fmt.Sprintf("no rule lets a change of it mutate %s %s (%s)", e.child.Resource, e.flow.To, Describe(e.flow))
		case !external:
			f.Message = fmt.Sprintf("no rule lets a change of it reach the external resource of %s (%s)", e.child.Kind, Describe(e.flow))
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

func unused(edges []edge, ps []v1alpha1.AllowancePolicy) []Finding {
	var out []Finding
	for _, p := range ps {
		for i, rl := range p.Spec.Rules {
			f := Finding{Kind: FindingUnused, XR: p.Spec.For.Kind + "." + p.Spec.For.APIGroup, Policy: p.GetName(), Field: rl.Trigger}
			t, err := mutation.ParsePattern(rl.Trigger)
			if err != nil {
				continue // Compile reported it
			}
			var hit []edge
			for _, e := range edges {
				if t.Overlaps(e.from) {
					hit = append(hit, e)
				}
			}
			if len(hit) == 0 {
				f.Message = fmt.Sprintf("spec.rules[%d]: no patch reads it", i)
				out = append(out, f)
				continue
			}
			for j, pe := range rl.Policies {
				for _, msg := range unusedParts(pe, hit) {
					f.Message = fmt.Sprintf("spec.rules[%d].policies[%d]: %s", i, j, msg)
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// unusedParts says what of the entry no patch hit by its rule uses.
func unusedParts(pe v1alpha1.PolicyEntry, hit []edge) []string {
	if isExternal(pe) {
		if !slices.ContainsFunc(hit, func(e edge) bool { return e.child.Class.Gated() && policy.MatchesExternal(pe.Target, e.child) }) {
			return []string{fmt.Sprintf("grants %v on external %v, which no patch from the trigger reaches", pe.Verbs, pe.Target.External)}
		}
		return nil
	}
	var to []edge
	for _, e := range hit {
		if policy.MatchesChild(pe.Target, e.child) {
			to = append(to, e)
		}
	}
	if len(to) == 0 {
		return []string{fmt.Sprintf("grants %v on %s, which no patch from the trigger writes", pe.Verbs, pe.Target.Resource)}
	}
	var out []string
	for _, b := range pe.Mutations {
		if !slices.ContainsFunc(to, func(e edge) bool {
			return mutation.CoveredBy(mutation.Mutation{Path: e.flow.To, Verb: v1alpha1.MutationMutate}, []v1alpha1.MutationBound{{JSONPath: b.JSONPath, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationAll}}})
		}) {
			out = append(out, fmt.Sprintf("grants %s %s, which no patch from the trigger writes", pe.Target.Resource, b.JSONPath))
		}
	}
	return out
}

func isExternal(pe v1alpha1.PolicyEntry) bool {
	return pe.Relation == v1alpha1.RelationExternal || len(pe.Target.External) > 0
}

// unrestricted are the managed kinds the models compose that set restricts
// neither as composed resources nor in the cloud: nothing Kausality
// decides bounds them. Kinds without an external resource are left out.
func unrestricted(xr string, models []*Model, set policy.Set, r Resolver) ([]Finding, error) {
	var out []Finding
	seen := map[schema.GroupVersionKind]bool{}
	for _, m := range models {
		for _, t := range m.Templates {
			if seen[t.GVK] {
				continue
			}
			seen[t.GVK] = true
			k, err := resolveOne(t.GVK, r, nil)
			if err != nil {
				return nil, errors.Wrapf(err, "Composition %s resource %s", m.Name, t.Name)
			}
			c := policy.Child{APIGroup: t.GVK.Group, APIVersion: t.GVK.Version, Kind: t.GVK.Kind, Resource: k.Resource, Class: k.Class}
			if !c.Class.Gated() || set.Restricts(c) || set.RestrictsExternal(c) {
				continue
			}
			out = append(out, Finding{Kind: FindingUnrestricted, XR: xr, Field: t.GVK.GroupKind().String(),
				Message: fmt.Sprintf("Composition %s composes %s (resource %s), a managed kind no policy for %s restricts: its changes, a Composition edit's included, reach the cloud without a cause", m.Name, t.GVK.Kind, t.Name, xr)})
		}
	}
	return out, nil
}
