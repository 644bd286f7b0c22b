package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

func TestCompileUpgradeCached(t *testing.T) {
	u := &v1alpha1.UpgradeAllowance{Spec: v1alpha1.UpgradeAllowanceSpec{Rollout: &v1alpha1.UpgradeRollout{}}}
	first, ok, err := CompileUpgrade(u)
	if err != nil || !ok {
		t.Fatalf("CompileUpgrade(default rollout) = %v, %v", ok, err)
	}
	again, _, _ := CompileUpgrade(u)
	if &first.exprs[0] != &again.exprs[0] {
		t.Error("CompileUpgrade compiled the same rollout again; every run of every XR of a fleet would pay for it")
	}
	// The cached rule decides as a fresh one: the first XR of a fleet
	// none of which applied the upgrade takes it.
	xr := Member(map[string]any{}, "a", false, false)
	v, err := again.Check(map[string]any{VarXR: xr, VarXRs: []any{xr, Member(map[string]any{}, "b", false, false)}, VarItem: xr, VarNow: time.Now()}, time.Now())
	if err != nil || !v.OK {
		t.Errorf("the cached rule on the first of two XRs = %+v, %v; want it to take the upgrade", v, err)
	}

	bad := &v1alpha1.UpgradeAllowance{Spec: v1alpha1.UpgradeAllowanceSpec{Rollout: &v1alpha1.UpgradeRollout{PropagateWhen: []string{"nope("}}}}
	for range 2 {
		if _, _, err := CompileUpgrade(bad); err == nil {
			t.Error("CompileUpgrade(invalid) passed; an error is never cached as a rule")
		}
	}

	for i := range maxCompiled + 5 {
		u := &v1alpha1.UpgradeAllowance{Spec: v1alpha1.UpgradeAllowanceSpec{Rollout: &v1alpha1.UpgradeRollout{PropagateWhen: []string{fmt.Sprintf("size(xrs) > %d", i)}}}}
		if _, _, err := CompileUpgrade(u); err != nil {
			t.Fatal(err)
		}
	}
	compiled.mu.Lock()
	n := len(compiled.m)
	compiled.mu.Unlock()
	if n > maxCompiled {
		t.Errorf("the cache holds %d rules, more than its bound %d", n, maxCompiled)
	}
}
