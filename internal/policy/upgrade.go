package policy

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
)

// UpgradeBound is what the UpgradeAllowances for a logic change grant: the
// union of the entries of those that name every part of it (UpgradesFor).
// Kinds they do not name get nothing. Entries that do not compile grant
// nothing either.
func UpgradeBound(us []v1alpha1.UpgradeAllowance, up Upgrade) Bound {
	b := Bound{grant: true}
	for _, u := range UpgradesFor(us, up) {
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

// An Upgrade is the logic change of a composed resource as UpgradeAllowances
// are matched against it: the revision producing it now, and what changed
// since the logic that last produced it (logic.Changes).
type Upgrade struct {
	Revision Revision
	Changes  []logic.Change
}

// UpgradesFor are the UpgradeAllowances that name every part of the
// upgrade: a new revision in compositionRevisions, exactly or by a prefix
// ending in "*", or in compositions by Composition name and revision
// number; each new Function package in functions, by name and version
// pattern; a controller's new build by its service account in
// serviceAccount. No change, no UpgradeAllowance.
func UpgradesFor(us []v1alpha1.UpgradeAllowance, up Upgrade) []v1alpha1.UpgradeAllowance {
	if len(up.Changes) == 0 {
		return nil
	}
	var out []v1alpha1.UpgradeAllowance
	for _, u := range us {
		if !slices.ContainsFunc(up.Changes, func(c logic.Change) bool { return !upgradeNames(&u, up.Revision, c) }) {
			out = append(out, u)
		}
	}
	return out
}

// upgradeNames reports whether u names one change of an upgrade to revision.
func upgradeNames(u *v1alpha1.UpgradeAllowance, revision Revision, c logic.Change) bool {
	if c.Controller != "" {
		// Any build of the controller: the new build is known only by
		// its hash, and the policies bound what it may change.
		return u.Spec.ServiceAccount == c.Controller
	}
	if c.Function != "" {
		return slices.ContainsFunc(u.Spec.Functions, func(f v1alpha1.FunctionVersion) bool {
			return f.Name == c.Function && logic.VersionMatches(f.Version, c.To)
		})
	}
	if revision.Name == "" || revision.Name != c.To {
		return false
	}
	return slices.ContainsFunc(u.Spec.CompositionRevisions, func(r string) bool { return revisionMatches(r, revision.Name) }) ||
		slices.ContainsFunc(u.Spec.Compositions, func(ref v1alpha1.CompositionRevisionRef) bool {
			return revision.Composition != "" && ref.Name == revision.Composition && ref.Revision == revision.Number
		})
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
