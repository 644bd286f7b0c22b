package rollout

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// VarXRs is the composites an upgrade rolls out across, in a rollout's
// propagateWhen; xr (VarXR) is the composite deciding.
const VarXRs = "xrs"

// DefaultUpgradeWhen is an UpgradeAllowance rollout's propagateWhen when it
// names none: one composite, then two, then four, each batch once the one
// before it applied the upgrade and is Ready.
var DefaultUpgradeWhen = []string{"exponentiallyUpdated(xr, xrs)"}

// CompileUpgrade compiles an UpgradeAllowance's rollout. ok is false when
// it has none: every composite takes the upgrade at once.
func CompileUpgrade(u *v1alpha1.UpgradeAllowance) (r Rule, ok bool, err error) {
	if u.Spec.Rollout == nil {
		return Rule{}, false, nil
	}
	exprs := u.Spec.Rollout.PropagateWhen
	if len(exprs) == 0 {
		exprs = DefaultUpgradeWhen
	}
	env, err := NewEnv(VarXRs)
	if err != nil {
		return Rule{}, false, errors.Wrap(err, "cannot make the CEL environment")
	}
	r, err = Compile(env, exprs)
	if err != nil {
		return Rule{}, false, errors.Wrapf(err, "UpgradeAllowance %s: spec.rollout", u.GetName())
	}
	return r, true, nil
}
