package compose

import (
	"encoding/json"
	"fmt"
	"path"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/memo"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// plan is the Input's propagation, compiled.
type plan struct {
	resources   map[string]rollout.Rule
	collections []collection
	blockers    []blocker
	// prefix names the required resource of each blocker.
	prefix string
}

type collection struct {
	v1beta1.Collection
	rule rollout.Rule
}

type blocker struct {
	v1beta1.Blocker
	when rollout.Rule
}

// maxPlans bounds the compiled plans the function keeps: one per
// Composition (and UpgradeAllowance) that uses propagation control.
const maxPlans = 256

// variables are the CEL variables p's collections and blockers name,
// checked: each name once, each collection selecting something, each
// blocker naming what it reads. An error names the Input field.
func variables(p *v1beta1.Propagation) ([]string, error) {
	var names []string
	seen := map[string]string{}
	for i, c := range p.Collections {
		if err := name(seen, c.Name, fmt.Sprintf("input propagation.collections[%d]", i)); err != nil {
			return nil, err
		}
		if c.MatchResourceName == "" && len(c.MatchLabels) == 0 {
			return nil, errors.Errorf(errFmtCollectionSelectsNothing, i, c.Name)
		}
		if _, err := path.Match(c.MatchResourceName, ""); err != nil {
			return nil, errors.Wrapf(err, errFmtCollectionMatchResourceName, i, c.MatchResourceName)
		}
		names = append(names, c.Name)
	}
	for i, b := range p.Blockers {
		if err := name(seen, b.Name, fmt.Sprintf("input propagation.blockers[%d]", i)); err != nil {
			return nil, err
		}
		if b.APIVersion == "" || b.Kind == "" || b.MatchName == "" {
			return nil, errors.Errorf(errFmtBlockerIncomplete, i, b.Name)
		}
		names = append(names, b.Name)
	}
	return names, nil
}

// planOf compiles p, once per Input through plans (nil: every time). An
// error names the Input field.
func planOf(plans *memo.Cache[*plan], p *v1beta1.Propagation) (*plan, error) {
	if p == nil {
		return nil, nil
	}
	key, err := json.Marshal(p)
	if err != nil {
		return nil, errors.Wrap(err, errEncodeInputPropagation)
	}
	return plans.Get(string(key), func() (*plan, error) { return compilePlan(p) })
}

// compilePlan compiles p.
func compilePlan(p *v1beta1.Propagation) (*plan, error) {
	names, err := variables(p)
	if err != nil {
		return nil, err
	}
	env, err := rollout.NewEnv(names...)
	if err != nil {
		return nil, err
	}
	out := &plan{resources: map[string]rollout.Rule{}, prefix: RequirementBlockerPrefix}
	for i, rp := range p.Resources {
		r, err := rollout.Compile(env, rp.PropagateWhen)
		if err != nil {
			return nil, errors.Wrapf(err, errFmtResourcePlan, i, rp.Name)
		}
		out.resources[rp.Name] = r
	}
	for i, c := range p.Collections {
		when := c.PropagateWhen
		if when == nil {
			when = []string{fmt.Sprintf("exponentiallyUpdated(item, %s)", c.Name)}
		}
		r, err := rollout.Compile(env, when)
		if err != nil {
			return nil, errors.Wrapf(err, errFmtCollection, i, c.Name)
		}
		out.collections = append(out.collections, collection{Collection: c, rule: r})
	}
	for i, b := range p.Blockers {
		when := []string{}
		if b.When != "" {
			when = []string{b.When}
		}
		r, err := rollout.Compile(env, when)
		if err != nil {
			return nil, errors.Wrapf(err, errFmtBlockerWhen, i, b.Name)
		}
		out.blockers = append(out.blockers, blocker{Blocker: b, when: r})
	}
	return out, nil
}

// name checks a CEL variable name is free.
func name(seen map[string]string, n, field string) error {
	switch n {
	case rollout.VarItem, rollout.VarXR, rollout.VarNow, rollout.VarObject:
		return errors.Errorf(errFmtNameReserved, field, n)
	}
	if n == "" {
		return errors.Errorf(errFmtNameEmpty, field)
	}
	if other, ok := seen[n]; ok {
		return errors.Errorf(errFmtNameTaken, field, n, other)
	}
	seen[n] = field
	return nil
}

// RequirementBlockerPrefix names the required resource of each blocker;
// RequirementUpgradeBlockerPrefix, followed by the UpgradeAllowance's name
// and a dash, that of each blocker of an upgrade's roll-out.
const (
	RequirementBlockerPrefix        = "kausality-blocker-"
	RequirementUpgradeBlockerPrefix = "kausality-upgrade-blocker-"
)

// upgradePlan is the plan of the blockers of an UpgradeAllowance's
// rollout: propagation control's, named for the UpgradeAllowance.
func upgradePlan(plans *memo.Cache[*plan], u *v1alpha1.UpgradeAllowance) (*plan, error) {
	bs := make([]v1beta1.Blocker, len(u.Spec.Rollout.Blockers))
	for i, b := range u.Spec.Rollout.Blockers {
		bs[i] = v1beta1.Blocker(b)
	}
	p, err := planOf(plans, &v1beta1.Propagation{Blockers: bs})
	if err != nil {
		return nil, errors.Wrapf(err, errFmtRolloutBlockers, u.GetName())
	}
	named := *p
	named.prefix = RequirementUpgradeBlockerPrefix + u.GetName() + "-"
	return &named, nil
}

// blockerRequirements asks Crossplane for the plan's blockers.
func blockerRequirements(rs *fnv1.Requirements, p *plan, xr map[string]any) {
	if p == nil {
		return
	}
	for _, b := range p.blockers {
		sel := &fnv1.ResourceSelector{ApiVersion: b.APIVersion, Kind: b.Kind, Match: &fnv1.ResourceSelector_MatchName{MatchName: b.MatchName}}
		ns := b.Namespace
		if ns == "" && xr != nil {
			ns = (&unstructured.Unstructured{Object: xr}).GetNamespace()
		}
		if ns != "" {
			sel.Namespace = &ns
		}
		rs.Resources[p.prefix+b.Name] = sel
	}
}

// selects reports whether it is a member of c.
func (c collection) selects(it *item) bool {
	if c.MatchResourceName != "" {
		if ok, _ := path.Match(c.MatchResourceName, it.resName); !ok {
			return false
		}
	}
	labels := (&unstructured.Unstructured{Object: it.desired}).GetLabels()
	for k, v := range c.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}
