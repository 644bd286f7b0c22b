package policy

import (
	"slices"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// Child identifies the kind of a composed resource, as policy targets name
// it.
type Child struct {
	APIGroup   string
	APIVersion string
	Kind       string
	// Resource is the lower-case plural, as the API server serves the kind
	// when known (Kinds), else guessed (GuessResource).
	Resource string
	// Guessed says Resource is a guess: no policy's status records the
	// kind. Such a kind counts as restricted wherever a target of its
	// apiGroup is unresolved, since that target may name it.
	Guessed bool
	// Class says whether the kind has a gate: only a managed resource
	// does. A Claim or XR (a policy is for it, or its CRD says so) is a
	// nested composite whose changes chain through admission on it; any
	// other kind has no managementPolicies, and only the function's
	// withholding keeps an uncaused change from it.
	Class Class
}

// MatchesChild reports whether a ControllerChild target names the child's
// kind. An empty apiVersion matches every version; "*" matches anything; an
// empty apiGroup is the core group.
func MatchesChild(t v1alpha1.Target, c Child) bool {
	if len(t.External) > 0 || t.Resource == "" {
		return false
	}
	return (t.APIGroup == "*" || t.APIGroup == c.APIGroup) &&
		(t.APIVersion == "" || t.APIVersion == "*" || t.APIVersion == c.APIVersion) &&
		(t.Resource == "*" || t.Resource == c.Resource)
}

// externalKeys are the keys of target.external that Kausality matches
// against a managed resource; other keys (provider, ...) only describe.
var externalKeys = []string{"apiGroup", "kind", "resource"}

// MatchesExternal reports whether an External target names the managed
// resource's external resource: each of the keys apiGroup, kind and resource
// present in target.external must equal the child's ("*" matches anything).
// A target with none of those keys matches nothing; policy validation
// rejects it.
func MatchesExternal(t v1alpha1.Target, c Child) bool {
	n := 0
	for _, k := range externalKeys {
		v, ok := t.External[k]
		if !ok {
			continue
		}
		n++
		var have string
		switch k {
		case "apiGroup":
			have = c.APIGroup
		case "kind":
			have = c.Kind
		default:
			have = c.Resource
		}
		if v != "*" && v != have {
			return false
		}
	}
	return n > 0
}

// Shippable are the mutations of ms that a composed resource of kind c may
// ship to its cloud resource under an External allowance whose chain
// carries the composite allowances chain: those a ControllerChild
// allowance of chain for c covers (one without mutations covers all). When
// chain holds none for c (the kind is not restricted as a composed
// resource) ms is returned whole. The function names what an External
// allowance ships by it, and admission checks Crossplane's writes by it, so
// a pipeline step after Kausality cannot name a field no allowance let
// through.
func Shippable(chain []allowance.Allowance, c Child, ms []mutation.Mutation) []mutation.Mutation {
	return ChildBoundsOf(chain, c).Shippable(ms)
}

// ChildBounds are the bounds the ControllerChild allowances of a chain
// that name a child put on what ships to it (Shippable), compiled once:
// the function asks them of every composed resource of that kind under the
// same XR allowance. Nil bounds nothing. Read it, do not write it.
type ChildBounds []mutation.Bounds

// ChildBoundsOf compiles the ChildBounds of chain for c.
func ChildBoundsOf(chain []allowance.Allowance, c Child) ChildBounds {
	var bounds ChildBounds
	for _, a := range chain {
		if a.Relation != v1alpha1.RelationControllerChild || !MatchesChild(a.Target, c) {
			continue
		}
		if len(a.Mutations) == 0 {
			return nil
		}
		bounds = append(bounds, mutation.BoundsOf(a.Mutations))
	}
	return bounds
}

// Shippable is the package's Shippable for the chain and child b was
// compiled from.
func (b ChildBounds) Shippable(ms []mutation.Mutation) []mutation.Mutation {
	if len(b) == 0 {
		return ms
	}
	return slices.DeleteFunc(slices.Clone(ms), func(m mutation.Mutation) bool {
		return !slices.ContainsFunc(b, func(bd mutation.Bounds) bool { return bd.Covers(m) })
	})
}

// Names reports whether p's own data names child: its kind (spec.for) or a
// target of any of its entries, as a composed resource or as the external
// resource behind one. It reads no CEL, so it answers for a policy that
// does not compile too.
func Names(p *v1alpha1.AllowancePolicy, child Child) bool {
	f := p.Spec.For
	if f.APIGroup == child.APIGroup && f.Kind == child.Kind {
		return true
	}
	var entries []v1alpha1.PolicyEntry
	if p.Spec.Initializing != nil {
		entries = append(entries, p.Spec.Initializing.Policies...)
	}
	if p.Spec.Deleting != nil {
		entries = append(entries, p.Spec.Deleting.Policies...)
	}
	for _, r := range p.Spec.Rules {
		entries = append(entries, r.Policies...)
	}
	return slices.ContainsFunc(entries, func(e v1alpha1.PolicyEntry) bool {
		return MatchesChild(e.Target, child) || MatchesExternal(e.Target, child)
	})
}
