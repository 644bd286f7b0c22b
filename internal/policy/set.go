package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/memo"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// Phase is an object's lifecycle phase: initializing, steady or deleting.
type Phase string

// Lifecycle phases.
const (
	PhaseInitializing Phase = "Initializing"
	PhaseSteady       Phase = "Steady"
	PhaseDeleting     Phase = "Deleting"
)

// maxCached bounds the cache; policies are few, so reaching it means churn.
const maxCached = 1024

// Cache holds compiled policies keyed by UID and generation, so a policy's
// CEL is compiled once per change of the policy, not once per request. It is
// safe for concurrent use.
type Cache struct {
	m *memo.Cache[*Compiled]
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{m: memo.New[*Compiled](maxCached)} }

// Compile compiles p, or returns the result of an earlier call for the same
// UID and generation. Policies without a UID (as crossplane render supplies
// them from files) are keyed by their content.
func (c *Cache) Compile(p *v1alpha1.AllowancePolicy) (*Compiled, error) {
	key := fmt.Sprintf("%s/%d", p.GetUID(), p.GetGeneration())
	if p.GetUID() == "" {
		b, _ := json.Marshal(p.Spec)
		sum := sha256.Sum256(b)
		key = "name:" + p.GetName() + "/" + hex.EncodeToString(sum[:])
	}
	return c.m.Get(key, func() (*Compiled, error) { return Compile(p) })
}

// For selects the policies for objects of apiVersion and kind, compiles
// them and orders them by priority. Policies that do not compile are left
// out and reported; callers must then fail closed.
func (c *Cache) For(apiVersion, kind string, ps []v1alpha1.AllowancePolicy) (Set, []error) {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	var s Set
	var errs []error
	for i := range ps {
		f := ps[i].Spec.For
		if f.Kind != kind || f.APIGroup != gv.Group || (f.APIVersion != "" && f.APIVersion != gv.Version) {
			continue
		}
		cp, err := c.Compile(&ps[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.policies = append(s.policies, cp)
		s.unresolve(&ps[i])
	}
	slices.SortStableFunc(s.policies, func(a, b *Compiled) int {
		if pa, pb := a.policy.Spec.Priority, b.policy.Spec.Priority; pa != pb {
			return int(pb) - int(pa)
		}
		return strings.Compare(a.Name(), b.Name())
	})
	return s, errs
}

// Restricting reports whether some AllowancePolicy, whichever kind it is
// for, restricts child: names it as a composed resource or owns the gate of
// its external resource. A policy that does not compile counts as
// restricting the kinds its targets name (Names: data, readable without
// its CEL), and its errors are returned; it never puts every managed kind
// under the creation hook. Admission asks when a managed resource is
// created outside a gate-aware pipeline.
func (c *Cache) Restricting(ps []v1alpha1.AllowancePolicy, child Child) (bool, []error) {
	s, errs := c.all(ps)
	if s.Restricts(child) || s.RestrictsExternal(child) {
		return true, errs
	}
	if len(errs) == 0 {
		return false, nil
	}
	for i := range ps {
		if _, err := c.Compile(&ps[i]); err != nil && Names(&ps[i], child) {
			return true, errs
		}
	}
	return false, errs
}

// RestrictingCompiled is Restricting by the policies that compile only.
// Admission gates an existing managed resource of a kind a policy came to
// restrict by it, and the webhook rules are drawn from it: a policy that
// does not compile must not gate every managed resource of every kind.
func (c *Cache) RestrictingCompiled(ps []v1alpha1.AllowancePolicy, child Child) bool {
	s, _ := c.all(ps)
	return s.Restricts(child) || s.RestrictsExternal(child)
}

// all compiles ps, whatever kind each is for.
func (c *Cache) all(ps []v1alpha1.AllowancePolicy) (Set, []error) {
	var s Set
	var errs []error
	for i := range ps {
		cp, err := c.Compile(&ps[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.policies = append(s.policies, cp)
		s.unresolve(&ps[i])
	}
	return s, errs
}

// unresolve records the resources p's targets name that its status does
// not record as resolved.
func (s *Set) unresolve(p *v1alpha1.AllowancePolicy) {
	for _, n := range Unresolved(p) {
		if !slices.Contains(s.unresolved, n) {
			s.unresolved = append(s.unresolved, n)
		}
	}
}

// Set is the compiled policies that apply to one kind, highest priority
// first. The zero Set restricts nothing.
type Set struct {
	policies []*Compiled
	// unresolved are the resources targets name that no API server
	// resolution backs (Unresolved): each restricts every kind of its
	// apiGroup whose resource is only guessed.
	unresolved []Named
}

// Unresolved are the resources the set's targets name that are not
// resolved yet, as "resource.group".
func (s Set) Unresolved() []string {
	out := make([]string, 0, len(s.unresolved))
	for _, n := range s.unresolved {
		out = append(out, n.String())
	}
	return out
}

// RestrictsUnresolved reports whether c counts as restricted only because
// a target not resolved yet may name it: no entry names c, its resource is
// a guess, and a target of its apiGroup is unresolved.
func (s Set) RestrictsUnresolved(c Child) bool {
	return s.unresolvedFor(c) && !s.entries(func(e entry) bool {
		return (e.relation == v1alpha1.RelationControllerChild && MatchesChild(e.Target, c)) ||
			(e.relation == v1alpha1.RelationExternal && MatchesExternal(e.Target, c))
	})
}

// unresolvedFor reports whether an unresolved target may name c: its
// resource is a guess and a target of its apiGroup is unresolved.
func (s Set) unresolvedFor(c Child) bool {
	return c.Guessed && slices.ContainsFunc(s.unresolved, func(n Named) bool { return n.Group == c.APIGroup })
}

// Names are the policies' names, in priority order.
func (s Set) Names() []string {
	out := make([]string, 0, len(s.policies))
	for _, p := range s.policies {
		out = append(out, p.Name())
	}
	return out
}

// entries calls fn for every entry of every phase and rule.
func (s Set) entries(fn func(entry) bool) bool {
	for _, p := range s.policies {
		for _, es := range [][]entry{p.init.entries, p.del.entries} {
			if slices.ContainsFunc(es, fn) {
				return true
			}
		}
		for _, r := range p.rules {
			if slices.ContainsFunc(r.entries, fn) {
				return true
			}
		}
	}
	return false
}

// Restricts reports whether some ControllerChild entry names the child's
// kind, or may name it (an unresolved target of its apiGroup: fail
// closed); changes to a kind no entry names are unrestricted.
func (s Set) Restricts(c Child) bool {
	return s.unresolvedFor(c) || s.entries(func(e entry) bool { return e.relation == v1alpha1.RelationControllerChild && MatchesChild(e.Target, c) })
}

// RestrictsExternal reports whether some External entry names the child's
// external resource, or may name it, i.e. whether Kausality owns the
// child's gate.
func (s Set) RestrictsExternal(c Child) bool {
	return s.unresolvedFor(c) || s.entries(func(e entry) bool { return e.relation == v1alpha1.RelationExternal && MatchesExternal(e.Target, c) })
}

// Phase tells obj's lifecycle phase: Deleting once it has a deletion
// timestamp, Initializing while some policy's initializing.when holds,
// Steady otherwise. On an evaluation error the phase is Steady, the
// strictest, and the error names the policy.
func (s Set) Phase(obj map[string]any) (Phase, error) {
	return s.phase(obj, nil)
}

// phase is Phase with the object's CEL variables, when the caller has
// built them already.
func (s Set) phase(obj map[string]any, v vars) (Phase, error) {
	u := unstructured.Unstructured{Object: obj}
	if u.GetDeletionTimestamp() != nil {
		return PhaseDeleting, nil
	}
	if len(s.policies) == 0 {
		return PhaseSteady, nil
	}
	if v == nil {
		v = varsOf(obj, nil)
	}
	w := v.withoutOld()
	for _, p := range s.policies {
		ok, err := p.when.eval(w)
		if err != nil {
			return PhaseSteady, errors.Wrapf(err, "AllowancePolicy %s spec.initializing.when", p.Name())
		}
		if ok {
			return PhaseInitializing, nil
		}
	}
	return PhaseSteady, nil
}

// PhaseBound is the union of the phase's entries over all policies. A policy
// without that phase's section, or with an empty one, leaves the phase
// unrestricted (DESIGN §3).
func (s Set) PhaseBound(ph Phase) Bound {
	var b Bound
	for _, p := range s.policies {
		var sec phase
		switch ph {
		case PhaseInitializing:
			sec = p.init
		case PhaseDeleting:
			sec = p.del
		default:
			return Bound{}
		}
		if !sec.present || sec.unrestricted {
			return Bound{unrestricted: true}
		}
		b.entries = append(b.entries, sec.entries...)
	}
	return b
}

// Drift is Allow only when every policy allows drift correction.
func (s Set) Drift() v1alpha1.DriftPolicy {
	if len(s.policies) == 0 {
		return v1alpha1.DriftDeny
	}
	for _, p := range s.policies {
		if p.policy.Spec.Drift != v1alpha1.DriftAllow {
			return v1alpha1.DriftDeny
		}
	}
	return v1alpha1.DriftAllow
}

// DeletionProtection reports whether some policy protects objects of this
// kind from deletion.
func (s Set) DeletionProtection() bool {
	return slices.ContainsFunc(s.policies, func(p *Compiled) bool { return p.policy.Spec.DeletionProtection })
}

// DeletionBound is what deleting an object of this kind by id may do to
// its children: the union of the deleting entries of the policies under
// which id may initiate a change. Unlike PhaseBound, a policy without a
// deleting section, or with an empty one, contributes nothing: deleting
// cloud resources is granted explicitly or not at all, and never to a user
// no policy lets initiate (DESIGN §4a). The result is a grant: kinds no
// entry names get nothing.
func (s Set) DeletionBound(id Identity) Bound {
	b := Bound{grant: true}
	for _, p := range s.policies {
		if !p.del.present || !p.mayInitiate(id) {
			continue
		}
		b.entries = append(b.entries, p.del.entries...)
	}
	return b
}

// Bound is an upper bound on what may happen to children: the union of a
// set of entries. Kinds no entry names are unrestricted, unless the bound is
// a grant (UpgradeBound), where they get nothing.
type Bound struct {
	unrestricted bool
	grant        bool
	entries      []entry
}

// Unrestricted reports whether the bound allows everything.
func (b Bound) Unrestricted() bool { return b.unrestricted }

func (b Bound) matching(c Child, rel v1alpha1.Relation) []entry {
	var out []entry
	for _, e := range b.entries {
		if e.relation != rel {
			continue
		}
		if (rel == v1alpha1.RelationControllerChild && MatchesChild(e.Target, c)) || (rel == v1alpha1.RelationExternal && MatchesExternal(e.Target, c)) {
			out = append(out, e)
		}
	}
	return out
}

// AllowsChild reports whether the bound allows verb (Create, Update, Delete)
// on a child of kind c.
func (b Bound) AllowsChild(c Child, verb string) bool {
	if b.unrestricted {
		return true
	}
	es := b.matching(c, v1alpha1.RelationControllerChild)
	if len(es) == 0 {
		return !b.grant
	}
	return slices.ContainsFunc(es, func(e entry) bool { return v1alpha1.GrantsVerb(e.Verbs, verb) })
}

// AllowsMutation reports whether the bound allows the field mutation on a
// child of kind c: some entry allows Update and its mutations (all, when it
// lists none) cover m.
func (b Bound) AllowsMutation(c Child, m mutation.Mutation) bool {
	if b.unrestricted {
		return true
	}
	es := b.matching(c, v1alpha1.RelationControllerChild)
	if len(es) == 0 {
		return !b.grant
	}
	return slices.ContainsFunc(es, func(e entry) bool {
		return v1alpha1.GrantsVerb(e.Verbs, v1alpha1.VerbUpdate) && (len(e.Mutations) == 0 || e.bounds.Covers(m))
	})
}

// ExternalVerbs are the external verbs the bound allows on the child's
// external resource, sorted; ["*"] when unrestricted.
func (b Bound) ExternalVerbs(c Child) []string {
	if b.unrestricted {
		return []string{v1alpha1.VerbAll}
	}
	var out []string
	for _, e := range b.matching(c, v1alpha1.RelationExternal) {
		for _, v := range e.Verbs {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}
