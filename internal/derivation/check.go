package derivation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	yaml "go.yaml.in/yaml/v3"
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
	// Field is the XR field: the patch's source (its fromFieldPath, or a
	// Combine's variable) or the rule's trigger.
	Field string
	// Composition, Resource and To locate an Uncovered patch: the
	// Composition, the resource's name in it and the patch's toFieldPath.
	Composition, Resource, To string
	// Message says what is missing, for people.
	Message string
	// Add are the entries a rule triggered by Field needs for an
	// Uncovered patch to be covered: what derive writes for the patch.
	Add []v1alpha1.PolicyEntry
}

// String is the finding on one line, with what to add.
func (f Finding) String() string {
	at := f.XR
	if f.Policy != "" {
		at = "AllowancePolicy " + f.Policy
	}
	s := fmt.Sprintf("%s %s: %s: %s", f.Kind, at, f.Field, f.Message)
	if len(f.Add) == 0 {
		return s
	}
	entries := make([]string, 0, len(f.Add))
	for _, pe := range f.Add {
		entries = append(entries, flowYAML(pe))
	}
	return fmt.Sprintf("%s; add to the policies of the rule with trigger %s (a new rule if there is none): %s", s, f.Field, strings.Join(entries, ", "))
}

// flowYAML is v on one line, as policies are written by hand.
func flowYAML(v any) string {
	j, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(j, &n); err != nil || len(n.Content) == 0 {
		return string(j)
	}
	top := n.Content[0]
	plain(top)
	oneLine(top)
	b, err := yaml.Marshal(top)
	if err != nil {
		return string(j)
	}
	return strings.TrimSpace(string(b))
}

// oneLine writes n and everything below it in flow style.
func oneLine(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
	}
	for _, c := range n.Content {
		oneLine(c)
	}
}

// Report is what Check found.
type Report struct {
	// Findings are the gaps, sorted.
	Findings []Finding
	// Notes say what Check could not see, such as steps it cannot read.
	Notes []string
}

// edge is a flow's source, resolved to the composed kind it reaches, and
// the Composition it is in.
type edge struct {
	from        string
	flow        Flow
	child       policy.Child
	composition string
	// flows are the Composition's flows, which tell what else its
	// patches write next to this one.
	flows []Flow
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
		rep.Findings = append(rep.Findings, uncovered(name, edges, mine, set, xrSchema(r, xr))...)
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
	rep.Findings = slices.CompactFunc(rep.Findings, func(a, b Finding) bool { return a.String() == b.String() })
	return rep, nil
}

// A SchemaResolver is a Resolver that also knows XR kinds' schemas from
// their XRDs, so that Check suggests the mutation verbs derive would
// write for an uncovered patch.
type SchemaResolver interface {
	Resolver
	// Schema is the kind's schema, nil when no XRD gives one.
	Schema(gvk schema.GroupVersionKind) *Schema
}

// xrSchema is the XR's schema if r knows it.
func xrSchema(r Resolver, xr schema.GroupVersionKind) *Schema {
	if sr, ok := r.(SchemaResolver); ok && sr != nil {
		return sr.Schema(xr)
	}
	return nil
}

// edgesOf are the model's flows from the XR's spec into fields the
// function compares, one per source field.
func edgesOf(m *Model, r Resolver) ([]edge, error) {
	var out []edge
	for _, f := range m.Flows {
		k, err := resolveOne(f.Template.GVK, r, nil)
		if err != nil {
			return nil, errors.Wrapf(err, "Composition %s resource %s", m.Name, f.Template.Name)
		}
		c := policy.Child{APIGroup: f.Template.GVK.Group, APIVersion: f.Template.GVK.Version, Kind: f.Template.GVK.Kind, Resource: k.Resource, Class: k.Class}
		if ok, _ := compared(f, k.Class); !ok {
			continue // nothing withholds a change of it: derive notes it
		}
		for _, from := range f.From {
			if root(from) == "spec" {
				out = append(out, edge{from: from, flow: f, child: c, composition: m.Name, flows: m.Flows})
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

// uncovered are the edges no rule of ps covers: a change of the XR field
// is withheld from the composed field, or kept from its cloud resource.
// Each says where the patch is and what to add: the entries derive writes
// for it, with the mutation verbs the XR's schema (nil: none) tells.
func uncovered(xr string, edges []edge, ps []v1alpha1.AllowancePolicy, set policy.Set, s *Schema) []Finding {
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
		if child && external {
			continue
		}
		f := Finding{Kind: FindingUncovered, XR: xr, Field: e.from, Composition: e.composition, Resource: e.flow.Template.Name, To: e.flow.To}
		k := kindOf{gvk: e.flow.Template.GVK, Kind: Kind{Resource: e.child.Resource, Class: e.child.Class}}
		var missing []string
		if !child {
			missing = append(missing, fmt.Sprintf("mutate %s %s", e.child.Resource, e.flow.To))
			f.Add = append(f.Add, v1alpha1.PolicyEntry{Target: childTarget(k), Relation: v1alpha1.RelationControllerChild,
				Verbs: []string{v1alpha1.VerbUpdate}, Mutations: boundsOf(e.flow, e.flows, s)})
		}
		if !external {
			missing = append(missing, fmt.Sprintf("reach the external resource of %s", e.child.Kind))
			f.Add = append(f.Add, externalEntry(k, v1alpha1.VerbUpdate))
		}
		f.Message = fmt.Sprintf("Composition %s, resource %s (%s): %s: no rule lets a change of %s %s",
			e.composition, e.flow.Template.Name, e.child.Kind, patchOf(e.flow), e.from, strings.Join(missing, " nor "))
		out = append(out, f)
	}
	return out
}

// patchOf names the flow as the Composition states it: its type, source
// fields and toFieldPath.
func patchOf(f Flow) string {
	what := "the " + f.Type + " patch"
	switch f.Type {
	case flowExperiment:
		what = "the change a render experiment saw"
	case flowReference:
		what = "the reference"
	}
	s := fmt.Sprintf("%s from %s to %s", what, strings.Join(f.From, " + "), f.To)
	if f.Via != "" {
		s += fmt.Sprintf(" through the environment's %s", f.Via)
	}
	if f.PatchSet != "" {
		s += fmt.Sprintf(" (patch set %s)", f.PatchSet)
	}
	return s
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
