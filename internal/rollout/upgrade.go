package rollout

import (
	"strings"
	"sync"

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
	key := strings.Join(exprs, "\x00")
	if r, ok := compiled.get(key); ok {
		return r, true, nil
	}
	env, err := NewEnv(VarXRs)
	if err != nil {
		return Rule{}, false, errors.Wrap(err, "cannot make the CEL environment")
	}
	r, err = Compile(env, exprs)
	if err != nil {
		return Rule{}, false, errors.Wrapf(err, "UpgradeAllowance %s: spec.rollout", u.GetName())
	}
	compiled.put(key, r)
	return r, true, nil
}

// compiled holds the roll-out rules compiled so far, by their expressions:
// the function compiles the same UpgradeAllowance's rollout on every run of
// every XR of the fleet it paces, and compiling costs more than counting
// the fleet. A rule is its expressions' programs, which CEL evaluates
// concurrently, so one compiled rule serves every run.
var compiled = &ruleCache{m: map[string]Rule{}}

// maxCompiled bounds the cache: roll-outs are few, and a cache that fills
// up with rules no UpgradeAllowance names any more starts over.
const maxCompiled = 128

type ruleCache struct {
	mu sync.Mutex
	m  map[string]Rule
}

func (c *ruleCache) get(key string) (Rule, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[key]
	return r, ok
}

func (c *ruleCache) put(key string, r Rule) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCompiled {
		clear(c.m)
	}
	c.m[key] = r
}
