package policy

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// UpgradeBound is what the UpgradeAllowances for a composition revision
// grant: the union of the entries of those whose compositionRevisions name
// it (exactly, or by a prefix ending in "*"). Kinds they do not name get
// nothing. Entries that do not compile grant nothing either.
func UpgradeBound(us []v1alpha1.UpgradeAllowance, revision Revision) Bound {
	b := Bound{grant: true}
	for _, u := range UpgradesFor(us, revision) {
		es, err := compileUpgrade(&u)
		if err != nil {
			continue
		}
		b.entries = append(b.entries, es...)
	}
	return b
}

// A Revision is a Composition revision as the function and admission know
// it: its name (a hash on a cluster), and, when its CompositionRevision
// could be read, its Composition and number.
type Revision struct {
	Name        string
	Composition string
	Number      int64
}

// UpgradesFor are the UpgradeAllowances that name the revision: in
// compositionRevisions, exactly or by a prefix ending in "*", or in
// compositions by Composition name and revision number.
func UpgradesFor(us []v1alpha1.UpgradeAllowance, revision Revision) []v1alpha1.UpgradeAllowance {
	if revision.Name == "" {
		return nil
	}
	var out []v1alpha1.UpgradeAllowance
	for _, u := range us {
		if slices.ContainsFunc(u.Spec.CompositionRevisions, func(r string) bool { return revisionMatches(r, revision.Name) }) ||
			slices.ContainsFunc(u.Spec.Compositions, func(c v1alpha1.CompositionRevisionRef) bool {
				return revision.Composition != "" && c.Name == revision.Composition && c.Revision == revision.Number
			}) {
			out = append(out, u)
		}
	}
	return out
}

// RevisionOf is the revision named name, with its Composition and number
// read off its CompositionRevision (label crossplane.io/composition-name,
// spec.revision) when cr is not nil.
func RevisionOf(name string, cr map[string]any) Revision {
	r := Revision{Name: name}
	if cr == nil {
		return r
	}
	u := unstructured.Unstructured{Object: cr}
	if u.GetName() != name {
		return r
	}
	r.Composition = u.GetLabels()["crossplane.io/composition-name"]
	if n, ok, _ := unstructured.NestedFieldNoCopy(cr, "spec", "revision"); ok {
		switch v := n.(type) {
		case int64:
			r.Number = v
		case float64:
			r.Number = int64(v)
		}
	}
	return r
}
