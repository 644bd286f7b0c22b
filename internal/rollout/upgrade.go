package rollout

import (
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/memo"
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
	return compileUpgrade(u, compileWhen)
}

func compileUpgrade(u *v1alpha1.UpgradeAllowance, compile func(exprs []string) (Rule, error)) (Rule, bool, error) {
	if u.Spec.Rollout == nil {
		return Rule{}, false, nil
	}
	exprs := u.Spec.Rollout.PropagateWhen
	if len(exprs) == 0 {
		exprs = DefaultUpgradeWhen
	}
	r, err := compile(exprs)
	if err != nil {
		return Rule{}, false, errors.Wrapf(err, "UpgradeAllowance %s: spec.rollout", u.GetName())
	}
	return r, true, nil
}

// compileWhen compiles a roll-out's propagateWhen.
func compileWhen(exprs []string) (Rule, error) {
	env, err := NewEnv(VarXRs)
	if err != nil {
		return Rule{}, errors.Wrap(err, "cannot make the CEL environment")
	}
	return Compile(env, exprs)
}

// maxRules bounds Rules: roll-outs are few.
const maxRules = 128

// Rules holds the roll-out rules compiled so far, by their expressions:
// the function compiles the same UpgradeAllowance's rollout on every run of
// every XR of the fleet it paces, and compiling costs more than counting
// the fleet. A rule is its expressions' programs, which CEL evaluates
// concurrently, so one compiled rule serves every run. It is safe for
// concurrent use.
type Rules struct {
	m *memo.Cache[Rule]
}

// NewRules returns an empty Rules.
func NewRules() *Rules { return &Rules{m: memo.New[Rule](maxRules)} }

// Upgrade is CompileUpgrade, compiling each set of expressions once.
func (c *Rules) Upgrade(u *v1alpha1.UpgradeAllowance) (Rule, bool, error) {
	return compileUpgrade(u, func(exprs []string) (Rule, error) {
		return c.m.Get(strings.Join(exprs, "\x00"), func() (Rule, error) { return compileWhen(exprs) })
	})
}
