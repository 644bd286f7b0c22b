package policy

// What a user's write is watched for beyond the triggers of the rules:
// the fields that choose what composes an object, and the metadata in
// Crossplane's domain (docs/FIELDS.md, "Rule").

import (
	"maps"
	"slices"
	"strings"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// CompositionSelection are the fields of Claims and XRs, legacy and modern,
// that choose what composes them. Pointing an object at a Composition or
// revision without the kausality step would un-gate everything below it
// (DESIGN §4a), so a user's change of one is a watched change like any
// other, whether or not a rule's trigger names it.
var CompositionSelection = []string{
	"spec.compositionRef", "spec.compositionRevisionRef", "spec.compositionSelector",
	"spec.compositionRevisionSelector", "spec.compositionUpdatePolicy",
	"spec.crossplane.compositionRef", "spec.crossplane.compositionRevisionRef", "spec.crossplane.compositionSelector",
	"spec.crossplane.compositionRevisionSelector", "spec.crossplane.compositionUpdatePolicy",
}

func selection(path string) bool {
	return slices.ContainsFunc(CompositionSelection, func(f string) bool { return mutation.Under(path, f) })
}

// UserMetadata are the keys in Crossplane's domain that anyone may set on
// a Claim, a composite or a managed resource: they only stop Crossplane or
// a provider (crossplane.io/paused) or time its next reconcile
// (docs/FIELDS.md, rows C8, X11, X16, M6, M7).
var UserMetadata = []string{"crossplane.io/paused", "crossplane.io/poll-interval", "crossplane.io/reconcile-requested-at"}

// crossplaneKey reports whether an annotation or label key is in
// Crossplane's domain (crossplane.io, or a subdomain of it) and not one of
// UserMetadata: Crossplane or a provider may act on it, today or in a
// later release.
func crossplaneKey(k string) bool {
	domain, _, ok := strings.Cut(k, "/")
	if !ok || slices.Contains(UserMetadata, k) {
		return false
	}
	return domain == "crossplane.io" || strings.HasSuffix(domain, ".crossplane.io")
}

// CrossplaneMetadata are the changes of obj's annotations and labels in
// Crossplane's domain since old (nil: created), UserMetadata aside, as
// mutations of metadata.annotations[key] and metadata.labels[key]. A
// field nobody has shown harmless is not harmless: a user's change of one
// is a watched change, which a rule whose trigger names it may permit
// (docs/FIELDS.md, "Rule").
func CrossplaneMetadata(old, obj map[string]any) []mutation.Mutation {
	var out []mutation.Mutation
	for _, field := range []string{"annotations", "labels"} {
		was, now := crossplaneOnly(old, field), crossplaneOnly(obj, field)
		if len(was) == 0 && len(now) == 0 {
			continue
		}
		prefix := "metadata." + field
		out = append(out, mutation.Diff(prefix, was, now)...)
		// Diff reads a key the write leaves out as nothing wanted, as
		// server-side apply does; for metadata a removed key is a change.
		for _, k := range slices.Sorted(maps.Keys(was)) {
			if _, ok := now[k]; ok {
				continue
			}
			for _, m := range mutation.Diff(prefix, map[string]any{}, map[string]any{k: was[k]}) {
				m.Verb = v1alpha1.MutationDelete
				out = append(out, m)
			}
		}
	}
	return out
}

// crossplaneOnly is obj's metadata.<field> restricted to crossplaneKey
// keys (empty, never nil: Diff reads an absent map as nothing wanted).
func crossplaneOnly(obj map[string]any, field string) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	m, _ := md[field].(map[string]any)
	out := map[string]any{}
	for k, v := range m {
		if crossplaneKey(k) {
			out[k] = v
		}
	}
	return out
}

// ReasonCrossplaneMetadata is why a user's change of a key in Crossplane's
// domain that no rule permits is a violation.
const ReasonCrossplaneMetadata = "it is in Crossplane's domain, which Crossplane and providers act on (docs/FIELDS.md), and no rule's trigger permits changing it"

// ReasonHandEdit is why a hand edit of a gated managed resource that no
// rule permits is a violation.
const ReasonHandEdit = "a hand edit of a gated managed resource needs an AllowancePolicy for its kind with a rule that permits it; it would otherwise reach the cloud with the next change that opens the gate"
