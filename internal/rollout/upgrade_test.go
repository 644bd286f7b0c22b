package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

func TestRulesUpgrade(t *testing.T) {
	rules := NewRules()
	u := &v1alpha1.UpgradeAllowance{Spec: v1alpha1.UpgradeAllowanceSpec{Rollout: &v1alpha1.UpgradeRollout{}}}
	first, ok, err := rules.Upgrade(u)
	if err != nil || !ok {
		t.Fatalf("Rules.Upgrade(default rollout) = %v, %v", ok, err)
	}
	again, _, _ := rules.Upgrade(u)
	if &first.exprs[0] != &again.exprs[0] {
		t.Error("Rules.Upgrade compiled the same rollout again; every run of every XR of a fleet would pay for it")
	}
	// The cached rule decides as a fresh one: the first XR of a fleet
	// none of which applied the upgrade takes it.
	xr := Member(map[string]any{}, "a", false, false)
	v, err := again.Check(map[string]any{VarXR: xr, VarXRs: []any{xr, Member(map[string]any{}, "b", false, false)}, VarItem: xr, VarNow: time.Now()}, time.Now())
	if err != nil || !v.OK {
		t.Errorf("the cached rule on the first of two XRs = %+v, %v; want it to take the upgrade", v, err)
	}

	bad := &v1alpha1.UpgradeAllowance{Spec: v1alpha1.UpgradeAllowanceSpec{Rollout: &v1alpha1.UpgradeRollout{PropagateWhen: []string{"nope("}}}}
	for _, name := range []string{"first", "second"} {
		bad.SetName(name)
		if _, _, err := rules.Upgrade(bad); err == nil || !strings.Contains(err.Error(), "UpgradeAllowance "+name+": spec.rollout") {
			t.Errorf("Rules.Upgrade(invalid %s) = %v; want an error naming it, though the same expressions failed before", name, err)
		}
	}

	for i := range maxRules + 5 {
		u := &v1alpha1.UpgradeAllowance{Spec: v1alpha1.UpgradeAllowanceSpec{Rollout: &v1alpha1.UpgradeRollout{PropagateWhen: []string{fmt.Sprintf("size(xrs) > %d", i)}}}}
		if _, _, err := rules.Upgrade(u); err != nil {
			t.Fatal(err)
		}
	}
	if n := rules.m.Len(); n > maxRules {
		t.Errorf("Rules holds %d rules, more than its bound %d", n, maxRules)
	}
}
