package policy

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Class is what a composed kind is to Kausality: whether it has an
// external resource behind a gate (docs/DESIGN.md §4). The function, the
// derivation, the policy check and the provider's target resolution all
// classify a kind here, so they never disagree about which kinds get a
// gate.
type Class uint8

const (
	// ClassManaged is a managed resource: its spec.managementPolicies is
	// the gate to its cloud resource. It is the zero Class because a kind
	// nothing is known about is gated: a gate the API server refuses keeps
	// the resource from being composed (stuck, and reported), while a
	// managed resource left ungated would let hand edits reach the cloud.
	ClassManaged Class = iota
	// ClassComposite is a Claim or XR: a nested composite. Its changes
	// chain through admission on it and its own pipeline.
	ClassComposite
	// ClassUnmanaged is any other kind Crossplane v2 composes: Kubernetes'
	// own kinds (Deployments, Services, Secrets), ProviderConfigs, another
	// controller's custom resources. It has no managementPolicies to gate,
	// so the function withholds an uncaused change by keeping the observed
	// object, as for a composite.
	ClassUnmanaged
)

// Gated reports whether a kind of class c gets a gate.
func (c Class) Gated() bool { return c == ClassManaged }

// String names the class as the CLI and the docs do.
func (c Class) String() string {
	switch c {
	case ClassComposite:
		return "composite"
	case ClassUnmanaged:
		return "unmanaged"
	}
	return "managed"
}

// Crossplane's CRD categories: composites and Claims, and managed
// resources (crossplane-runtime's generated CRDs all carry "managed").
var (
	compositeCategories = []string{"composite", "claim"}
	categoryManaged     = "managed"
)

// ClassOf classifies a kind of group. defined says the API server (or a
// CRD file) was asked about it: categories are then its CRD's, none for
// a kind served without a CRD. A kind nobody was asked about is managed
// unless its group is one of Kubernetes' own (BuiltIn).
func ClassOf(group string, categories []string, defined bool) Class {
	switch {
	case slices.ContainsFunc(categories, func(c string) bool { return slices.Contains(compositeCategories, c) }):
		return ClassComposite
	case slices.Contains(categories, categoryManaged):
		return ClassManaged
	case defined || BuiltIn(group):
		return ClassUnmanaged
	}
	return ClassManaged
}

// BuiltIn reports whether group is one of Kubernetes' own API groups: the
// core group, a group without a dot (apps, batch, autoscaling, policy)
// or one under k8s.io. No managed resource is served in them.
func BuiltIn(group string) bool {
	return group == "" || !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}

// GuessResource is the plural a kind's CRD most likely has, for a kind no
// policy's status or CRD tells: Kubernetes' own guess
// (meta.UnsafeGuessKindToResource), except that a kind ending in a vowel
// and "y" takes an "s" (InternetGateway: internetgateways, as
// controller-gen's pluralizer gives it, not internetgatewaies). It stays
// a guess: App Mesh's Mesh is served as meshes.
func GuessResource(gvk schema.GroupVersionKind) string {
	k := strings.ToLower(gvk.Kind)
	if n := len(k); n > 1 && k[n-1] == 'y' && strings.ContainsRune("aeiou", rune(k[n-2])) {
		return k + "s"
	}
	p, _ := meta.UnsafeGuessKindToResource(gvk)
	return p.Resource
}

// Body is the part of a composed object the pipeline decides and
// Kausality compares: its top level without apiVersion, kind, metadata
// and status. For a managed resource that is its spec; a kind without a
// gate may hold other fields (a Secret's data, a Role's rules). The
// function compares, records and withholds it, and a render experiment
// derives rules from it, so neither sees a change the other does not.
func Body(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			out[k] = v
		}
	}
	return out
}

// IsClaim reports whether obj is a Claim, by its shape: it points at its
// composite (spec.resourceRef), which no composite does.
func IsClaim(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	_, ok := spec["resourceRef"].(map[string]any)
	return ok
}

// IsComposite reports whether obj, not a Claim, is a composite, by the
// fields Crossplane gives every XR (spec.crossplane in v2; a composition
// reference, selector or revision reference in the legacy shape), for when
// no policy tells.
func IsComposite(obj map[string]any) bool {
	if IsClaim(obj) {
		return false
	}
	spec, _ := obj["spec"].(map[string]any)
	for _, f := range []string{"crossplane", "compositionRef", "compositionSelector", "compositionRevisionRef"} {
		if _, ok := spec[f]; ok {
			return true
		}
	}
	return false
}
