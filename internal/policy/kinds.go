package policy

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Kinds is what the API server told the provider about the resources
// policy targets name (the policies' status.targets): which kind each
// plural is. Composed resources are matched against targets through it,
// because no rule that turns a kind into a plural agrees with every CRD
// (docs/DESIGN.md §3a: a guessed plural that differs from the CRD's would
// match no target, and the kind would pass as unrestricted). The zero
// Kinds knows nothing; every plural is then guessed.
type Kinds struct {
	plural map[schema.GroupKind]string
	kind   map[schema.GroupResource]string
	// class is each resolved kind's Class, from its CRD's categories
	// (ClassOf), and ClassComposite for the kinds a policy is for that
	// the policies do not show to be managed (KindsOf).
	class map[schema.GroupKind]Class
}

// KindsOf collects the resolved targets of ps, and the kinds they are for.
//
// A kind a policy is for counts as a composite (a Claim or XR, never
// gated) unless the policies say it is a managed kind: a resolved target
// in Crossplane's managed category, or a kind an External target names.
// A policy may be for a managed kind, to let users edit it by hand; that
// kind composed by an XR is still gated. Taking it for a composite left
// every such resource composed ungated while that policy existed, so
// admission gated it closed at creation with no allowance to open it,
// and it never reached the cloud.
func KindsOf(ps []v1alpha1.AllowancePolicy) Kinds {
	k := Kinds{plural: map[schema.GroupKind]string{}, kind: map[schema.GroupResource]string{}, class: map[schema.GroupKind]Class{}}
	managed := map[schema.GroupKind]bool{}
	for i := range ps {
		for _, t := range ps[i].Status.Targets {
			if t.Kind == "" || t.Resource == "" {
				continue
			}
			gk := schema.GroupKind{Group: t.APIGroup, Kind: t.Kind}
			k.plural[gk] = t.Resource
			k.kind[schema.GroupResource{Group: t.APIGroup, Resource: t.Resource}] = t.Kind
			c := ClassOf(t.APIGroup, t.Categories, true)
			k.class[gk] = c
			if c == ClassManaged {
				managed[gk] = true
			}
		}
		visitEntries(&ps[i], func(e v1alpha1.PolicyEntry) {
			g, gok := e.Target.External["apiGroup"]
			kind, kok := e.Target.External["kind"]
			if isExternal(e) && gok && kok && g != v1alpha1.VerbAll && kind != v1alpha1.VerbAll {
				managed[schema.GroupKind{Group: g, Kind: kind}] = true
			}
		})
	}
	for i := range ps {
		f := ps[i].Spec.For
		if gk := (schema.GroupKind{Group: f.APIGroup, Kind: f.Kind}); !managed[gk] {
			k.class[gk] = ClassComposite
		}
	}
	return k
}

// ClassOf is the Class of group and kind: as its resolved target's CRD
// says, a composite when a policy is for it, else as ClassOf guesses
// from the group alone.
func (k Kinds) ClassOf(group, kind string) Class {
	if c, ok := k.class[schema.GroupKind{Group: group, Kind: kind}]; ok {
		return c
	}
	return ClassOf(group, nil, false)
}

// Plural returns the resource name of group and kind, when a policy's
// status records it.
func (k Kinds) Plural(group, kind string) (string, bool) {
	p, ok := k.plural[schema.GroupKind{Group: group, Kind: kind}]
	return p, ok
}

// ChildOf returns the Child for an object's apiVersion and kind: its
// resource as a policy's status records it, or else guessed (Guessed).
// A guess that names a resource the API server serves as another kind is
// no resource at all, so it matches only wildcard targets.
func (k Kinds) ChildOf(apiVersion, kind string) Child {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		// An apiVersion with several slashes: keep what is there so nothing
		// matches it by accident.
		gv = schema.GroupVersion{Group: apiVersion}
	}
	c := Child{APIGroup: gv.Group, APIVersion: gv.Version, Kind: kind, Class: k.ClassOf(gv.Group, kind)}
	if p, ok := k.Plural(gv.Group, kind); ok {
		c.Resource = p
		return c
	}
	plural := GuessResource(gv.WithKind(kind))
	c.Resource, c.Guessed = plural, true
	if other, ok := k.kind[schema.GroupResource{Group: gv.Group, Resource: plural}]; ok && other != kind {
		c.Resource = ""
	}
	return c
}

// ChildFor is the Child of a kind whose resource name is known, from
// discovery or an admission request.
func ChildFor(gvk schema.GroupVersionKind, resource string) Child {
	return Child{APIGroup: gvk.Group, APIVersion: gvk.Version, Kind: gvk.Kind, Resource: resource}
}

// Named is a resource a target names: an apiGroup and a plural, neither a
// wildcard.
type Named = schema.GroupResource

// TargetsOf are the resources p's targets name, each once, in the order
// they appear: the ControllerChild targets' resources and the External
// targets' resource keys. Wildcards name no resource.
func TargetsOf(p *v1alpha1.AllowancePolicy) []Named {
	var out []Named
	add := func(group, resource string) {
		if resource == "" || resource == v1alpha1.VerbAll || group == v1alpha1.VerbAll {
			return
		}
		n := Named{Group: group, Resource: resource}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	visitEntries(p, func(e v1alpha1.PolicyEntry) {
		if isExternal(e) {
			// Without an apiGroup key the target names a resource in
			// every group; there is no one CRD to resolve.
			if g, ok := e.Target.External["apiGroup"]; ok {
				add(g, e.Target.External["resource"])
			}
			return
		}
		add(e.Target.APIGroup, e.Target.Resource)
	})
	return out
}

// isExternal reports whether e's target is an external resource.
func isExternal(e v1alpha1.PolicyEntry) bool {
	return e.Relation == v1alpha1.RelationExternal || len(e.Target.External) > 0
}

// visitEntries calls fn for every entry of p: its initializing and
// deleting bounds', then each rule's.
func visitEntries(p *v1alpha1.AllowancePolicy, fn func(v1alpha1.PolicyEntry)) {
	var es []v1alpha1.PolicyEntry
	if p.Spec.Initializing != nil {
		es = append(es, p.Spec.Initializing.Policies...)
	}
	if p.Spec.Deleting != nil {
		es = append(es, p.Spec.Deleting.Policies...)
	}
	for _, r := range p.Spec.Rules {
		es = append(es, r.Policies...)
	}
	for _, e := range es {
		fn(e)
	}
}

// Unresolved are the resources p's targets name that its status does not
// record as resolved.
func Unresolved(p *v1alpha1.AllowancePolicy) []Named {
	return slices.DeleteFunc(TargetsOf(p), func(n Named) bool {
		return slices.ContainsFunc(p.Status.Targets, func(t v1alpha1.ResolvedTarget) bool {
			return t.Kind != "" && t.APIGroup == n.Group && t.Resource == n.Resource
		})
	})
}
