package admit

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Chain is what decides whether Crossplane may stamp allowances on a
// managed resource: the resource as stored (Old, nil while created) and as
// written (Obj), the time, and how to look up what its allowances chain to.
type Chain struct {
	Old, Obj *unstructured.Unstructured
	// Child is the resource's kind as the API server serves it.
	Child policy.Child
	Now   time.Time
	// Composite returns the resource's controlling composite, nil when it
	// has none; it is asked at most once.
	Composite func() (*unstructured.Unstructured, error)
	// Upgrades reports whether the named UpgradeAllowance names the logic
	// change (Composition revision, Function packages) the write records
	// on the resource.
	Upgrades func(name string) (bool, error)
}

// Refuse decides whether Crossplane may stamp these allowances: allowed
// when every new one continues a chain: an unconsumed allowance of the
// controlling composite that grants at least as much, a Create while the
// composite is being created, or an UpgradeAllowance naming the resource's
// composition revision. Each must also fit the resource's next generation
// and carry a timestamp that is not in the future, or it would never be
// consumed or expire, and name as what its gate ships only fields its
// chain lets through. An error is a failed lookup, not a refusal.
func (c Chain) Refuse(as []allowance.Allowance) (Verdict, error) {
	msg, err := c.refuse(as)
	if msg == "" || err != nil {
		return Allow(), err
	}
	return Deny(metrics.ReasonChain, "%s", msg), nil
}

// refuse says why Refuse refuses, or "".
func (c Chain) refuse(as []allowance.Allowance) (string, error) {
	var stored []allowance.Allowance
	var storedGen int64
	if c.Old != nil {
		stored, _ = allowance.Parse(c.Old.GetAnnotations()[v1alpha1.AnnotationAllowances])
		storedGen = c.Old.GetGeneration()
	}
	var to *chainTo
	for i, a := range as {
		if slices.ContainsFunc(stored, a.Same) {
			continue
		}
		if j := slices.IndexFunc(stored, a.Releases); j >= 0 {
			if msg := c.refuseRelease(i, a, stored[j], storedGen); msg != "" {
				return msg, nil
			}
			continue
		}
		if msg, err := c.refuseNew(i, a, storedGen, &to); msg != "" || err != nil {
			return msg, err
		}
	}
	return "", nil
}

// chainTo is the controlling composite and its allowances not yet used up
// for the resource: Crossplane's write carries what the function composed
// from them. Refuse reads them once, for the first allowance that needs
// them.
type chainTo struct {
	xr         *unstructured.Unstructured
	allowances []allowance.Allowance
}

// refuseRelease says why the i-th allowance a, which releases the stored
// pending allowance p, may not: its chain was checked when it was stamped;
// the values it was issued for were fixed then, and the write must set
// exactly those.
func (c Chain) refuseRelease(i int, a, p allowance.Allowance, storedGen int64) string {
	if err := a.Stampable(storedGen, c.Now); err != nil {
		return fmt.Sprintf("allowance %d on %s cannot be released: %v", i, Describe(c.Obj), err)
	}
	if f := unreleasable(p, c.Obj); f != "" {
		return fmt.Sprintf("allowance %d on %s releases a change of %s to a value it was not issued for", i, Describe(c.Obj), f)
	}
	return ""
}

// refuseNew says why the i-th allowance a, new on the resource, continues
// no chain; to is the composite, read on first use.
func (c Chain) refuseNew(i int, a allowance.Allowance, storedGen int64, to **chainTo) (string, error) {
	obj := c.Obj
	if len(a.Trace) < 2 {
		return fmt.Sprintf("allowance %d on %s has no parent hop in its trace", i, Describe(obj)), nil
	}
	if err := a.Stampable(storedGen, c.Now); err != nil {
		return fmt.Sprintf("allowance %d on %s cannot be stamped: %v", i, Describe(obj), err), nil
	}
	parent := a.Trace.Parent()
	if a.FromUpgrade() {
		ok, err := c.Upgrades(parent[0].Name)
		if err != nil || ok {
			return "", err // named: the others must chain too
		}
		return fmt.Sprintf("allowance %d on %s starts at UpgradeAllowance %s, which does not name the logic change recorded on it: %s", i, Describe(obj), parent[0].Name, recordedLogic(obj)), nil
	}
	if *to == nil {
		t, msg, err := c.composite(i)
		if msg != "" || err != nil {
			return msg, err
		}
		*to = t
	}
	return c.refuseChained(i, a, parent, *to), nil
}

// composite reads the controlling composite and its allowances, or says
// why the i-th allowance cannot chain to it.
func (c Chain) composite(i int) (*chainTo, string, error) {
	xr, err := c.Composite()
	if err != nil {
		return nil, "", err
	}
	if xr == nil {
		return nil, fmt.Sprintf("allowance %d on %s: the resource has no controlling composite to chain to", i, Describe(c.Obj)), nil
	}
	xas, err := allowance.Parse(xr.GetAnnotations()[v1alpha1.AnnotationAllowances])
	if err != nil {
		return nil, errors.Wrapf(err, "cannot parse annotation %s on %s", v1alpha1.AnnotationAllowances, Describe(xr)).Error(), nil
	}
	return &chainTo{xr: xr, allowances: uncomposed(xas, xr, c.Old)}, "", nil
}

// uncomposed are the allowances as of parent, the composite that composes
// a resource stored as old (nil: being created), that are still to be
// composed for it: not consumed on the parent (allowance.OnComposite),
// and of a later generation than the resource was composed from by its
// own record or the parent's (allowance.ComposedFrom). A parent's record
// that does not read says nothing, as the function reads it.
func uncomposed(as []allowance.Allowance, parent, old *unstructured.Unstructured) []allowance.Allowance {
	var from int64
	if old != nil {
		rec, _ := allowance.ComposedOf(parent.Object)
		from = allowance.ComposedFrom(old.Object, old.GetAnnotations()[AnnotationCompositionResourceName], rec)
	}
	return allowance.UncomposedSince(allowance.OnComposite(as, parent.Object), from)
}

// refuseChained says why the i-th allowance a, whose trace ends at parent,
// does not continue an allowance of the composite to: a Create while the
// composite is being created, or fields inserted while it is,
// need none; anything else must chain to one that grants at least as much
// and lets through what a ships.
func (c Chain) refuseChained(i int, a allowance.Allowance, parent allowance.Trace, to *chainTo) string {
	obj, xr := c.Obj, to.xr
	last := parent.Last()
	switch {
	case last.Kind != xr.GetKind() || last.Name != xr.GetName():
		return fmt.Sprintf("allowance %d on %s: its trace names %s %s as parent, not the controlling %s", i, Describe(obj), last.Kind, last.Name, Describe(xr))
	case c.Old == nil && slices.Equal(a.Verbs, []string{v1alpha1.VerbCreate}) && !policy.Created(xr.Object):
		// Creation while the composite is created, bounded by its
		// initializing phase. Once it has been created, a new resource is a
		// change: its Create must chain like any other, or a step after
		// Kausality could forge one.
		return ""
	case c.Old != nil && !policy.Created(xr.Object) && completes(a, c.Child, c.Old):
		return "" // completing the resource while the composite is created
	case c.Old != nil && !policy.Created(xr.Object) && policy.UnchangedSinceCreated(xr.Object) && computes(a, c.Child):
		return "" // a value the pipeline computes while the composite is created, unchanged
	case !slices.ContainsFunc(to.allowances, func(x allowance.Allowance) bool { return parent.Continues(x.Trace) }):
		return fmt.Sprintf("allowance %d on %s does not chain to an unconsumed allowance of %s", i, Describe(obj), Describe(xr))
	case !slices.ContainsFunc(to.allowances, func(x allowance.Allowance) bool { return parent.Continues(x.Trace) && a.Within(x) }):
		return fmt.Sprintf("allowance %d on %s grants more than the allowance of %s it chains to (relation, target or verbs)", i, Describe(obj), Describe(xr))
	}
	if f := unshippable(a, to.allowances, parent, c.Child); f != "" {
		return fmt.Sprintf("allowance %d on %s ships %s, which no allowance of %s it chains to lets through", i, Describe(obj), f, Describe(xr))
	}
	return ""
}

// unreleasable names the first field whose value in obj is not the one
// the pending allowance p was issued for (allowance.Pending), or "": a
// pipeline step after Kausality could otherwise release a held change with
// another value, which the opened gate would ship.
func unreleasable(p allowance.Allowance, obj *unstructured.Unstructured) string {
	for _, path := range slices.Sorted(maps.Keys(p.Pending)) {
		h := p.Pending[path]
		v, present := mutation.Value(obj.Object, path)
		if h == allowance.Absent {
			if present {
				return path
			}
			continue
		}
		if !(mutation.Applied{path: h}).Unchanged(path, v, present) {
			return path
		}
	}
	return ""
}

// completes reports whether a ships only fields the stored resource old
// lacks, by an External Update of its own kind: the composite's creation
// completing a resource (a value wired from another resource's status),
// which the function lets through until the composite is first Ready
// (docs/DESIGN.md §3b). A pipeline step after Kausality cannot pass a
// change of an existing value off as one.
func completes(a allowance.Allowance, child policy.Child, old *unstructured.Unstructured) bool {
	if !namedUpdate(a, child) {
		return false
	}
	for _, b := range a.Mutations {
		if !slices.Equal(b.Verbs, []v1alpha1.MutationVerb{v1alpha1.MutationInsert}) || strings.Contains(b.JSONPath, "*") {
			return false
		}
		if _, present := mutation.Value(old.Object, b.JSONPath); present {
			return false
		}
	}
	return true
}

// namedUpdate reports whether a is an External Update of child's own kind
// that names the fields it ships: the shape of what the composite's
// creation stamps (completes, computes).
func namedUpdate(a allowance.Allowance, child policy.Child) bool {
	return a.Relation == v1alpha1.RelationExternal && slices.Equal(a.Verbs, []string{v1alpha1.VerbUpdate}) &&
		len(a.Mutations) > 0 && policy.MatchesExternal(a.Target, child)
}

// computes reports whether a ships only named fields, inserted or changed,
// by an External Update of its own kind: what the composite's pipeline
// computes while the composite is created and nobody changed it (a value
// raised once a dependency reports), which the function lets through
// (docs/COMPOSITIONS.md, "An XR's two phases").
func computes(a allowance.Allowance, child policy.Child) bool {
	return namedUpdate(a, child) && !slices.ContainsFunc(a.Mutations, func(b v1alpha1.MutationBound) bool {
		return strings.Contains(b.JSONPath, "*") || slices.ContainsFunc(b.Verbs, func(v v1alpha1.MutationVerb) bool {
			return v != v1alpha1.MutationInsert && v != v1alpha1.MutationMutate
		})
	})
}

// unshippable names the first field External allowance a ships that the
// composite allowances of its chain (parent) do not let reach a resource
// of kind child, or ""
// (DESIGN §4a: a pipeline step after Kausality must not name a field it
// changed itself, or the gate would ship it).
func unshippable(a allowance.Allowance, xrAllowances []allowance.Allowance, parent allowance.Trace, child policy.Child) string {
	if a.Relation != v1alpha1.RelationExternal || len(a.Mutations) == 0 {
		return ""
	}
	var chain []allowance.Allowance
	for _, x := range xrAllowances {
		if parent.Continues(x.Trace) {
			chain = append(chain, x)
		}
	}
	ms := mutation.Named(a.Mutations)
	ok := policy.Shippable(chain, child, ms)
	for _, m := range ms {
		if !slices.Contains(ok, m) {
			return m.Path
		}
	}
	return ""
}

// recordedLogic names the logic a write records on a composed resource.
func recordedLogic(obj *unstructured.Unstructured) string {
	ann := obj.GetAnnotations()
	out := fmt.Sprintf("composition revision %q", ann[v1alpha1.AnnotationCompositionRevision])
	if fns := ann[v1alpha1.AnnotationFunctionVersions]; fns != "" {
		out += ", function versions " + fns
	}
	if ins := ann[v1alpha1.AnnotationInputVersions]; ins != "" {
		out += ", input versions " + ins
	}
	return out
}
