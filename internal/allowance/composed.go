package allowance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Composed is what a composite's KausalityComposed condition records: the
// composite generation the function last composed from, and the composed
// resources (by composition resource name) that run left as stored. An
// allowance of the composite is used up for a composed resource once the
// function composed it from the allowance's generation (UncomposedSince);
// for a resource a run leaves as stored, this record says so, where a
// write of the resource's own kausality.io/composed-generation would be a
// watch event Crossplane charges the composite for, for every resource a
// change leaves alone (docs/DESIGN.md §3).
//
// Crossplane writes the condition in the status update that ends a
// reconcile, which a failed apply, a step's fatal result or a concurrent
// write of the composite keeps from happening (a failed reconcile marks
// it Unknown). So the function also copies the record onto the composed
// resources the run writes anyway (v1alpha1.AnnotationLeftAsStored),
// which Crossplane applies first.
// Only Crossplane writes a composite's status (admission refuses users'
// status writes), and admission protects kausality.io annotations. A
// record that claims more only narrows: more allowances count as used.
type Composed struct {
	Generation int64
	// Untouched are the composition resource names of the resources the
	// runs at Generation left as stored, sorted.
	Untouched []string
}

// composedPrefix and untouchedSep frame the condition's message, which
// people read too: "composed from generation 7; left as stored: [...]".
const (
	composedPrefix = "composed from generation "
	untouchedSep   = "; left as stored: "
)

// For is the composite generation the record says resName was composed
// from, 0 when it says nothing of it.
func (c Composed) For(resName string) int64 {
	if _, ok := slices.BinarySearch(c.Untouched, resName); ok {
		return c.Generation
	}
	return 0
}

// String is the record as the condition's message holds it.
func (c Composed) String() string {
	names := c.Untouched
	if names == nil {
		names = []string{}
	}
	b, _ := json.Marshal(names) // a []string always marshals
	return composedPrefix + strconv.FormatInt(c.Generation, 10) + untouchedSep + string(b)
}

// ParseComposed reads a KausalityComposed condition's message.
func ParseComposed(msg string) (Composed, error) {
	rest, ok := strings.CutPrefix(msg, composedPrefix)
	if !ok {
		return Composed{}, fmt.Errorf("%q does not start with %q", msg, composedPrefix)
	}
	gen, names, ok := strings.Cut(rest, untouchedSep)
	if !ok {
		return Composed{}, fmt.Errorf("%q has no %q", msg, strings.TrimSpace(untouchedSep))
	}
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil || g < 0 {
		return Composed{}, fmt.Errorf("generation %q is not a non-negative integer", gen)
	}
	var l []string
	if err := json.Unmarshal([]byte(names), &l); err != nil {
		return Composed{}, fmt.Errorf("resources left as stored %q: %w", names, err)
	}
	slices.Sort(l)
	return Composed{Generation: g, Untouched: slices.Compact(l)}, nil
}

// ComposedOf is the record of a composite's KausalityComposed condition;
// the zero record, which says nothing, when it has none or one that is not
// True (Crossplane marks it Unknown when a reconcile fails), and with an
// error when a True one does not read.
func ComposedOf(xr map[string]any) (Composed, error) {
	m := composedCondition(xr)
	if m == nil || m["status"] != "True" {
		return Composed{}, nil
	}
	msg, _ := m["message"].(string)
	rec, err := ParseComposed(msg)
	if err != nil {
		return Composed{}, fmt.Errorf("condition %s: %w", v1alpha1.ConditionComposed, err)
	}
	return rec, nil
}

// LeftAsStored is the record a composed resource keeps of the run that
// last wrote it (v1alpha1.AnnotationLeftAsStored); the zero record when it
// has none, and with an error when it does not read.
func LeftAsStored(composed map[string]any) (Composed, error) {
	md, _ := composed["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[v1alpha1.AnnotationLeftAsStored].(string)
	if s == "" {
		return Composed{}, nil
	}
	rec, err := ParseComposed(s)
	if err != nil {
		return Composed{}, fmt.Errorf("annotation %s: %w", v1alpha1.AnnotationLeftAsStored, err)
	}
	return rec, nil
}

// Merge is c with what other records of the same generation; a record of
// another generation replaces an older one and is dropped for a newer.
func (c Composed) Merge(other Composed) Composed {
	switch {
	case other.Generation > c.Generation:
		return other
	case other.Generation < c.Generation:
		return c
	}
	l := slices.Concat(c.Untouched, other.Untouched)
	slices.Sort(l)
	return Composed{Generation: c.Generation, Untouched: slices.Compact(l)}
}

// composedCondition is xr's KausalityComposed condition, nil when it has
// none.
func composedCondition(xr map[string]any) map[string]any {
	cs, _, _ := unstructured.NestedFieldNoCopy(xr, "status", "conditions")
	l, _ := cs.([]any)
	for _, c := range l {
		if m, _ := c.(map[string]any); m["type"] == v1alpha1.ConditionComposed {
			return m
		}
	}
	return nil
}

// ComposedFrom is the composite generation a composed resource was last
// composed from: the latest of its own record (ComposedGeneration), what
// the composite's record says of it by its composition resource name, and
// what the record it carries for the composite says of it (LeftAsStored;
// it names itself when a run wrote it only to carry the record). Records
// that do not read say nothing.
func ComposedFrom(composed map[string]any, resName string, rec Composed) int64 {
	carried, _ := LeftAsStored(composed)
	return max(ComposedGeneration(composed), rec.For(resName), carried.For(resName))
}
