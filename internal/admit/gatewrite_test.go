package admit

import (
	"slices"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// update is an unconsumed External Update allowance at generation gen
// that ships spec.forProvider.size.
func update(gen int64) allowance.Allowance {
	return allowance.Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}},
		Verbs: []string{v1alpha1.VerbUpdate}, Generation: gen, Initiator: alice,
		Trace:     allowance.Trace{{Kind: "Bucket", Name: "orders-data", Generation: gen, User: alice, Timestamp: allowance.Timestamp(now)}},
		Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}}}
}

// stored is a Bucket as stored: size 1, observed (Synced) at generation
// observed, the gate closed, its allowances as given.
func stored(t *testing.T, observed int64, as ...allowance.Allowance) *unstructured.Unstructured {
	t.Helper()
	b := bucket(map[string]any{"size": int64(1)}, v1alpha1.AnnotationAllowances, allowance.Format(as))
	if err := fieldpath.Pave(b.Object).SetValue(gate.PathManagementPolicies, gate.DefaultReadOnly); err != nil {
		t.Fatal(err)
	}
	b.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True", "observedGeneration": observed}}}
	for k, v := range (gate.Approval{Spec: gate.SpecRecord(b.Object), Generation: 1}).Annotations() {
		SetAnnotation(b, k, v)
	}
	return b
}

func TestAgainstStored(t *testing.T) {
	consumed := update(3)
	consumed.Consumed = true
	cases := map[string]struct {
		reason      string
		sent        []allowance.Allowance
		old         []allowance.Allowance
		create      bool
		want        []allowance.Allowance
		wantChanged bool
	}{
		"Create": {reason: "A new resource has nothing stored to correct against.",
			sent: []allowance.Allowance{update(1)}, create: true, want: []allowance.Allowance{update(1)}},
		"Same": {reason: "What the stored resource holds, sent back, is unchanged.",
			sent: []allowance.Allowance{update(7)}, old: []allowance.Allowance{update(7)}, want: []allowance.Allowance{update(7)}},
		"StaleReopens": {reason: "A stale writer re-sending a consumed allowance as unconsumed does not reopen it.",
			sent: []allowance.Allowance{update(3)}, old: []allowance.Allowance{consumed}, want: []allowance.Allowance{consumed}, wantChanged: true},
		"Dropped": {reason: "A writer that drops an unconsumed allowance does not take it away.",
			old: []allowance.Allowance{update(7)}, want: []allowance.Allowance{update(7)}, wantChanged: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var old *unstructured.Unstructured
			if !tc.create {
				old = stored(t, 5, tc.old...)
			}
			got, changed := AgainstStored(tc.sent, old)
			if diff := cmp.Diff(tc.want, got); diff != "" || changed != tc.wantChanged {
				t.Errorf("%s\nAgainstStored: changed %t, want %t; -want +got:\n%s", tc.reason, changed, tc.wantChanged, diff)
			}
		})
	}
}

func TestGateWriteDecide(t *testing.T) {
	cases := map[string]struct {
		reason       string
		write        func(t *testing.T) GateWrite
		wantGate     []string
		wantWarnings []string // substrings, one per warning
		wantApproved string   // the approved generation written, "" to keep the stored one
	}{
		"UserOpensGate": {reason: "A user who writes managementPolicies [*] gets the closed gate back, and is told.",
			write: func(t *testing.T) GateWrite {
				old := stored(t, 5)
				obj := old.DeepCopy()
				_ = fieldpath.Pave(obj.Object).SetValue(gate.PathManagementPolicies, []string{"*"})
				return GateWrite{Obj: obj, Old: old, Now: now}
			},
			wantGate: gate.DefaultReadOnly, wantWarnings: []string{"is kept at [Observe LateInitialize] by Kausality"}},
		"TrustedNotWarned": {reason: "Crossplane, whose pipeline may send any gate, is not warned.",
			write: func(t *testing.T) GateWrite {
				old := stored(t, 5)
				obj := old.DeepCopy()
				_ = fieldpath.Pave(obj.Object).SetValue(gate.PathManagementPolicies, []string{"*"})
				return GateWrite{Obj: obj, Old: old, Now: now, Trusted: true}
			},
			wantGate: gate.DefaultReadOnly},
		"AllowanceOpens": {reason: "An unconsumed Update allowance covering the change opens the gate for Update and approves the spec at the generation the write gives it.",
			write: func(t *testing.T) GateWrite {
				old := stored(t, 5)
				obj := old.DeepCopy()
				_ = fieldpath.Pave(obj.Object).SetValue("spec.forProvider.size", int64(3))
				return GateWrite{Obj: obj, Old: old, Now: now, Allowances: []allowance.Allowance{update(6)}, Trusted: true}
			},
			wantGate: []string{"Observe", "Update", "LateInitialize"}, wantApproved: "6"},
		"StaleRevertHeld": {reason: "A hand edit's allowance is pinned to the edit's size 3; Crossplane's stale pipeline run writes size 1 back while its gate is open: the revert has no cause, so the gate closes and says so.",
			write: func(t *testing.T) GateWrite {
				edited := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(3)}}}
				alices := update(6).Pinned(allowance.ValuesOf(edited, []mutation.Mutation{{Path: "spec.forProvider.size"}}, gate.IsGatePath))
				old := stored(t, 5, alices)
				_ = fieldpath.Pave(old.Object).SetValue("spec.forProvider.size", int64(3))
				for k, v := range (gate.Approval{Spec: gate.SpecRecord(old.Object), Generation: 6}).Annotations() {
					SetAnnotation(old, k, v)
				}
				old.SetGeneration(6)
				obj := old.DeepCopy()
				_ = fieldpath.Pave(obj.Object).SetValue("spec.forProvider.size", int64(1))
				as, _ := AgainstStored([]allowance.Allowance{update(6)}, old) // the stale run sends it unpinned
				return GateWrite{Obj: obj, Old: old, Now: now, Allowances: as, Trusted: true}
			},
			wantGate: gate.DefaultReadOnly, wantWarnings: []string{"spec.forProvider.size changed since generation 6"}},
		"EditShipped": {reason: "The same allowance ships the edit's own value.",
			write: func(t *testing.T) GateWrite {
				edited := map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(3)}}}
				old := stored(t, 5)
				obj := old.DeepCopy()
				_ = fieldpath.Pave(obj.Object).SetValue("spec.forProvider.size", int64(3))
				alices := update(6).Pinned(allowance.ValuesOf(edited, []mutation.Mutation{{Path: "spec.forProvider.size"}}, gate.IsGatePath))
				return GateWrite{Obj: obj, Old: old, Now: now, Allowances: []allowance.Allowance{alices}, Trusted: true}
			},
			wantGate: []string{"Observe", "Update", "LateInitialize"}, wantApproved: "6"},
		"UncoveredHeld": {reason: "A change beyond what the allowance ships keeps the gate closed, and says which field.",
			write: func(t *testing.T) GateWrite {
				old := stored(t, 5)
				obj := old.DeepCopy()
				_ = fieldpath.Pave(obj.Object).SetValue("spec.forProvider.size", int64(3))
				_ = fieldpath.Pave(obj.Object).SetValue("spec.forProvider.region", "us-east-1")
				return GateWrite{Obj: obj, Old: old, Now: now, Allowances: []allowance.Allowance{update(6)}}
			},
			wantGate: gate.DefaultReadOnly, wantWarnings: []string{"spec.forProvider.region changed since generation 1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := tc.write(t)
			storedGen := w.Old.GetAnnotations()[v1alpha1.AnnotationApprovedGeneration]
			warnings, err := w.Decide(gate.Config{}.Defaulted())
			if err != nil {
				t.Fatal(err)
			}
			got, _ := fieldpath.Pave(w.Obj.Object).GetStringArray(gate.PathManagementPolicies)
			if !slices.Equal(got, tc.wantGate) {
				t.Errorf("%s\ngate = %v, want %v", tc.reason, got, tc.wantGate)
			}
			if len(warnings) != len(tc.wantWarnings) {
				t.Errorf("%s\nwarnings = %q, want %d", tc.reason, warnings, len(tc.wantWarnings))
			}
			for i := range min(len(warnings), len(tc.wantWarnings)) {
				if !strings.Contains(warnings[i], tc.wantWarnings[i]) {
					t.Errorf("%s\nwarning %q, want it to say %q", tc.reason, warnings[i], tc.wantWarnings[i])
				}
			}
			want := tc.wantApproved
			if want == "" {
				want = storedGen
			}
			if g := w.Obj.GetAnnotations()[v1alpha1.AnnotationApprovedGeneration]; g != want {
				t.Errorf("%s\napproved generation = %q, want %q", tc.reason, g, want)
			}
		})
	}
}
