package gate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

func TestConfigFor(t *testing.T) {
	mr := func(policies ...any) map[string]any {
		return map[string]any{"spec": map[string]any{"managementPolicies": policies}}
	}
	cases := map[string]struct {
		reason string
		cfg    Config
		mr     map[string]any
		want   []string
	}{
		"Default":         {reason: "Without a closed gate on the resource the configured one holds.", mr: map[string]any{"spec": map[string]any{}}, want: DefaultReadOnly},
		"CompositionSetO": {reason: "A Composition whose Input closes gates to [Observe] is read off the resource, so the provider keeps it.", mr: mr("Observe"), want: []string{Observe}},
		"OpenUpdateO":     {reason: "An open gate's closed part is what it closes back to.", mr: mr("Observe", "Update"), want: []string{Observe}},
		"OpenUpdateOLI":   {reason: "The default closed part of an open Update gate.", mr: mr("Observe", "Update", "LateInitialize"), want: []string{Observe, LateInitialize}},
		"OpenDelete":      {reason: "[Observe, Delete] lost LateInitialize to the supported combinations, not by choice: the configured closed gate holds.", mr: mr("Observe", "Delete"), want: DefaultReadOnly},
		"StarIsNotClosed": {reason: "[*] has no closed part: the configured one holds, a write cannot widen it.", mr: mr("*"), want: DefaultReadOnly},
		"LateInitOnly":    {reason: "A closed gate must observe; [LateInitialize] alone is not one.", mr: mr("LateInitialize", "Create"), want: DefaultReadOnly},
		"ConfiguredO":     {reason: "The configured closed gate is the fallback.", cfg: Config{ReadOnly: []string{Observe}}, mr: mr(), want: []string{Observe}},
		"NotAList":        {reason: "A malformed managementPolicies is no closed gate.", mr: map[string]any{"spec": map[string]any{"managementPolicies": "Observe"}}, want: DefaultReadOnly},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.cfg.Defaulted().For(tc.mr).ReadOnly
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nFor(...).ReadOnly: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestConfigDefaulted(t *testing.T) {
	got := Config{}.Defaulted()
	if diff := cmp.Diff(Config{ReadOnly: DefaultReadOnly, MaxOpen: DefaultMaxOpen}, got); diff != "" {
		t.Errorf("Config{}.Defaulted(): one default for the function and the provider: -want, +got:\n%s", diff)
	}
	if DefaultMaxOpen != time.Hour {
		t.Errorf("DefaultMaxOpen = %s; docs/COMPOSITIONS.md and the function's Input document 1h", DefaultMaxOpen)
	}
}

func TestConfigDecide(t *testing.T) {
	now := time.Date(2026, 1, 24, 10, 30, 0, 0, time.UTC)
	upd := allowance.Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
		Verbs: []string{Update}, Generation: 3,
		Trace: allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: 3, Timestamp: allowance.Timestamp(now.Add(-time.Minute))}},
	}
	stored := func(gen, observed int64) map[string]any {
		return map[string]any{"metadata": map[string]any{"generation": gen}, "status": map[string]any{"observedGeneration": observed}}
	}
	cases := map[string]struct {
		reason   string
		cfg      Config
		stored   map[string]any
		frozen   string
		want     []string
		consumed bool
		gen      int64
	}{
		"Creating":               {reason: "While being created nothing is observed: the allowance opens its gate.", stored: nil, want: []string{Observe, Update, LateInitialize}, gen: 3},
		"StoredObservedConsumes": {reason: "The stored observed generation consumes.", stored: stored(3, 3), want: DefaultReadOnly, consumed: true, gen: 3},
		"StoredBehind":           {reason: "Not observed yet: open.", stored: stored(3, 2), want: []string{Observe, Update, LateInitialize}, gen: 3},
		"ClosedToObserve":        {reason: "The configured closed gate is what the gate is built on.", cfg: Config{ReadOnly: []string{Observe}}, stored: stored(3, 2), want: []string{Observe, Update}, gen: 3},
		"Expired":                {reason: "An allowance older than MaxOpen opens nothing.", cfg: Config{MaxOpen: 30 * time.Second}, stored: stored(3, 2), want: DefaultReadOnly, gen: 3},
		"Frozen":                 {reason: "A freeze holds the allowance past the stored generation.", stored: stored(5, 2), frozen: "carol", want: DefaultReadOnly, gen: 6},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := tc.cfg.Decide(tc.stored, tc.stored, []allowance.Allowance{upd}, now, tc.frozen)
			if diff := cmp.Diff(tc.want, d.Policies); diff != "" {
				t.Errorf("%s\nPolicies: -want, +got:\n%s", tc.reason, diff)
			}
			if d.Allowances[0].Consumed != tc.consumed || d.Allowances[0].Generation != tc.gen {
				t.Errorf("%s\nallowance consumed %v at generation %d, want consumed %v at %d", tc.reason, d.Allowances[0].Consumed, d.Allowances[0].Generation, tc.consumed, tc.gen)
			}
		})
	}
}

func TestConfigOverdue(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	mr := func(policies ...any) map[string]any {
		return map[string]any{"spec": map[string]any{"managementPolicies": policies}}
	}
	stamped := func(ago time.Duration, mods ...func(*allowance.Allowance)) []allowance.Allowance {
		a := allowance.Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Update"}, Generation: 2,
			Trace: allowance.Trace{{Kind: "Bucket", Name: "b", Generation: 2, Timestamp: allowance.Timestamp(now.Add(-ago))}}}
		for _, m := range mods {
			m(&a)
		}
		return []allowance.Allowance{a}
	}
	consumed := func(a *allowance.Allowance) { a.Consumed = true }
	held := func(a *allowance.Allowance) { a.Held = true }
	pending := func(a *allowance.Allowance) { a.Pending = map[string]string{"spec.size": "h"} }
	chained := func(a *allowance.Allowance) { a.Relation = v1alpha1.RelationControllerChild }
	open := mr("Observe", "Update", "LateInitialize")
	cases := map[string]struct {
		reason string
		mr     map[string]any
		as     []allowance.Allowance
		want   bool
	}{
		"OpenPastTheLimit":  {reason: "Open two hours on an allowance the limit of one hour has expired: overdue.", mr: open, as: stamped(2 * time.Hour), want: true},
		"WithinTheLimit":    {reason: "Open for a minute: the provider closes it in time.", mr: open, as: stamped(time.Minute)},
		"Closed":            {reason: "A closed gate is never overdue.", mr: mr("Observe", "LateInitialize"), as: stamped(2 * time.Hour)},
		"MarkedConsumed":    {reason: "An allowance marked consumed opens nothing: whatever holds the gate open is not it.", mr: open, as: stamped(2*time.Hour, consumed)},
		"HeldByAFreeze":     {reason: "A freeze's held allowance does not expire.", mr: open, as: stamped(2*time.Hour, held)},
		"PendingPropagated": {reason: "A pending allowance opens nothing and does not expire.", mr: open, as: stamped(2*time.Hour, pending)},
		"NotExternal":       {reason: "A chained allowance opens no gate.", mr: open, as: stamped(2*time.Hour, chained)},
		"NoGate":            {reason: "A resource without managementPolicies has no gate to close.", mr: map[string]any{"spec": map[string]any{}}, as: stamped(2 * time.Hour)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := (Config{}).Overdue(tc.mr, tc.as, now); got != tc.want {
				t.Errorf("%s\nOverdue(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
