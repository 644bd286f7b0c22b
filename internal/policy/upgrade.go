package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

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
// pattern; each input's new generation in inputs, by kind and name (and
// generation, when given); a controller's new build by its service
// account in serviceAccount. No change, no UpgradeAllowance; one that does
// not compile names nothing.
func UpgradesFor(us []v1alpha1.UpgradeAllowance, up Upgrade) []v1alpha1.UpgradeAllowance {
	if len(up.Changes) == 0 {
		return nil
	}
	var out []v1alpha1.UpgradeAllowance
	for _, u := range us {
		// One that does not compile names nothing: the webhook that
		// validates UpgradeAllowances fails open while the provider is
		// down, so an invalid one can be stored.
		if _, err := compileUpgrade(&u); err != nil {
			continue
		}
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
	if c.Input != "" {
		return slices.ContainsFunc(u.Spec.Inputs, func(in v1alpha1.InputVersion) bool {
			return logic.InputKey(in.Kind, in.Namespace, in.Name) == c.Input && (in.Generation == 0 || strconv.FormatInt(in.Generation, 10) == c.To)
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

// CompileUpgrade checks an UpgradeAllowance the way the function and
// admission read it: the error names every field that does not compile (an
// UpgradeAllowance that does not compile grants nothing).
func CompileUpgrade(u *v1alpha1.UpgradeAllowance) error {
	_, err := compileUpgrade(u)
	return err
}

func compileUpgrade(u *v1alpha1.UpgradeAllowance) ([]entry, error) {
	var errs []string
	fail := func(field string, err error) { errs = append(errs, fmt.Sprintf("%s: %v", field, err)) }
	for i, r := range u.Spec.CompositionRevisions {
		if r == "" || strings.Contains(strings.TrimSuffix(r, "*"), "*") {
			fail(fmt.Sprintf("spec.compositionRevisions[%d]", i), errors.Errorf("%q must be a revision name, optionally ending in *", r))
		}
	}
	for i, c := range u.Spec.Compositions {
		if c.Name == "" || c.Revision < 1 {
			fail(fmt.Sprintf("spec.compositions[%d]", i), errors.Errorf("needs the Composition's name and a revision number of 1 or more, got %q and %d", c.Name, c.Revision))
		}
	}
	for i, f := range u.Spec.Functions {
		if f.Name == "" {
			fail(fmt.Sprintf("spec.functions[%d].name", i), errors.New("must name a Function"))
		}
		if err := logic.ValidVersionPattern(f.Version); err != nil {
			fail(fmt.Sprintf("spec.functions[%d].version", i), err)
		}
	}
	for i, in := range u.Spec.Inputs {
		if in.Kind == "" || in.Name == "" || in.Generation < 0 {
			fail(fmt.Sprintf("spec.inputs[%d]", i), errors.Errorf("needs the input's kind and name, and a generation of 0 (any) or more, got %q, %q and %d", in.Kind, in.Name, in.Generation))
		}
	}
	if sa := u.Spec.ServiceAccount; sa != "" {
		if p := strings.Split(sa, ":"); len(p) != 4 || sa != serviceAccountPrefix+p[2]+":"+p[3] || p[2] == "" || p[3] == "" {
			fail("spec.serviceAccount", errors.Errorf("%q must be a service account's user name, %s<namespace>:<name>", sa, serviceAccountPrefix))
		}
	}
	es := compileEntries("spec.policies", u.Spec.Policies, fail)
	if len(errs) > 0 {
		return nil, errors.Errorf("UpgradeAllowance %s is invalid: %s", u.GetName(), strings.Join(errs, "; "))
	}
	return es, nil
}

func revisionMatches(pattern, revision string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(revision, p)
	}
	return pattern == revision
}
