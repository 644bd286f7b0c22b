package gate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 24, 10, 30, 0, 0, time.UTC)
	ext := func(gen int64, at time.Time, verbs ...string) allowance.Allowance {
		return allowance.Allowance{
			Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
			Verbs: verbs, Generation: gen,
			Trace: allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: gen, Timestamp: allowance.Timestamp(at)}},
		}
	}
	held := func(a allowance.Allowance) allowance.Allowance { a.Held = true; return a }
	pending := func(a allowance.Allowance) allowance.Allowance {
		a.Pending = map[string]string{"spec.size": "abc"}
		return a
	}
	child := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "g", Resource: "r"}, Verbs: []string{"Update"}, Generation: 9}

	cases := map[string]struct {
		in           Inputs
		wantPolicies []string
		wantConsumed int
		wantExpired  int
		wantWithheld int
		wantPending  int
		// wantGeneration is the first allowance's generation afterwards,
		// when it must have moved.
		wantGeneration int64
		wantErr        bool
	}{
		"UnconsumedUpdateOpens": {
			in:           Inputs{Allowances: []allowance.Allowance{ext(3, now, "Update")}, Progress: allowance.Progress{Observed: 2, Reconciled: true}},
			wantPolicies: []string{Observe, Update, LateInitialize},
		},
		"ObservedGenerationConsumes": {
			in:           Inputs{Allowances: []allowance.Allowance{ext(3, now, "Update")}, Progress: allowance.Progress{Observed: 3, Reconciled: true}},
			wantPolicies: DefaultReadOnly, wantConsumed: 1,
		},
		"NotReconciledYetStaysOpen": {
			in:           Inputs{Allowances: []allowance.Allowance{ext(1, now, "Create")}},
			wantPolicies: []string{Observe, Create, LateInitialize},
		},
		"ExpiredOpensNothing": {
			in:           Inputs{Allowances: []allowance.Allowance{ext(3, now.Add(-time.Hour), "Update")}, Progress: allowance.Progress{Observed: 2, Reconciled: true}, Limit: time.Minute},
			wantPolicies: DefaultReadOnly, wantExpired: 1,
		},
		"FreezeWithholds": {
			in:           Inputs{Allowances: []allowance.Allowance{ext(3, now, "Update")}, Progress: allowance.Progress{Observed: 2, Reconciled: true}, Frozen: "oncall"},
			wantPolicies: DefaultReadOnly, wantWithheld: 1,
		},
		"FreezeDoesNotConsume": {
			in:           Inputs{Allowances: []allowance.Allowance{ext(3, now, "Update")}, Progress: allowance.Progress{Observed: 4, Reconciled: true}, Generation: 4, Frozen: "oncall"},
			wantPolicies: DefaultReadOnly, wantWithheld: 1, wantGeneration: 5,
		},
		"FreezeLongerThanTheLimitKeepsTheChange": {
			in:           Inputs{Allowances: []allowance.Allowance{held(ext(3, now.Add(-3*time.Hour), "Update"))}, Progress: allowance.Progress{Observed: 2, Reconciled: true}, Limit: time.Hour, Frozen: "oncall"},
			wantPolicies: DefaultReadOnly, wantWithheld: 1,
		},
		"PendingOpensNothingAndIsNotConsumed": {
			in:           Inputs{Allowances: []allowance.Allowance{pending(ext(3, now.Add(-3*time.Hour), "Update"))}, Progress: allowance.Progress{Observed: 4, Reconciled: true}, Generation: 4, Limit: time.Hour},
			wantPolicies: DefaultReadOnly, wantPending: 1, wantGeneration: 5,
		},
		"ControllerChildOpensNothing": {
			in:           Inputs{Allowances: []allowance.Allowance{child}, Progress: allowance.Progress{Observed: 2, Reconciled: true}},
			wantPolicies: DefaultReadOnly,
		},
		"UnsupportedFailsClosed": {
			in:           Inputs{Allowances: []allowance.Allowance{ext(3, now, "Update", "Delete")}, Progress: allowance.Progress{Observed: 2, Reconciled: true}},
			wantPolicies: DefaultReadOnly, wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now = now
			if tc.in.ReadOnly == nil {
				tc.in.ReadOnly = DefaultReadOnly
			}
			d := Decide(tc.in)
			if diff := cmp.Diff(tc.wantPolicies, d.Policies); diff != "" {
				t.Errorf("Policies: -want +got:\n%s", diff)
			}
			if (d.Err != nil) != tc.wantErr {
				t.Errorf("Err = %v, want error %v", d.Err, tc.wantErr)
			}
			if len(d.Consumed) != tc.wantConsumed || len(d.Expired) != tc.wantExpired || len(d.Withheld) != tc.wantWithheld {
				t.Errorf("consumed/expired/withheld = %d/%d/%d, want %d/%d/%d", len(d.Consumed), len(d.Expired), len(d.Withheld), tc.wantConsumed, tc.wantExpired, tc.wantWithheld)
			}
			if len(d.Pending) != tc.wantPending {
				t.Errorf("pending = %d, want %d", len(d.Pending), tc.wantPending)
			}
			if len(d.Allowances) != len(tc.in.Allowances) {
				t.Fatalf("Decide dropped allowances: %d of %d kept", len(d.Allowances), len(tc.in.Allowances))
			}
			if tc.wantConsumed > 0 && !d.Allowances[0].Consumed {
				t.Error("consumed allowance not marked Consumed")
			}
			if tc.wantGeneration != 0 && (d.Allowances[0].Generation != tc.wantGeneration || !d.Changed || d.Allowances[0].Consumed) {
				t.Errorf("held allowance = generation %d consumed %v (changed %v), want generation %d unconsumed", d.Allowances[0].Generation, d.Allowances[0].Consumed, d.Changed, tc.wantGeneration)
			}
			if tc.in.Allowances[0].Consumed {
				t.Error("Decide modified its input")
			}
		})
	}
}

// TestFreezeOfAnyLength is the freeze defect of issue 12: a freeze longer
// than the gate's time limit must not expire the change it holds; once it
// lifts, the gate opens and its limit counts from then.
func TestFreezeOfAnyLength(t *testing.T) {
	start := time.Date(2026, 1, 24, 10, 0, 0, 0, time.UTC)
	a := allowance.Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
		Verbs: []string{"Update"}, Generation: 3,
		Trace: allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: 3, Timestamp: allowance.Timestamp(start)}},
	}
	in := Inputs{Allowances: []allowance.Allowance{a}, Progress: allowance.Progress{Observed: 2, Reconciled: true}, Generation: 2, ReadOnly: DefaultReadOnly, Limit: time.Hour}

	in.Now, in.Frozen = start.Add(time.Minute), "oncall"
	d := Decide(in)
	if len(d.Withheld) != 1 || !d.Allowances[0].Held || !d.Changed {
		t.Fatalf("at the freeze: withheld %d, held %v, changed %v; want 1, true, true", len(d.Withheld), d.Allowances[0].Held, d.Changed)
	}

	in.Allowances, in.Now = d.Allowances, start.Add(2*time.Hour) // twice the limit, still frozen
	if d = Decide(in); len(d.Withheld) != 1 || len(d.Expired) != 0 {
		t.Fatalf("frozen for twice the limit: withheld %d expired %d; want 1, 0", len(d.Withheld), len(d.Expired))
	}

	in.Allowances, in.Frozen = d.Allowances, ""
	d = Decide(in)
	if diff := cmp.Diff([]string{Observe, Update, LateInitialize}, d.Policies); diff != "" {
		t.Fatalf("after the freeze lifted: -want +got:\n%s", diff)
	}
	if got := d.Allowances[0]; got.Held || got.Trace.Last().Timestamp != allowance.Timestamp(in.Now) || !d.Changed {
		t.Fatalf("after the freeze lifted: held %v, stamped %s; want false, %s", got.Held, got.Trace.Last().Timestamp, allowance.Timestamp(in.Now))
	}
	in.Allowances, in.Now = d.Allowances, in.Now.Add(30*time.Minute)
	if d = Decide(in); len(d.Open) != 1 {
		t.Fatalf("within the limit after the freeze: open %d, want 1", len(d.Open))
	}
	in.Allowances, in.Now = d.Allowances, in.Now.Add(time.Hour)
	if d = Decide(in); len(d.Expired) != 1 {
		t.Fatalf("past the limit after the freeze: expired %d, want 1", len(d.Expired))
	}
}

func TestUnshipped(t *testing.T) {
	grant := func(verb string, paths ...string) allowance.Allowance {
		a := allowance.ExternalGrant("g", "Bucket", verb, 6, allowance.Trace{{Kind: "XR", Name: "x"}, {Kind: "Bucket", Name: "b"}})
		for _, p := range paths {
			a.Mutations = append(a.Mutations, v1alpha1.MutationBound{JSONPath: p, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}})
		}
		return a
	}
	consumed := func(a allowance.Allowance) allowance.Allowance { a.Consumed = true; return a }
	pendingGrant := func(a allowance.Allowance) allowance.Allowance {
		a.Pending = map[string]string{"spec.forProvider.size": "abc"}
		return a
	}
	size := mutation.Mutation{Path: "spec.forProvider.size", Verb: v1alpha1.MutationMutate}
	tags := mutation.Mutation{Path: "spec.forProvider.tags.team", Verb: v1alpha1.MutationInsert}
	cases := map[string]struct {
		as   []allowance.Allowance
		want []mutation.Mutation
	}{
		"NoAllowance":      {want: []mutation.Mutation{size, tags}},
		"ShipsOne":         {as: []allowance.Allowance{grant(v1alpha1.VerbUpdate, "spec.forProvider.size")}, want: []mutation.Mutation{tags}},
		"ShipsAnAncestor":  {as: []allowance.Allowance{grant(v1alpha1.VerbUpdate, "spec.forProvider.size", "spec.forProvider.tags")}},
		"CreationShipsAll": {as: []allowance.Allowance{grant(v1alpha1.VerbCreate)}},
		"ConsumedShipsNothing": {
			as: []allowance.Allowance{consumed(grant(v1alpha1.VerbUpdate, "spec.forProvider.size"))}, want: []mutation.Mutation{size, tags},
		},
		"PendingShips":       {as: []allowance.Allowance{pendingGrant(grant(v1alpha1.VerbUpdate, "spec.forProvider.size"))}, want: []mutation.Mutation{tags}},
		"DeleteShipsNothing": {as: []allowance.Allowance{grant(v1alpha1.VerbDelete)}, want: []mutation.Mutation{size, tags}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Unshipped(tc.as, []mutation.Mutation{size, tags})); diff != "" {
				t.Errorf("Unshipped(): -want, +got:\n%s", diff)
			}
		})
	}
}

// TestFreezeMatters: whenever FreezeMatters says a freeze cannot change the
// decision, deciding frozen and not frozen gives the same decision, so
// skipping the read of the parents loses nothing; and a live allowance
// does make it matter.
func TestFreezeMatters(t *testing.T) {
	now := time.Date(2026, 1, 24, 10, 30, 0, 0, time.UTC)
	ext := func(gen int64, consumed, held bool) allowance.Allowance {
		return allowance.Allowance{
			Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
			Verbs: []string{"Update"}, Generation: gen, Consumed: consumed, Held: held,
			Trace: allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: gen, Timestamp: allowance.Timestamp(now)}},
		}
	}
	child := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "g", Resource: "r"}, Verbs: []string{"Update"}, Generation: 9}
	cases := map[string]struct {
		as   []allowance.Allowance
		want bool
	}{
		"None":                {want: false},
		"ConsumedOnly":        {as: []allowance.Allowance{ext(3, true, false), ext(4, true, true)}, want: false},
		"ChildOnly":           {as: []allowance.Allowance{child}, want: false},
		"Unconsumed":          {as: []allowance.Allowance{ext(3, true, false), ext(4, false, false)}, want: true},
		"HeldWhileFrozen":     {as: []allowance.Allowance{ext(4, false, true)}, want: true},
		"ConsumedByProgress":  {as: []allowance.Allowance{ext(2, false, false)}, want: true},
		"ChildBesideConsumed": {as: []allowance.Allowance{child, ext(2, true, false)}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := FreezeMatters(tc.as); got != tc.want {
				t.Fatalf("FreezeMatters = %v, want %v", got, tc.want)
			}
			in := Inputs{Allowances: tc.as, Progress: allowance.Progress{Observed: 2, Reconciled: true}, Generation: 2, ReadOnly: DefaultReadOnly, Now: now, Limit: time.Hour}
			thawed := Decide(in)
			in.Frozen = "oncall"
			frozen := Decide(in)
			if same := cmp.Diff(thawed, frozen) == ""; same == tc.want {
				t.Fatalf("decision frozen and thawed the same: %v; FreezeMatters %v", same, tc.want)
			}
		})
	}
}

// TestWithdrawExpiredApproval: a resize whose gate opened and expired
// while the cloud refused it must not count as shipped: the next gate that
// opens for another change (the tier) would otherwise ship the size along.
func TestWithdrawExpiredApproval(t *testing.T) {
	now := time.Date(2026, 1, 24, 10, 30, 0, 0, time.UTC)
	spec := func(size int64, tier string) map[string]any {
		return map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": size, "tier": tier}}}
	}
	update := func(gen int64, at time.Time, obj map[string]any, path string) allowance.Allowance {
		return allowance.Allowance{
			Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
			Verbs: []string{v1alpha1.VerbUpdate}, Generation: gen,
			Trace:     allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: gen, Timestamp: allowance.Timestamp(at)}},
			Mutations: []v1alpha1.MutationBound{{JSONPath: path, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
			Values:    allowance.ValuesOf(obj, []mutation.Mutation{{Path: path, Verb: v1alpha1.MutationMutate}}, nil),
		}
	}
	// Approved at generation 3 when the resize's gate opened; before it,
	// generation 1 with size 1 was.
	approved := Approval{Spec: SpecRecord(spec(2, "standard")), Generation: 3}
	withBefore := approved
	withBefore.Before = mutation.Applied{"spec.forProvider.size": SpecRecord(spec(1, "standard"))["spec.forProvider.size"]}
	resize := update(3, now.Add(-2*time.Hour), spec(2, "standard"), "spec.forProvider.size")
	tier := update(5, now, spec(2, "premium"), "spec.forProvider.tier")
	neverApplied := allowance.Progress{Approved: 3, HasApproved: true}
	cases := map[string]struct {
		reason        string
		approved      Approval
		spec          map[string]any
		progress      allowance.Progress
		wantWithdraws bool
		wantUncovered []string
		wantPolicies  []string
		wantSize      string // the size the approval holds after: "" for none
	}{
		"NeverApplied": {reason: "The provider never synced generation 3 and nothing says what came before: the size leaves the approval, and the tier's gate holds for it.",
			approved: approved, spec: spec(2, "premium"), progress: neverApplied, wantWithdraws: true,
			wantUncovered: []string{"spec.forProvider.size"}, wantPolicies: DefaultReadOnly},
		"NeverAppliedRestoresBefore": {reason: "The approval goes back to the size the cloud still has; the spec still holds the refused size, so the tier's gate holds for it.",
			approved: withBefore, spec: spec(2, "premium"), progress: neverApplied, wantWithdraws: true,
			wantUncovered: []string{"spec.forProvider.size"}, wantPolicies: DefaultReadOnly, wantSize: withBefore.Before["spec.forProvider.size"]},
		"RevertedSpecOpens": {reason: "Once the function answers the resource with the size the cloud has again, the tier's gate opens for the tier alone.",
			approved: withBefore, spec: spec(1, "premium"), progress: neverApplied, wantWithdraws: true,
			wantPolicies: []string{Observe, Update, LateInitialize}, wantSize: withBefore.Before["spec.forProvider.size"]},
		"Applied": {reason: "The provider synced generation 3 (the resize was applied): the tier goes through alone.",
			approved: withBefore, spec: spec(2, "premium"), progress: allowance.Progress{Observed: 3, Reconciled: true, Approved: 3, HasApproved: true},
			wantPolicies: []string{Observe, Update, LateInitialize}, wantSize: approved.Spec["spec.forProvider.size"]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Decide(Inputs{Allowances: []allowance.Allowance{resize, tier}, ReadOnly: DefaultReadOnly, Now: now, Limit: time.Hour,
				Approved: tc.approved, Spec: SpecRecord(tc.spec), Progress: tc.progress, Generation: 4})
			if d.Withdraws != tc.wantWithdraws {
				t.Errorf("%s\nWithdraws = %t, want %t", tc.reason, d.Withdraws, tc.wantWithdraws)
			}
			if diff := cmp.Diff(tc.wantUncovered, d.Uncovered); diff != "" {
				t.Errorf("%s\nUncovered: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantPolicies, d.Policies); diff != "" {
				t.Errorf("%s\nPolicies: -want +got:\n%s", tc.reason, diff)
			}
			if got := d.Approved.Spec["spec.forProvider.size"]; got != tc.wantSize {
				t.Errorf("%s\nthe approval holds size %q, want %q", tc.reason, got, tc.wantSize)
			}
		})
	}
}
