package derivation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// AnnotationDerivedFrom names the Composition a derived policy was derived
// from, so a later check or re-derivation can find its source.
const AnnotationDerivedFrom = "kausality.io/derived-from"

// Deleting says what deleting an XR may do to the cloud resources below it.
type Deleting string

// Deleting modes.
const (
	// DeletingOrphan lets the composed objects go but grants no External
	// Delete: the cloud resources stay, to be deleted by hand. The default,
	// because a deletion that loses data cannot be undone.
	DeletingOrphan Deleting = "orphan"
	// DeletingDelete grants the External Delete of every managed resource.
	DeletingDelete Deleting = "delete"
)

// Options are what a derivation needs besides the Composition.
type Options struct {
	// Name of the policy; default the XR's plural.
	Name string
	// Subjects of the policy.
	Subjects []v1alpha1.Subject
	// Deleting says whether deleting the XR deletes its cloud resources.
	Deleting Deleting
	// DeletionProtection sets spec.deletionProtection.
	DeletionProtection bool
	// Mode sets spec.mode; empty (Enforce) writes none. A policy in Audit
	// gates and refuses nothing its kind does, so every policy derived in
	// Audit is Kausality in Audit wherever it restricts anything.
	Mode v1alpha1.Mode
	// Resolver resolves composed kinds' plurals; nil guesses every one.
	Resolver Resolver
	// XRSchema is the XR's schema from its XRD: it tells which fields are
	// always present. Nil counts every field as optional.
	XRSchema *Schema
}

// Result is a derived policy, what each rule mirrors, and what could not
// be derived.
type Result struct {
	Policy *v1alpha1.AllowancePolicy
	// Comments per rule, in rule order: the patches each rule mirrors,
	// with their transforms.
	Comments [][]string
	// Notes say what the policy does not cover, or assumes.
	Notes []string
}

// kindOf is a composed kind as policies name it.
type kindOf struct {
	gvk schema.GroupVersionKind
	Kind
}

// Derive derives an AllowancePolicy from a Composition's patch-and-transform
// steps.
func Derive(m *Model, o Options) (*Result, error) {
	res := &Result{Notes: slices.Clone(m.Notes)}
	kinds, err := resolveAll(m, o.Resolver, res)
	if err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		xr, err := resolveOne(m.XR, o.Resolver, nil)
		if err != nil {
			return nil, err
		}
		name = xr.Resource
	}
	if o.XRSchema == nil {
		res.Notes = append(res.Notes, "no XRD: every XR field counts as optional, so each rule also permits inserting and deleting its fields")
	}
	p := &v1alpha1.AllowancePolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "AllowancePolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationDerivedFrom: m.Name}},
		Spec: v1alpha1.AllowancePolicySpec{
			For:                v1alpha1.ObjectKind{APIGroup: m.XR.Group, APIVersion: m.XR.Version, Kind: m.XR.Kind},
			Subjects:           slices.Clone(o.Subjects),
			DeletionProtection: o.DeletionProtection,
		},
	}
	switch o.Mode {
	case "", v1alpha1.ModeEnforce:
	case v1alpha1.ModeLog, v1alpha1.ModeAudit:
		p.Spec.Mode = o.Mode
	default:
		return nil, errors.Errorf("mode %q is not %s, %s or %s", o.Mode, v1alpha1.ModeEnforce, v1alpha1.ModeLog, v1alpha1.ModeAudit)
	}
	switch o.Deleting {
	case "", DeletingOrphan, DeletingDelete:
	default:
		return nil, errors.Errorf("deleting %q is not orphan or delete", o.Deleting)
	}
	init := &v1alpha1.InitializingPhase{}
	del := &v1alpha1.DeletingPhase{}
	for _, k := range kinds {
		init.Policies = append(init.Policies, v1alpha1.PolicyEntry{
			Target: childTarget(k), Relation: v1alpha1.RelationControllerChild, Verbs: []string{v1alpha1.VerbCreate},
			Mutations: []v1alpha1.MutationBound{{JSONPath: "*", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert, v1alpha1.MutationMutate}}},
		})
		del.Policies = append(del.Policies, v1alpha1.PolicyEntry{Target: childTarget(k), Relation: v1alpha1.RelationControllerChild, Verbs: []string{v1alpha1.VerbAll}})
		if !k.Class.Gated() {
			// A composed XR, a Deployment, a ProviderConfig have no
			// external resource: a composed XR's own policies bound what
			// reaches the cloud below it.
			continue
		}
		asks := asked(m, k.gvk)
		if asks(gate.Create) {
			init.Policies = append(init.Policies, externalEntry(k, v1alpha1.VerbCreate))
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: no External Create rule: the Composition's spec.managementPolicies do not ask for Create (an observe-only import), and Kausality never opens more than they ask", k.gvk.GroupKind()))
		}
		if o.Deleting == DeletingDelete {
			if asks(gate.Delete) {
				del.Policies = append(del.Policies, externalEntry(k, v1alpha1.VerbDelete))
			} else {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: no External Delete rule: the Composition's spec.managementPolicies do not ask for Delete (the cloud resource is kept when the XR goes), and Kausality never opens more than they ask", k.gvk.GroupKind()))
			}
		}
	}
	if len(kinds) > 0 {
		// An empty section would be unrestricted: leave it out instead,
		// which says the same without pretending to bound anything.
		p.Spec.Initializing, p.Spec.Deleting = init, del
	}
	p.Spec.Rules, res.Comments = rules(m, kinds, o.XRSchema, res)
	if len(p.Spec.Rules) == 0 {
		// A Composition that passes no XR field on: as written, as read.
		p.Spec.Rules = nil
	}
	res.Policy = p
	res.Notes = unique(res.Notes)
	return res, nil
}

func resolveAll(m *Model, r Resolver, res *Result) ([]kindOf, error) {
	var out []kindOf
	for _, t := range m.Templates {
		if slices.ContainsFunc(out, func(k kindOf) bool { return k.gvk == t.GVK }) {
			continue
		}
		k, err := resolveOne(t.GVK, r, res)
		if err != nil {
			return nil, errors.Wrapf(err, "resource %s", t.Name)
		}
		out = append(out, kindOf{gvk: t.GVK, Kind: k})
	}
	return out, nil
}

// resolveOne resolves gvk, guessing (and noting the guess in res) when the
// resolver does not know it.
func resolveOne(gvk schema.GroupVersionKind, r Resolver, res *Result) (Kind, error) {
	if r != nil {
		k, ok, err := r.Resolve(gvk)
		if err != nil {
			return Kind{}, errors.Wrapf(err, "cannot resolve the plural of %s", gvk)
		}
		if ok {
			return k, nil
		}
	}
	k := Kind{Resource: Guess(gvk), Class: policy.ClassOf(gvk.Group, nil, false)}
	if res != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("the plural of %s is guessed as %s, and the kind is taken as %s: pass its CRD to be sure", gvk.GroupKind(), k.Resource, k.Class))
	}
	return k, nil
}

// asked reports which management actions the Composition's templates of
// kind gvk ask for in their bases' spec.managementPolicies: an action at
// least one of them asks for. A template whose managementPolicies a patch
// sets asks for every action, as one that sets none does: what it asks is
// not known before the XR is.
func asked(m *Model, gvk schema.GroupVersionKind) func(action string) bool {
	var reqs [][]string
	for _, t := range m.Templates {
		if t.GVK != gvk {
			continue
		}
		patched := slices.ContainsFunc(m.Flows, func(f Flow) bool {
			return f.Template == t && (f.To == gate.PathManagementPolicies || strings.HasPrefix(f.To, gate.PathManagementPolicies+"["))
		})
		req, err := gate.Requested(t.Base)
		if patched || err != nil {
			req = nil
		}
		reqs = append(reqs, req)
	}
	return func(action string) bool {
		return len(reqs) == 0 || slices.ContainsFunc(reqs, func(r []string) bool { return gate.Asks(r, action) })
	}
}

func childTarget(k kindOf) v1alpha1.Target {
	return v1alpha1.Target{APIGroup: k.gvk.Group, APIVersion: k.gvk.Version, Resource: k.Resource}
}

func externalEntry(k kindOf, verb string) v1alpha1.PolicyEntry {
	return v1alpha1.PolicyEntry{
		Target:   v1alpha1.Target{External: map[string]string{"apiGroup": k.gvk.Group, "kind": k.gvk.Kind}},
		Relation: v1alpha1.RelationExternal,
		Verbs:    []string{verb},
	}
}

// mutationOrder is the order verbs are listed in, as people write them.
var mutationOrder = []v1alpha1.MutationVerb{v1alpha1.MutationInsert, v1alpha1.MutationMutate, v1alpha1.MutationDelete}

// verbsOf are the mutations a change of the flow's XR fields causes on its
// target: only Mutate when the target is always there (the base sets it,
// or every source field is always present) and holds a scalar; else the
// target also appears and vanishes with the source, or keys and elements
// come and go below it.
func verbsOf(f Flow, xr *Schema) []v1alpha1.MutationVerb {
	if len(f.Verbs) > 0 {
		return slices.Clone(f.Verbs)
	}
	if alwaysSet(f, xr) && scalarOut(f, xr) {
		return []v1alpha1.MutationVerb{v1alpha1.MutationMutate}
	}
	return slices.Clone(mutationOrder)
}

// Describe is one line about a flow, for people: where it reads and
// writes, and what it does on the way.
func Describe(f Flow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s → %s (%s) %s", strings.Join(f.From, " + "), f.Template.Name, f.Template.GVK.Kind, f.To)
	if f.Via != "" {
		fmt.Fprintf(&b, ", through the environment's %s", f.Via)
	}
	if f.PatchSet != "" {
		fmt.Fprintf(&b, ", from patch set %s", f.PatchSet)
	}
	if f.Required {
		b.WriteString(", required")
	}
	if len(f.Transforms) > 0 {
		fmt.Fprintf(&b, ", transforms: %s", strings.Join(f.Transforms, ", "))
	}
	return b.String()
}

// unique is ss without repeats, in first-seen order.
func unique(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
