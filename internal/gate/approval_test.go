package gate

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// bucket is a managed resource with region and size, as stored at gen with
// the approval annotations given (none when approvedGen < 0).
func bucket(gen int64, region string, size int64, observed int64, approvedGen int64, approved map[string]any) map[string]any {
	ann := map[string]any{}
	mr := map[string]any{
		"metadata": map[string]any{"generation": gen, "annotations": ann},
		"spec": map[string]any{
			"forProvider":        map[string]any{"region": region, "size": size},
			"managementPolicies": []any{Observe, LateInitialize},
		},
		"status": map[string]any{"observedGeneration": observed},
	}
	if approvedGen >= 0 {
		a := Approval{Spec: SpecRecord(approved), Generation: approvedGen}
		for k, v := range a.Annotations() {
			ann[k] = v
		}
	}
	return mr
}

func TestConfigDecideApproval(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	update := func(gen int64, paths ...string) allowance.Allowance {
		a := allowance.Allowance{
			Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
			Verbs: []string{Update}, Generation: gen,
			Trace: allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: gen, Timestamp: allowance.Timestamp(now)}},
		}
		for _, p := range paths {
			a.Mutations = append(a.Mutations, v1alpha1.MutationBound{JSONPath: p, Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}})
		}
		return a
	}
	create := update(1)
	create.Verbs = []string{Create}
	applied := bucket(3, "eu", 1, 3, -1, nil) // what the gate let through at generation 3
	open := []string{Observe, Update, LateInitialize}

	cases := map[string]struct {
		reason        string
		obj, stored   map[string]any
		as            []allowance.Allowance
		wantPolicies  []string
		wantUncovered []string
		wantHeld      int
		wantApproved  Approval
	}{
		"CoveredChangeOpens": {
			reason: "Alice's resize, covered by her allowance, opens the gate and is approved for the generation the write gives the resource.",
			obj:    bucket(3, "eu", 2, 3, 3, applied), stored: bucket(3, "eu", 1, 3, 3, applied),
			as:           []allowance.Allowance{update(4, "spec.forProvider.size")},
			wantPolicies: open, wantApproved: Approval{Spec: SpecRecord(bucket(0, "eu", 2, 0, -1, nil)), Generation: 4,
				Before: mutation.Applied{"spec.forProvider.size": SpecRecord(applied)["spec.forProvider.size"]}},
		},
		"PendingChangeDoesNotRideAlong": {
			reason: "A region change the Namespace's Log mode let in at generation 4 is pending: Alice's resize opens nothing, is held, and nothing is approved.",
			obj:    bucket(4, "us", 2, 4, 3, applied), stored: bucket(4, "us", 1, 4, 3, applied),
			as:           []allowance.Allowance{update(5, "spec.forProvider.size")},
			wantPolicies: DefaultReadOnly, wantUncovered: []string{"spec.forProvider.region"}, wantHeld: 1,
			wantApproved: Approval{Spec: SpecRecord(applied), Generation: 3},
		},
		"CoveringBothOpens": {
			reason: "Allowances that together cover every pending leaf open the gate.",
			obj:    bucket(4, "us", 2, 4, 3, applied), stored: bucket(4, "us", 1, 4, 3, applied),
			as:           []allowance.Allowance{update(5, "spec.forProvider.size"), update(5, "spec.forProvider.region")},
			wantPolicies: open, wantApproved: Approval{Spec: SpecRecord(bucket(0, "us", 2, 0, -1, nil)), Generation: 5,
				Before: mutation.Applied{"spec.forProvider.size": SpecRecord(applied)["spec.forProvider.size"], "spec.forProvider.region": SpecRecord(applied)["spec.forProvider.region"]}},
		},
		"BareUpdateCoversNothing": {
			reason: "An Update allowance naming no fields ships only what was approved.",
			obj:    bucket(3, "eu", 2, 3, 3, applied), stored: bucket(3, "eu", 1, 3, 3, applied),
			as:           []allowance.Allowance{update(4)},
			wantPolicies: DefaultReadOnly, wantUncovered: []string{"spec.forProvider.size"}, wantHeld: 1,
			wantApproved: Approval{Spec: SpecRecord(applied), Generation: 3},
		},
		"BareUpdateReappliesApproved": {
			reason: "With nothing pending an Update gate may open to put the cloud back to the approved spec.",
			obj:    bucket(3, "eu", 1, 3, 3, applied), stored: bucket(3, "eu", 1, 2, 3, applied),
			as:           []allowance.Allowance{update(3)},
			wantPolicies: open, wantApproved: Approval{Spec: SpecRecord(applied), Generation: 4},
		},
		"CreationApprovesAll": {
			reason: "A creation ships the whole spec; nothing was approved before.",
			obj:    bucket(0, "eu", 1, 0, -1, nil), stored: nil,
			as:           []allowance.Allowance{create},
			wantPolicies: []string{Observe, Create, LateInitialize}, wantApproved: Approval{Spec: SpecRecord(applied), Generation: 1},
		},
		"HandCreatedApprovesNothing": {
			reason: "A resource created without a Create allowance (Bob's adoption) has nothing approved: every field of it is pending.",
			obj:    bucket(0, "eu", 1, 0, -1, nil), stored: nil,
			// Nothing to record: an empty approval, which admission stores.
			wantPolicies: DefaultReadOnly, wantApproved: Approval{},
		},
		"NoRecordCountsStoredSpec": {
			reason: "A resource gated before the record existed counts its stored spec as approved, not the write's.",
			obj:    bucket(3, "us", 2, 3, -1, nil), stored: bucket(3, "eu", 1, 3, -1, nil),
			as:           []allowance.Allowance{update(4, "spec.forProvider.size")},
			wantPolicies: DefaultReadOnly, wantUncovered: []string{"spec.forProvider.region"}, wantHeld: 1,
			wantApproved: Approval{Spec: SpecRecord(applied), Generation: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Config{}.Decide(tc.obj, tc.stored, tc.as, now, "")
			if diff := cmp.Diff(tc.wantPolicies, d.Policies); diff != "" {
				t.Errorf("%s\nPolicies: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantUncovered, d.Uncovered); diff != "" {
				t.Errorf("%s\nUncovered: -want, +got:\n%s", tc.reason, diff)
			}
			if len(d.Held) != tc.wantHeld {
				t.Errorf("%s\nHeld = %d, want %d", tc.reason, len(d.Held), tc.wantHeld)
			}
			if diff := cmp.Diff(tc.wantApproved, d.Approved); diff != "" {
				t.Errorf("%s\nApproved: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHeldIsNotConsumed follows Alice's held resize through the provider
// observing generations behind the closed gate, then the pending change
// being reverted: it is never used up before it applies.
func TestHeldIsNotConsumed(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	applied := bucket(3, "eu", 1, 3, -1, nil)
	resize := allowance.Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
		Verbs: []string{Update}, Generation: 5, Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
		Trace: allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: 5, Timestamp: allowance.Timestamp(now)}},
	}
	// The provider observed generation 5 (region us, size 2) behind the closed gate.
	stored := bucket(5, "us", 2, 5, 3, applied)
	d := Config{}.Decide(stored, stored, []allowance.Allowance{resize}, now, "")
	if len(d.Consumed) != 0 || len(d.Held) != 1 {
		t.Fatalf("observed behind a closed gate: consumed %d held %d, want 0 and 1", len(d.Consumed), len(d.Held))
	}
	// Someone reverts the region: the resize opens the gate, approved for 6.
	obj := bucket(5, "eu", 2, 5, 3, applied)
	d = Config{}.Decide(obj, stored, []allowance.Allowance{resize}, now, "")
	if len(d.Open) != 1 || d.Approved.Generation != 6 {
		t.Fatalf("after the revert: open %d approved at %d, want 1 at 6", len(d.Open), d.Approved.Generation)
	}
	// Observed at 6 with 6 approved, behind the gate that opened at 6:
	// used up.
	after := bucket(6, "eu", 2, 6, -1, nil)
	after["spec"].(map[string]any)["managementPolicies"] = anySlice(d.Policies)
	for k, v := range d.Approved.Annotations() {
		after["metadata"].(map[string]any)["annotations"].(map[string]any)[k] = v
	}
	if d = (Config{}).Decide(after, after, []allowance.Allowance{resize}, now, ""); len(d.Consumed) != 1 {
		t.Errorf("observed at the approved generation: consumed %d, want 1", len(d.Consumed))
	}
}

func TestApprovalLateInitialized(t *testing.T) {
	prev := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"region": "eu"}}}
	next := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"region": "eu", "zone": "eu-1a"}}}
	a := Approval{Spec: SpecRecord(prev), Generation: 2}
	got := a.LateInitialized(prev, next)
	if diff := cmp.Diff(Approval{Spec: SpecRecord(next), Generation: 2}, got); diff != "" {
		t.Errorf("LateInitialized: the provider's inserted leaf counts as approved: -want, +got:\n%s", diff)
	}
	if len(a.Spec) != 1 {
		t.Errorf("LateInitialized modified its receiver: %v", a.Spec)
	}
}

func TestNextGeneration(t *testing.T) {
	stored := bucket(3, "eu", 1, 3, -1, nil)
	cases := map[string]struct {
		reason   string
		obj      map[string]any
		policies []string
		want     int64
	}{
		"Unchanged":    {reason: "Neither spec nor gate changes: the generation stays.", obj: bucket(3, "eu", 1, 3, -1, nil), policies: DefaultReadOnly, want: 3},
		"GateOpens":    {reason: "The gate is spec: opening it raises the generation.", obj: bucket(3, "eu", 1, 3, -1, nil), policies: []string{Observe, Update, LateInitialize}, want: 4},
		"FieldChanges": {reason: "A spec field change raises it.", obj: bucket(3, "us", 1, 3, -1, nil), policies: DefaultReadOnly, want: 4},
		"FieldRemoved": {reason: "A field the write drops raises it.", obj: map[string]any{"spec": map[string]any{"managementPolicies": []any{Observe, LateInitialize}}}, policies: DefaultReadOnly, want: 4},
		"FieldAdded": {reason: "A field the write adds raises it.", obj: func() map[string]any {
			o := bucket(3, "eu", 1, 3, -1, nil)
			o["spec"].(map[string]any)["deletionPolicy"] = "Orphan"
			return o
		}(), policies: DefaultReadOnly, want: 4},
		"BeingCreated": {reason: "A creation is generation 1.", obj: bucket(0, "eu", 1, 0, -1, nil), policies: DefaultReadOnly, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := stored
			if name == "BeingCreated" {
				s = nil
			}
			if got := nextGeneration(tc.obj, s, tc.policies); got != tc.want {
				t.Errorf("%s\nnextGeneration() = %d, want %d", tc.reason, got, tc.want)
			}
		})
	}
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestNarrowedGateReopens follows Bob narrowing Alice's open Update gate
// (pausing the XR first, so Crossplane does not put it back) before the
// provider applied her resize: the generation the provider then observes
// Synced behind the narrowed gate does not use her allowance up, and the
// gate opens again for it.
func TestNarrowedGateReopens(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	resize := allowance.Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
		Verbs: []string{Update}, Generation: 4, Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
		Trace: allowance.Trace{{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: 4, Timestamp: allowance.Timestamp(now)}},
	}
	// The gate opened at 4 for the resize; the cloud refused it, so the
	// provider never reported 4 Synced. Bob narrowed the gate: generation 5,
	// which the provider observes Synced, since Observe succeeds.
	narrowed := bucket(5, "eu", 2, 5, 4, bucket(0, "eu", 2, 0, -1, nil))
	d := Config{}.Decide(narrowed, narrowed, []allowance.Allowance{resize}, now, "")
	if len(d.Consumed) != 0 {
		t.Fatalf("observed behind the narrowed gate: consumed %d, want 0", len(d.Consumed))
	}
	if !slices.Contains(d.Policies, Update) {
		t.Fatalf("gate = %v, want it open for Update again", d.Policies)
	}
}

// TestApprovingReplacesWhatCameBefore: an approval that changes the spec
// replaces the record of what came before, even when it only adds leaves,
// so a record an older approval left never sends a leaf back to a value
// the cloud no longer has; the same spec approved again keeps the record,
// and a first approval has none.
func TestApprovingReplacesWhatCameBefore(t *testing.T) {
	old := Approval{Spec: mutation.Applied{"spec.a": "h1"}, Generation: 3, Before: mutation.Applied{"spec.b": "h0"}}
	cases := map[string]struct {
		reason string
		from   Approval
		spec   mutation.Applied
		want   mutation.Applied
	}{
		"AddsALeaf":     {reason: "A leaf added: nothing came before it, and the old record goes.", from: old, spec: mutation.Applied{"spec.a": "h1", "spec.b": "h2"}, want: mutation.Applied{}},
		"ChangesALeaf":  {reason: "A leaf changed: its old hash is what came before.", from: old, spec: mutation.Applied{"spec.a": "h9"}, want: mutation.Applied{"spec.a": "h1"}},
		"SameSpec":      {reason: "Nothing changed: the record stays.", from: old, spec: mutation.Applied{"spec.a": "h1"}, want: old.Before},
		"FirstApproval": {reason: "A creation's approval has nothing before it.", from: Approval{Spec: mutation.Applied{}}, spec: mutation.Applied{"spec.a": "h1"}, want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.from.approving(tc.spec, 4)
			if diff := cmp.Diff(tc.want, got.Before); diff != "" {
				t.Errorf("%s\nBefore: -want +got:\n%s", tc.reason, diff)
			}
			_, written := got.Annotations()[v1alpha1.AnnotationApprovedBefore]
			if written != (tc.want != nil) {
				t.Errorf("%s\nannotation written %t, want %t", tc.reason, written, tc.want != nil)
			}
		})
	}
}
