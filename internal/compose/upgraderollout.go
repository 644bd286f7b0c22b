package compose

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/response"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// Reasons of v1alpha1.ConditionUpgraded.
const (
	ReasonCurrent        = "Current"
	ReasonUpgradeWaiting = "UpgradeWaiting"
)

// paced reports whether some UpgradeAllowance paces its upgrade across XRs.
func (r *run) paced() bool {
	return slices.ContainsFunc(r.upgrades, func(u v1alpha1.UpgradeAllowance) bool { return u.Spec.Rollout != nil })
}

// rolloutRequirements asks for the blockers of the roll-outs that pace an
// upgrade. The fleet itself is not asked for: the provider counts it from
// its watch and records each composite's turn on it (turn).
func (r *run) rolloutRequirements(rs *fnv1.Requirements) {
	if !r.paced() {
		return
	}
	for i := range r.upgrades {
		if u := &r.upgrades[i]; u.Spec.Rollout != nil && len(u.Spec.Rollout.Blockers) > 0 {
			if p, err := upgradePlan(r.compiled.plans, u); err == nil {
				blockerRequirements(rs, p, r.xr.Object)
			}
		}
	}
}

// logicKey names the current logic in v1alpha1.ConditionUpgraded's message.
func (r *run) logicKey() string {
	h := sha256.Sum256([]byte(r.revision + "\x00" + r.functions + "\x00" + r.inputs))
	return "logic " + hex.EncodeToString(h[:6])
}

// turn reports whether it is the XR's turn to take the upgrade up, and why
// not: the first UpgradeAllowance naming it that has a rollout decides. A
// blocker halts it; otherwise the turn the provider recorded on the XR
// decides (hasTurn). Worked out once per upgrade and run; problems are the
// blockers and turn record it could not read, returned by the call that
// works it out and by no later one, so that the XR reports them once.
func (r *run) turn(up *upgrade) (ok bool, why string, problems []string) {
	if up.turnDecided {
		return up.turnOK, up.turnWhy, nil
	}
	up.turnDecided, up.turnOK = true, true
	for i := range up.by {
		u := &up.by[i]
		_, ok, err := r.compiled.rollouts.Upgrade(u)
		if err != nil {
			// Fails closed: a roll-out that does not compile lets nothing
			// through (the UpgradeAllowance's Ready condition says why).
			up.turnOK, up.turnWhy, up.turnCode = false, err.Error(), metrics.ReasonRolloutInvalid
			r.metrics.Turn(u.GetName(), metrics.TurnFailed, 0, -1)
			return false, up.turnWhy, nil
		}
		if !ok {
			continue
		}
		updated, total := rolloutCounts(u)
		if len(u.Spec.Rollout.Blockers) > 0 {
			p, err := upgradePlan(r.compiled.plans, u)
			if err != nil {
				up.turnOK, up.turnWhy, up.turnCode = false, err.Error(), metrics.ReasonRolloutInvalid
				r.metrics.Turn(u.GetName(), metrics.TurnFailed, updated, total)
				return false, up.turnWhy, nil
			}
			why, ps := r.checkBlockers(p, map[string]any{})
			problems = ps
			if why != "" {
				up.turnOK, up.turnCode = false, metrics.ReasonRolloutHalted
				r.metrics.Turn(u.GetName(), metrics.TurnHalted, updated, total)
				up.turnWhy = fmt.Sprintf("the roll-out of UpgradeAllowance %s is halted: %s", u.GetName(), why)
				up.turnWait = up.turnWhy
				return false, up.turnWhy, problems
			}
		}
		has, err := r.hasTurn(u)
		if err != nil {
			problems = append(problems, err.Error())
		}
		if has {
			r.metrics.Turn(u.GetName(), metrics.TurnTaken, updated, total)
			return true, "", problems
		}
		up.turnOK, up.turnCode = false, metrics.ReasonUpgradeTurn
		r.metrics.Turn(u.GetName(), metrics.TurnWaiting, updated, total)
		up.turnWait, up.turnWhy = waitingFor(u, up, r.revision)
		return false, up.turnWhy, problems
	}
	return true, "", nil
}

// waitingFor is what an XR waiting for its turn in u's roll-out of up
// (of revision) reports: its line in the Propagated condition and why a
// change is withheld.
func waitingFor(u *v1alpha1.UpgradeAllowance, up *upgrade, revision string) (wait, why string) {
	held := rolloutHeld(u)
	// The messages name no counts of the fleet: every waiting XR
	// carries them in its conditions, and a count that changed with
	// each XR that moved would rewrite every waiting XR's status, and
	// wake it, on every step of the roll-out. The counts are the
	// UpgradeAllowance's status.rollout.
	wait = fmt.Sprintf("waits for its turn in the roll-out of UpgradeAllowance %s: %s", u.GetName(), held)
	why = fmt.Sprintf("the upgrade (%s) rolls out across the composites of revision %s under UpgradeAllowance %s and it is not this one's turn: %s",
		logic.Describe(up.changes), revision, u.GetName(), held)
	return wait, why
}

// hasTurn reports whether the provider recorded on the XR that it is its
// turn in u's roll-out, at u's current generation and under the logic this
// run composes with. Only the provider writes the record (admission), and
// a record for another generation or logic holds the XR back; an
// unreadable one holds it back too, and is returned to be reported.
func (r *run) hasTurn(u *v1alpha1.UpgradeAllowance) (bool, error) {
	turns, err := rollout.ParseTurns(r.xr.GetAnnotations()[v1alpha1.AnnotationRolloutTurns])
	if err != nil {
		return false, errors.Wrapf(err, errFmtRolloutTurns, ref(r.xr.Object), v1alpha1.AnnotationRolloutTurns)
	}
	return turns.Has(u.GetName(), u.GetGeneration(), r.logicKey()), nil
}

// rolloutCounts are how many composites u's roll-out has brought the
// upgrade to (applied and Ready), and how many it counts, as the provider
// last published them.
func rolloutCounts(u *v1alpha1.UpgradeAllowance) (updated, total int) {
	if s := u.Status.Rollout; s != nil {
		return int(s.Updated), int(s.Composites)
	}
	return 0, 0
}

// rolloutHeld says what holds u's roll-out back, as the provider last
// published it.
func rolloutHeld(u *v1alpha1.UpgradeAllowance) string {
	if s := u.Status.Rollout; s != nil && s.Message != "" {
		return s.Message
	}
	return "the provider has not given it a turn yet"
}

// reportsUpgraded reports whether the run sets v1alpha1.ConditionUpgraded:
// while an upgrade is paced, while some composed resource records older
// logic (behind), and from then on. An XR behind reports its logic before any
// UpgradeAllowance paces it, so the provider counts it in the roll-out's
// first pass instead of after its next reconcile; once reported the
// condition is kept current rather than left stale.
func (r *run) reportsUpgraded(behind bool) bool {
	return r.paced() || behind || (r.xr != nil && policy.Condition(r.xr.Object, v1alpha1.ConditionUpgraded) != nil)
}

// reportUpgraded sets v1alpha1.ConditionUpgraded (reportsUpgraded): True
// once every composed resource records the current logic and has applied
// it; behind: some has not.
func (r *run) reportUpgraded(rsp *fnv1.RunFunctionResponse, behind bool) {
	if !r.reportsUpgraded(behind) {
		return
	}
	if behind {
		response.ConditionFalse(rsp, v1alpha1.ConditionUpgraded, ReasonUpgradeWaiting).
			WithMessage(r.logicKey() + ": some composed resources have not applied the current logic yet").TargetComposite()
		return
	}
	response.ConditionTrue(rsp, v1alpha1.ConditionUpgraded, ReasonCurrent).WithMessage(r.logicKey() + ": every composed resource is produced by the current logic").TargetComposite()
}

// waiting says why the XR waits in an upgrade's roll-out: each turn the run
// asked for and was refused (turn), once, in the order of the logic the
// upgrades name.
func (r *run) waiting() []string {
	keys := slices.Sorted(maps.Keys(r.upgradesBy))
	var out []string
	for _, k := range keys {
		if up := r.upgradesBy[k]; up != nil && up.turnWait != "" && !slices.Contains(out, up.turnWait) {
			out = append(out, up.turnWait)
		}
	}
	return out
}
