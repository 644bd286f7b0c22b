package gate

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// IsGatePath reports whether a spec path is the gate itself, which
// Kausality owns: it is left out of diffs and of every record of a spec.
func IsGatePath(p string) bool {
	return p == PathManagementPolicies || strings.HasPrefix(p, PathManagementPolicies+"[")
}

// Approval is the spec a managed resource's provider was last allowed to
// write to the cloud (annotations kausality.io/approved and
// kausality.io/approved-generation): a hash per leaf of the spec beyond the
// gate, and the generation that spec had. Before (kausality.io/approved-before)
// is what the approval before it held for each leaf this one changed
// (allowance.Absent for a leaf it did not have): what the cloud still
// holds when the change this approval let through is never applied.
type Approval struct {
	Spec       mutation.Applied
	Generation int64
	Before     mutation.Applied
}

// approving is the approval of spec at generation gen that replaces a:
// Before records a's hash of each leaf a had and spec changes or drops (a
// leaf spec adds needs no record: restoring leaves it out), and replaces
// whatever record a had. Approving the same spec again keeps a's record,
// which still says what the cloud had before; a first approval (a
// creation) has none.
func (a Approval) approving(spec mutation.Applied, gen int64) Approval {
	changed := a.Spec.Changed(spec)
	if len(changed) == 0 {
		return Approval{Spec: spec, Generation: gen, Before: a.Before}
	}
	var before mutation.Applied
	if len(a.Spec) > 0 {
		// Written even when empty: a record an older approval left must
		// not describe leaves this one changed (a leaf it adds would
		// otherwise go back to a value the cloud no longer has).
		before = mutation.Applied{}
	}
	for _, k := range changed {
		if h, ok := a.Spec[k]; ok {
			before[k] = h
		}
	}
	return Approval{Spec: spec, Generation: gen, Before: before}
}

// SpecRecord is the record of obj's spec beyond the gate.
func SpecRecord(obj map[string]any) mutation.Applied {
	return mutation.Record("spec", obj["spec"], IsGatePath)
}

// ApprovalOf is the approval stored on a managed resource (nil: being
// created, when nothing is approved yet). A resource gated before the
// record existed, or with one that does not read (only Kausality writes
// it), counts its stored spec as approved at its stored generation: what
// the gate let through before is not known, and this blesses nothing a
// write being decided brings.
func ApprovalOf(stored map[string]any) Approval {
	if stored == nil {
		return Approval{Spec: mutation.Applied{}}
	}
	gen, ok := allowance.ApprovedGeneration(stored)
	spec, err := mutation.ParseApplied(annotation(stored, v1alpha1.AnnotationApproved))
	if !ok || err != nil || spec == nil {
		return Approval{Spec: SpecRecord(stored), Generation: generation(stored)}
	}
	// A record that does not read restores nothing: the approval of the
	// fields an expired change set is then withdrawn (Decision.withdraw).
	before, _ := mutation.ParseApplied(annotation(stored, v1alpha1.AnnotationApprovedBefore))
	return Approval{Spec: spec, Generation: gen, Before: before}
}

// LateInitialized is a's approval extended by the leaves next's spec has and
// prev's lacks: a provider's late initialization copies into unset fields
// what the cloud already holds, so writing it back ships nothing new.
func (a Approval) LateInitialized(prev, next map[string]any) Approval {
	was := SpecRecord(prev)
	out := Approval{Spec: maps.Clone(a.Spec), Generation: a.Generation, Before: a.Before}
	if out.Spec == nil {
		out.Spec = mutation.Applied{}
	}
	for k, h := range SpecRecord(next) {
		if _, ok := was[k]; !ok {
			out.Spec[k] = h
		}
	}
	return out
}

// Annotations are the approval's annotations, to set on the resource.
// Without a record of what came before (the same spec approved again, a
// creation, a withdrawal) the stored one stays: it still describes the
// leaves it names.
func (a Approval) Annotations() map[string]string {
	ann := make(map[string]string, 3)
	a.AddAnnotations(ann)
	return ann
}

// AddAnnotations writes the annotations that record a into ann, as
// Annotations has them, without a map of their own: the function stamps
// them onto every gated resource whose approval changes.
func (a Approval) AddAnnotations(ann map[string]string) {
	ann[v1alpha1.AnnotationApproved] = a.Spec.String()
	ann[v1alpha1.AnnotationApprovedGeneration] = strconv.FormatInt(a.Generation, 10)
	if a.Before != nil {
		ann[v1alpha1.AnnotationApprovedBefore] = a.Before.String()
	}
}

// nextGeneration is the generation obj will have once written over stored
// with the gate policies: one more when its spec changes, the gate included.
func nextGeneration(obj, stored map[string]any, policies []string) int64 {
	if stored == nil {
		return 1
	}
	gen := generation(stored)
	spec, _ := obj["spec"].(map[string]any)
	was, _ := stored["spec"].(map[string]any)
	if !sameBeyondGate(spec, was) || !sameStrings(was["managementPolicies"], policies) {
		return allowance.NextGeneration(gen)
	}
	return gen
}

// sameBeyondGate reports whether two specs agree on every field but the
// gate, without copying them.
func sameBeyondGate(a, b map[string]any) bool {
	n := 0
	for k, v := range a {
		if k == "managementPolicies" {
			continue
		}
		w, ok := b[k]
		if !ok || !mutation.Equal(v, w) {
			return false
		}
		n++
	}
	_, gated := b["managementPolicies"]
	if gated {
		n++
	}
	return n == len(b)
}

func sameStrings(v any, ss []string) bool {
	l, ok := v.([]any)
	if !ok {
		if s, ok := v.([]string); ok {
			return slices.Equal(s, ss)
		}
		return false
	}
	if len(l) != len(ss) {
		return false
	}
	for i := range l {
		if l[i] != ss[i] {
			return false
		}
	}
	return true
}

func annotation(obj map[string]any, key string) string {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[key].(string)
	return s
}
