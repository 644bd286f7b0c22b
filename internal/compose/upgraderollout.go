package compose

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// ConditionUpgraded says whether every composed resource of the XR was
// produced by the current logic (Composition revision and Function
// packages) and applied it (observed at the generation that carries it,
// its allowances used up): the function sets it while an UpgradeAllowance
// paces an upgrade across XRs, and reads it on the other XRs (their
// updated()).
const ConditionUpgraded = "KausalityUpgraded"

// Reasons of ConditionUpgraded.
const (
	ReasonCurrent        = "Current"
	ReasonUpgradeWaiting = "UpgradeWaiting"
)

// RequirementComposites are the XRs of the XR's kind, which an upgrade's
// roll-out counts; asked for only while some UpgradeAllowance has one.
const RequirementComposites = "kausality-composites"

// paced reports whether some UpgradeAllowance paces its upgrade across XRs.
func (r *run) paced() bool {
	return slices.ContainsFunc(r.upgrades, func(u v1alpha1.UpgradeAllowance) bool { return u.Spec.Rollout != nil })
}

// compositesRequirement asks for the XRs of the XR's kind (in its
// namespace, for a namespaced XR) while an upgrade is paced.
func (r *run) compositesRequirement(rs *fnv1.Requirements) {
	if !r.paced() {
		return
	}
	sel := selectAll(r.xr.GetAPIVersion(), r.xr.GetKind())
	if ns := r.xr.GetNamespace(); ns != "" {
		sel.Namespace = &ns
	}
	rs.Resources[RequirementComposites] = sel
	for i := range r.upgrades {
		if u := &r.upgrades[i]; u.Spec.Rollout != nil && len(u.Spec.Rollout.Blockers) > 0 {
			if p, err := upgradePlan(r.compiled.plans, u); err == nil {
				blockerRequirements(rs, p, r.xr.Object)
			}
		}
	}
}

// logicKey names the current logic in ConditionUpgraded's message.
func (r *run) logicKey() string {
	h := sha256.Sum256([]byte(r.revision + "\x00" + r.functions + "\x00" + r.inputs))
	return "logic " + hex.EncodeToString(h[:6])
}

// turn reports whether it is the XR's turn to take the upgrade up, and why
// not: the first UpgradeAllowance naming it that has a rollout decides,
// over the XRs of the XR's kind on the same Composition revision, in name
// order. Worked out once per upgrade and run.
func (r *run) turn(up *upgrade) (bool, string) {
	if up.turnDecided {
		return up.turnOK, up.turnWhy
	}
	up.turnDecided, up.turnOK = true, true
	for i := range up.by {
		u := &up.by[i]
		rule, ok, err := r.compiled.rollouts.Upgrade(u)
		if err != nil {
			// Fails closed: a roll-out that does not compile lets nothing
			// through (the UpgradeAllowance's Ready condition says why).
			up.turnOK, up.turnWhy, up.turnCode = false, err.Error(), metrics.ReasonRolloutInvalid
			r.metrics.Turn(u.GetName(), metrics.TurnFailed, 0, -1)
			return false, up.turnWhy
		}
		if !ok {
			continue
		}
		xr, xrs, updated := r.members()
		if len(u.Spec.Rollout.Blockers) > 0 {
			p, err := upgradePlan(r.compiled.plans, u)
			if err != nil {
				up.turnOK, up.turnWhy, up.turnCode = false, err.Error(), metrics.ReasonRolloutInvalid
				r.metrics.Turn(u.GetName(), metrics.TurnFailed, updated, len(xrs))
				return false, up.turnWhy
			}
			if why := r.loadBlockers(p, map[string]any{}); why != "" {
				up.turnOK, up.turnCode = false, metrics.ReasonRolloutHalted
				r.metrics.Turn(u.GetName(), metrics.TurnHalted, updated, len(xrs))
				up.turnWhy = fmt.Sprintf("the roll-out of UpgradeAllowance %s is halted: %s", u.GetName(), why)
				if !slices.Contains(r.waiting, up.turnWhy) {
					r.waiting = append(r.waiting, up.turnWhy)
				}
				return false, up.turnWhy
			}
		}
		v, err := rule.Check(map[string]any{rollout.VarXR: xr, rollout.VarXRs: xrs, rollout.VarNow: r.now, rollout.VarItem: xr}, r.now)
		switch {
		case err != nil:
			up.turnOK, up.turnWhy, up.turnCode = false, errors.Wrapf(err, errFmtRollout, u.GetName()).Error(), metrics.ReasonRolloutInvalid
			r.metrics.Turn(u.GetName(), metrics.TurnFailed, updated, len(xrs))
		case !v.OK:
			up.turnOK, up.turnCode = false, metrics.ReasonUpgradeTurn
			r.metrics.Turn(u.GetName(), metrics.TurnWaiting, updated, len(xrs))
			if w := fmt.Sprintf("waits for its turn in the roll-out of UpgradeAllowance %s: %s is false (%d of %d composites have applied it and are Ready)", u.GetName(), v.Failed, updated, len(xrs)); !slices.Contains(r.waiting, w) {
				r.waiting = append(r.waiting, w)
			}
			up.turnWhy = fmt.Sprintf("the upgrade (%s) rolls out across the %d composites of revision %s under UpgradeAllowance %s and it is not this one's turn: %s is false (%d have applied it and are Ready)",
				logic.Describe(up.changes), len(xrs), r.revision, u.GetName(), v.Failed, updated)
		default:
			r.metrics.Turn(u.GetName(), metrics.TurnTaken, updated, len(xrs))
		}
		return up.turnOK, up.turnWhy
	}
	return true, ""
}

// members are the XR and the XRs on its Composition revision as roll-out
// members, in name order, and how many of them are updated and Ready.
func (r *run) members() (map[string]any, []any, int) {
	all, _, err := required(r.req, RequirementComposites)
	if err != nil {
		r.problem(errors.Wrap(err, errReadRequiredComposites))
	}
	byID := map[string]map[string]any{}
	for _, x := range all {
		if compositionRevision(x.Object) == r.revision {
			byID[id(x)] = x.Object
		}
	}
	// The XR deciding, as this request has it.
	byID[id(r.xr)] = r.xr.Object
	ids := make([]string, 0, len(byID))
	for k := range byID {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	key := r.logicKey()
	var self map[string]any
	xrs := make([]any, 0, len(ids))
	n := 0
	for _, k := range ids {
		o := byID[k]
		c := policy.Condition(o, ConditionUpgraded)
		msg, _ := c["message"].(string)
		up := c["status"] == "True" && strings.HasPrefix(msg, key+":")
		ready := policy.ConditionTrue(o, "Ready")
		if up && ready {
			n++
		}
		m := rollout.Member(policy.CELView(o), k, up, ready)
		if k == id(r.xr) {
			self = m
		}
		xrs = append(xrs, m)
	}
	return self, xrs, n
}

func id(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// reportUpgraded sets ConditionUpgraded while an upgrade is paced: True
// once every composed resource records the current logic.
func (r *run) reportUpgraded(rsp *fnv1.RunFunctionResponse) {
	if !r.paced() {
		return
	}
	if r.behind {
		response.ConditionFalse(rsp, ConditionUpgraded, ReasonUpgradeWaiting).
			WithMessage(r.logicKey() + ": some composed resources have not applied the current logic yet").TargetComposite()
		return
	}
	response.ConditionTrue(rsp, ConditionUpgraded, ReasonCurrent).WithMessage(r.logicKey() + ": every composed resource is produced by the current logic").TargetComposite()
}
