package compose

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// hold is why propagation control keeps a change from a composed resource.
type hold struct {
	resource, kind, name string
	why                  string
	code                 string    // why's class, a metrics.Reason* constant
	opens                time.Time // when a closed maintenance window opens; zero otherwise
}

func (h hold) String() string {
	s := fmt.Sprintf("resource %s (%s %s): held: %s", h.resource, h.kind, h.name, h.why)
	if !h.opens.IsZero() {
		s += fmt.Sprintf("; the window opens at %s", h.opens.UTC().Format(time.RFC3339))
	}
	return s
}

// pacing is propagation control's word on one composed resource's change
// (DESIGN §6): whether the propagation plan paces it at all and, if it
// does, why it holds it back (hold) or, hold nil, that it goes now. A held
// resource keeps its observed spec and a closed gate, and its change is
// stamped on it as a pending allowance (heldBack, stampExternal), so that
// the XR's generation moving on cannot lose it; a held creation whose turn
// came is released (verdictOf).
type pacing struct {
	paced bool
	hold  *hold
}

// pace is propagation control's batch: the pacing of each item's change,
// by index, or nil when it paces none. It changes no item: every rule
// reads the resources as decide left them, before any is held, for
// whether a member of a collection counts as updated depends on every
// member's decision. In Log mode it paces nothing: changes flow as they
// would without Kausality. It returns the blockers and rules it could not
// read or evaluate.
func (r *run) pace(items []*item) (batch []pacing, problems []string) {
	p := r.cfg.plan
	if p == nil || r.log {
		return nil, nil
	}
	vars := map[string]any{rollout.VarXR: policy.CELView(r.xr.Object), rollout.VarNow: r.now, rollout.VarObject: nil}
	blocked, problems := r.checkBlockers(p, vars)
	cel, inColl := r.collect(p, items, vars)
	batch = make([]pacing, len(items))
	for i, it := range items {
		if !it.ok || (!it.ch.create && len(it.ch.passed) == 0 && it.pendingCreate == nil) {
			continue // nothing to propagate
		}
		rules := map[string]rollout.Rule{}
		if rule, ok := p.resources[it.resName]; ok {
			rules["resource"] = rule
		}
		for _, c := range inColl[it.resName] {
			rules["collection "+c.Name] = c.rule
		}
		if len(rules) == 0 {
			continue
		}
		h := hold{resource: it.resName, kind: it.dm.child.Kind, name: it.dm.name, why: blocked, code: metrics.ReasonBlocker}
		if h.why == "" {
			vars[rollout.VarItem] = cel[it]
			if err := r.check(rules, vars, &h); err != nil {
				problems = append(problems, err.Error())
			}
		}
		batch[i].paced = true
		if h.why != "" {
			batch[i].hold = &h
		}
	}
	return batch, problems
}

// collect is the CEL view of every item, as a member of a collection,
// and the collections each is in, by resource name. Each collection's
// members, in roll-out order, become the CEL variable named after it.
func (r *run) collect(p *plan, items []*item, vars map[string]any) (map[*item]map[string]any, map[string][]collection) {
	cel := map[*item]map[string]any{}
	for _, it := range items {
		updated, ready := r.memberState(it, &it.ch, it.have)
		obj := it.observed
		if obj == nil {
			obj = it.desired
		}
		cel[it] = rollout.Member(policy.CELView(obj), it.resName, updated, ready)
	}
	ordered := slices.Clone(items)
	sort.SliceStable(ordered, func(i, j int) bool { return naturalLess(ordered[i].resName, ordered[j].resName) })
	inColl := map[string][]collection{}
	for _, c := range p.collections {
		members := []any{} // in roll-out order
		for _, it := range ordered {
			if c.selects(it) {
				members = append(members, cel[it])
				inColl[it.resName] = append(inColl[it.resName], c)
			}
		}
		vars[c.Name] = members
	}
	return cel, inColl
}

// check evaluates the rules that pace one resource, by name, and says in h
// why the first that does not hold keeps its change back; a rule that
// fails to evaluate holds it too, and its error is returned.
func (r *run) check(rules map[string]rollout.Rule, vars map[string]any, h *hold) error {
	keys := make([]string, 0, len(rules))
	for k := range rules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := rules[k].Check(vars, r.now)
		if err != nil {
			h.why, h.code = fmt.Sprintf("propagateWhen %q of %s failed to evaluate", v.Failed, k), metrics.ReasonEvalFailed
			return errors.Wrapf(err, errFmtEvaluatePropagateWhen, k, h.resource)
		}
		if !v.OK {
			h.why, h.opens, h.code = fmt.Sprintf("propagateWhen %q of %s is false", v.Failed, k), v.Opens, metrics.ReasonPropagateWhen
			if !v.Opens.IsZero() {
				h.code = metrics.ReasonWindow
			}
			return nil
		}
	}
	return nil
}

// heldBack is the item's change as propagation control holds it back: it
// keeps from the cloud what the decision let through, a change of its own
// rather than an edit of the decision's. An update keeps the observed values
// (in the change's copy of the spec), and a creation creates the resource in
// Kubernetes only, behind a closed gate; either is recorded as pending on
// the resource, so its cause outlasts the XR's allowance or lifecycle
// phase. The error says why it kept the whole spec as observed
// (keepObserved).
func heldBack(it *item) (change, error) {
	ch := it.ch
	if ch.create {
		ch.held, ch.passed, ch.covered = ch.passed, nil, nil
		ch.pending = mutation.Record("spec", it.desired["spec"], skipManaged)
		if len(ch.pending) == 0 {
			ch.pending = map[string]string{"spec": allowance.Absent}
		}
		return ch, nil
	}
	ch.pending = allowance.ValuesOf(it.desired, ch.covered, skipManaged)
	err := keepObserved(it.dm.child, it.observed, ch.object(it.desired), ch.passed, &ch)
	ch.held = ch.covered
	ch.passed, ch.covered, ch.upgrades, ch.released, ch.upgrade = nil, nil, nil, nil, nil
	return ch, err
}

// checkBlockers puts each blocker, as load read it, into vars and names
// the first that blocks now, or "". It returns the blockers it could not
// read or evaluate.
func (r *run) checkBlockers(p *plan, vars map[string]any) (why string, problems []string) {
	for _, b := range p.blockers {
		read := r.blockers[p.prefix+b.Name]
		objs, err := read.objs, read.err
		if err != nil {
			problems = append(problems, errors.Wrapf(err, errFmtReadBlocker, b.Name).Error())
			if why == "" {
				why = fmt.Sprintf("blocker %s cannot be read", b.Name)
			}
			continue
		}
		if len(objs) == 0 {
			vars[b.Name] = nil
			continue
		}
		obj := policy.CELView(objs[0].Object)
		vars[b.Name] = obj
		if why != "" {
			continue
		}
		vars[rollout.VarObject] = obj
		v, err := b.when.Check(vars, r.now)
		vars[rollout.VarObject] = nil
		switch {
		case err != nil:
			problems = append(problems, errors.Wrapf(err, errFmtEvaluateWhenBlocker, b.Name).Error())
			why = fmt.Sprintf("blocker %s (%s %s) exists and its when failed to evaluate", b.Name, b.Kind, b.MatchName)
		case v.OK:
			why = fmt.Sprintf("blocker %s (%s %s) exists", b.Name, b.Kind, b.MatchName)
			if b.When != "" {
				why += fmt.Sprintf(" and %q holds", b.When)
			}
		}
	}
	return why, problems
}

// memberState is a composed resource's updated() and ready(): updated
// means applied in the cloud, not merely written: nothing let through,
// withheld or held this run (by ch, its change as decided or as its
// verdict answers it), no allowance of have (its allowances, as stored or
// as answered) that ships its spec left unconsumed (pending, or open and
// not yet applied), and its provider has observed its generation and is
// Synced.
func (r *run) memberState(it *item, ch *change, have []allowance.Allowance) (updated, ready bool) {
	if it.observed == nil {
		return false, false
	}
	ready = policy.ConditionTrue(it.observed, "Ready")
	if !it.ok || len(ch.passed) > 0 || len(ch.withheld) > 0 || len(ch.held) > 0 {
		return false, ready
	}
	for _, a := range allowance.Unconsumed(have, it.observed) {
		if a.ShipsSpec() {
			return false, ready
		}
	}
	og, ok := allowance.ObservedGeneration(it.observed)
	return ok && og == it.om.generation && policy.ConditionTrue(it.observed, "Synced"), ready
}

// naturalLess orders names as people do: pool-2 before pool-10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
