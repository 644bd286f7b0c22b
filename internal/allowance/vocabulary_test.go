package allowance

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

var (
	claimHop = Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "db", Generation: 4, Field: "spec.size", User: "alice", Timestamp: "2026-11-22T11:59:00Z"}
	xrHop    = Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 2, Field: "spec.size"}
	mrHop    = Hop{APIVersion: "rds.aws.crossplane.io/v1alpha1", Kind: "RDSInstance", Name: "db-rds", Generation: 3, Field: "spec.forProvider.instanceClass"}
)

func TestHopOf(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1alpha1")
	u.SetKind("XDatabase")
	u.SetName("db")
	u.SetGeneration(7)
	at := time.Date(2026, 11, 22, 12, 0, 0, 500, time.FixedZone("CET", 3600))
	got := HopOf(u, 8).By("alice", at)
	want := Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 8, User: "alice", Timestamp: "2026-11-22T11:00:00Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HopOf(...).By(...): the hop names the object at the given generation, by the user at UTC second precision: -want, +got:\n%s", diff)
	}
}

func TestSameHop(t *testing.T) {
	cases := map[string]struct {
		reason           string
		a, b             Hop
		sameObject, same bool
	}{
		"Identical":      {reason: "A hop is itself.", a: xrHop, b: xrHop, sameObject: true, same: true},
		"OtherTimestamp": {reason: "Timestamps and users describe a hop but do not identify it.", a: xrHop, b: func() Hop { h := xrHop; h.Timestamp, h.User = "2026-01-01T00:00:00Z", "bob"; return h }(), sameObject: true, same: true},
		"NoField":        {reason: "The function names its XR's hop without a field; it is the same object, not the same hop.", a: xrHop, b: func() Hop { h := xrHop; h.Field = ""; return h }(), sameObject: true, same: false},
		"OtherGen":       {reason: "Another generation is another change.", a: xrHop, b: func() Hop { h := xrHop; h.Generation++; return h }()},
		"OtherName":      {reason: "Another object.", a: xrHop, b: func() Hop { h := xrHop; h.Name = "other"; return h }()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.SameObject(tc.b); got != tc.sameObject {
				t.Errorf("%s\nSameObject: want %v, got %v", tc.reason, tc.sameObject, got)
			}
			if got := tc.a.Same(tc.b); got != tc.same {
				t.Errorf("%s\nSame: want %v, got %v", tc.reason, tc.same, got)
			}
		})
	}
}

func TestTraceChains(t *testing.T) {
	xrNoField := xrHop
	xrNoField.Field = ""
	cases := map[string]struct {
		reason    string
		t         Trace
		with      Hop
		wantWith  Trace
		parent    Trace
		continues bool
		extends   bool
	}{
		"AppendsNewObject": {
			reason: "With appends a hop for another object; the chain before an MR's hop continues its XR allowance's trace with the XR's hop appended.",
			t:      Trace{claimHop}, with: xrNoField, wantWith: Trace{claimHop, xrNoField},
			parent: Trace{claimHop}, continues: true, extends: false,
		},
		"KeepsEndingHop": {
			reason: "With does not repeat the object the trace already ends with, whatever the field.",
			t:      Trace{claimHop, xrHop}, with: xrNoField, wantWith: Trace{claimHop, xrHop},
			parent: Trace{claimHop, xrHop}, continues: true, extends: false,
		},
		"KeepsEndingHopAtAnotherGeneration": {
			reason: "With does not repeat the object the trace already ends with at a later generation: Crossplane's bookkeeping writes raise an XR's generation without a new hop.",
			t:      Trace{claimHop, xrHop}, with: func() Hop { h := xrNoField; h.Generation += 2; return h }(), wantWith: Trace{claimHop, xrHop},
			parent: Trace{claimHop, xrHop}, continues: true, extends: false,
		},
		"Extends": {
			reason: "A trace extends its parent chain by exactly one hop.",
			t:      Trace{claimHop, xrHop, mrHop}, with: mrHop, wantWith: Trace{claimHop, xrHop, mrHop},
			parent: Trace{claimHop, xrHop}, continues: true, extends: true,
		},
		"OtherOrigin": {
			reason: "A chain started by another change continues nothing.",
			t:      Trace{func() Hop { h := claimHop; h.Generation = 5; return h }(), xrHop}, with: xrHop, wantWith: Trace{func() Hop { h := claimHop; h.Generation = 5; return h }(), xrHop},
			parent: Trace{claimHop}, continues: false, extends: false,
		},
		"TooLong": {
			reason: "Continuing a chain adds at most the parent object's own hop.",
			t:      Trace{claimHop, xrHop, mrHop}, with: mrHop, wantWith: Trace{claimHop, xrHop, mrHop},
			parent: Trace{claimHop}, continues: false, extends: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := append(Trace(nil), tc.t...)
			if diff := cmp.Diff(tc.wantWith, tc.t.With(tc.with)); diff != "" {
				t.Errorf("%s\nWith: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, tc.t); diff != "" {
				t.Errorf("With changed its receiver: -before, +after:\n%s", diff)
			}
			if got := tc.t.Continues(tc.parent); got != tc.continues {
				t.Errorf("%s\nContinues: want %v, got %v", tc.reason, tc.continues, got)
			}
			if got := tc.t.Extends(tc.parent); got != tc.extends {
				t.Errorf("%s\nExtends: want %v, got %v", tc.reason, tc.extends, got)
			}
		})
	}
}

func TestSameAllowance(t *testing.T) {
	base := Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "RDSInstance"}},
		Verbs: []string{v1alpha1.VerbUpdate}, Generation: 3, Initiator: "alice", Trace: Trace{claimHop, xrHop, mrHop},
	}
	with := func(f func(*Allowance)) Allowance {
		a := base
		a.Trace = append(Trace(nil), base.Trace...)
		a.Target.External = map[string]string{"kind": "RDSInstance"}
		f(&a)
		return a
	}
	cases := map[string]struct {
		reason                  string
		b                       Allowance
		sameGrant, origin, same bool
	}{
		"Itself":      {reason: "An allowance is itself.", b: base, sameGrant: true, origin: true, same: true},
		"Consumed":    {reason: "Being consumed does not make it another allowance.", b: with(func(a *Allowance) { a.Consumed = true }), sameGrant: true, origin: true, same: true},
		"Restamped":   {reason: "The same chain stamped again at a later generation of the carrier: same origin (never issued twice), but not the same allowance (a stale re-stamp must chain anew).", b: with(func(a *Allowance) { a.Generation = 9; a.Trace[2].Generation = 9 }), sameGrant: true, origin: true, same: false},
		"WiderVerbs":  {reason: "More verbs are another grant.", b: with(func(a *Allowance) { a.Verbs = []string{v1alpha1.VerbUpdate, v1alpha1.VerbDelete} }), origin: true},
		"OtherTarget": {reason: "Another target is another grant and another allowance.", b: with(func(a *Allowance) { a.Target.External = map[string]string{"kind": "Bucket"} })},
		"OtherChain":  {reason: "The same grant from another change is another allowance.", b: with(func(a *Allowance) { a.Trace[0].Generation = 5 }), sameGrant: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := base.SameGrant(tc.b); got != tc.sameGrant {
				t.Errorf("%s\nSameGrant: want %v, got %v", tc.reason, tc.sameGrant, got)
			}
			if got := base.SameOrigin(tc.b); got != tc.origin {
				t.Errorf("%s\nSameOrigin: want %v, got %v", tc.reason, tc.origin, got)
			}
			if got := base.Same(tc.b); got != tc.same {
				t.Errorf("%s\nSame: want %v, got %v", tc.reason, tc.same, got)
			}
		})
	}
}

func TestUnconsumed(t *testing.T) {
	update := Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "K"}}, Verbs: []string{v1alpha1.VerbUpdate}, Generation: 3}
	later := update
	later.Generation = 5
	del := update
	del.Verbs = []string{v1alpha1.VerbDelete}
	del.Generation = 1
	cases := map[string]struct {
		reason  string
		carrier map[string]any
		want    []Allowance
	}{
		"NotReconciled": {reason: "Nothing observed yet consumes nothing.", carrier: map[string]any{}, want: []Allowance{update, later, del}},
		"Observed4": {reason: "Observing generation 4 consumes the allowance for 3, not the one for 5; a Delete allowance is used up by the deletion, never a generation.",
			carrier: map[string]any{"status": map[string]any{"observedGeneration": int64(4)}}, want: []Allowance{later, del}},
		"SyncedFalse": {reason: "A failed reconcile applied nothing.",
			carrier: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "False", "observedGeneration": int64(9)}}}}, want: []Allowance{update, later, del}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := []Allowance{update, later, del}
			if diff := cmp.Diff(tc.want, Unconsumed(in, tc.carrier)); diff != "" {
				t.Errorf("%s\nUnconsumed: -want, +got:\n%s", tc.reason, diff)
			}
			if len(in) != 3 || in[0].Generation != 3 {
				t.Errorf("Unconsumed changed its input: %v", in)
			}
		})
	}
}

func TestKeepUnconsumed(t *testing.T) {
	chain := Trace{claimHop, xrHop, mrHop}
	update := Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "K"}}, Verbs: []string{v1alpha1.VerbUpdate}, Generation: 3, Trace: chain}
	del := Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "K"}}, Verbs: []string{v1alpha1.VerbDelete}, Generation: 4,
		Trace: Trace{{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "db", Generation: 4, User: "alice"}, mrHop}}
	held := update
	held.Generation = 7 // a freeze moved it past the stored generation
	consumed := update
	consumed.Consumed = true
	observed := func(g int64) map[string]any {
		return map[string]any{"status": map[string]any{"observedGeneration": g}}
	}
	cases := map[string]struct {
		reason      string
		as, stored  []Allowance
		storedObj   map[string]any
		want        []Allowance
		wantChanged bool
	}{
		"StaleWriteDropsDelete": {
			reason: "Crossplane composing from a copy older than the deletion's write drops the Delete allowance: it is put back.",
			as:     []Allowance{update}, stored: []Allowance{update, del}, storedObj: observed(2),
			want: []Allowance{update, del}, wantChanged: true,
		},
		"ConsumedMayGo": {
			reason: "An allowance the stored object has observed is consumed: pruning it is no loss.",
			as:     nil, stored: []Allowance{update}, storedObj: observed(3),
		},
		"MarkedConsumedMayGo": {
			reason: "An allowance marked consumed may be pruned.",
			as:     nil, stored: []Allowance{consumed}, storedObj: observed(2),
		},
		"MovedByAFreeze": {
			reason: "The writer's copy of an allowance a freeze moved to a later generation is the same allowance: nothing is added twice.",
			as:     []Allowance{update}, stored: []Allowance{held}, storedObj: observed(2),
			want: []Allowance{update},
		},
		"NothingDropped": {
			reason: "A write that keeps every allowance is left as it is.",
			as:     []Allowance{update, del}, stored: []Allowance{del}, storedObj: observed(2),
			want: []Allowance{update, del},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, changed := KeepUnconsumed(tc.as, tc.stored, tc.storedObj)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nKeepUnconsumed: -want, +got:\n%s", tc.reason, diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("%s\nKeepUnconsumed changed = %v, want %v", tc.reason, changed, tc.wantChanged)
			}
		})
	}
}

func TestWithinAndStampable(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	parent := Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "K"}}, Verbs: []string{v1alpha1.VerbUpdate}, Generation: 2}
	child := parent
	child.Generation = 6
	child.Trace = Trace{claimHop, xrHop, func() Hop { h := mrHop; h.Timestamp = "2026-11-22T12:00:00Z"; return h }()}
	with := func(f func(*Allowance)) Allowance { a := child; a.Trace = slices.Clone(child.Trace); f(&a); return a }
	within := map[string]struct {
		a    Allowance
		want bool
	}{
		"Same":          {a: child, want: true},
		"EveryVerb":     {a: with(func(a *Allowance) { a.Verbs = []string{"*"} })},
		"MoreVerbs":     {a: with(func(a *Allowance) { a.Verbs = []string{v1alpha1.VerbUpdate, v1alpha1.VerbDelete} })},
		"OtherTarget":   {a: with(func(a *Allowance) { a.Target = v1alpha1.Target{External: map[string]string{"kind": "L"}} })},
		"OtherRelation": {a: with(func(a *Allowance) { a.Relation = v1alpha1.RelationControllerChild })},
	}
	for name, tc := range within {
		if got := tc.a.Within(parent); got != tc.want {
			t.Errorf("Within/%s = %v, want %v: a composed resource's allowance never widens its parent's", name, got, tc.want)
		}
	}
	stampable := map[string]struct {
		a      Allowance
		stored int64
		ok     bool
	}{
		"NextGeneration":    {a: child, stored: 5, ok: true},
		"EarlierGeneration": {a: child, stored: 9, ok: true},
		"LaterGeneration":   {a: child, stored: 4},
		"NoGeneration":      {a: with(func(a *Allowance) { a.Generation = 0 }), stored: 5},
		"NoTimestamp":       {a: with(func(a *Allowance) { a.Trace[2].Timestamp = "" }), stored: 5},
		"WithinSkew":        {a: with(func(a *Allowance) { a.Trace[2].Timestamp = "2026-11-22T12:00:59Z" }), stored: 5, ok: true},
		"Future":            {a: with(func(a *Allowance) { a.Trace[2].Timestamp = "2026-11-22T13:00:00Z" }), stored: 5},
	}
	for name, tc := range stampable {
		if err := tc.a.Stampable(tc.stored, now); (err == nil) != tc.ok {
			t.Errorf("Stampable/%s = %v, want ok %v", name, err, tc.ok)
		}
	}
}

func TestFrozenBy(t *testing.T) {
	cases := map[string]struct {
		reason  string
		ann     map[string]string
		want    string
		wantErr bool
	}{
		"None":       {reason: "No annotation, no freeze.", ann: map[string]string{"a": "b"}},
		"Frozen":     {reason: "The freeze names who set it.", ann: map[string]string{v1alpha1.AnnotationFreeze: `{"user":"carol","message":"incident"}`}, want: "carol"},
		"Unreadable": {reason: "A typo still freezes, and says what is wrong.", ann: map[string]string{v1alpha1.AnnotationFreeze: `{"user":`}, want: UnreadableFreeze, wantErr: true},
		"NoUser":     {reason: "A freeze must say who set it; without one it still freezes.", ann: map[string]string{v1alpha1.AnnotationFreeze: `{}`}, want: UnreadableFreeze, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FrozenBy(tc.ann)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("%s\nFrozenBy: want %q (error %v), got %q, %v", tc.reason, tc.want, tc.wantErr, got, err)
			}
		})
	}
}

func TestExternalGrant(t *testing.T) {
	tr := Trace{claimHop, mrHop}
	got := ExternalGrant("rds.aws.crossplane.io", "RDSInstance", v1alpha1.VerbDelete, 4, tr)
	want := Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"apiGroup": "rds.aws.crossplane.io", "kind": "RDSInstance"}},
		Verbs: []string{v1alpha1.VerbDelete}, Generation: 4, Initiator: "alice", Trace: tr,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExternalGrant: the initiator is the trace's origin user: -want, +got:\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("ExternalGrant is not a valid allowance: %v", err)
	}
	if !got.OpensDelete() {
		t.Errorf("an External Delete grant opens the Delete gate")
	}
}

func TestKeepPendingAndReleases(t *testing.T) {
	tr := Trace{
		{APIVersion: "v1", Kind: "XDatabase", Name: "x", Generation: 2, Timestamp: "2026-11-22T12:00:00Z"},
		{APIVersion: "v1", Kind: "Bucket", Name: "b", Generation: 3, Timestamp: "2026-11-22T12:00:00Z"},
	}
	pending := Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "Bucket"}}, Verbs: []string{"Update"},
		Generation: 3, Trace: tr, Pending: map[string]string{"spec.size": "aaa"}}
	forged := pending
	forged.Pending = map[string]string{"spec.size": "bbb"}
	out, changed := KeepPending([]Allowance{forged}, []Allowance{pending})
	if !changed || out[0].Pending["spec.size"] != "aaa" || forged.Pending["spec.size"] != "bbb" {
		t.Errorf("KeepPending = %v, %t; want the stored values back, the input untouched", out, changed)
	}
	if _, changed := KeepPending([]Allowance{pending}, []Allowance{pending}); changed {
		t.Error("KeepPending changed an unchanged pending allowance")
	}
	released := pending.Released(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	released.Generation = 4
	if !released.Releases(pending) || pending.Releases(pending) || released.Releases(released) {
		t.Error("Releases: want only the let-through copy of a pending allowance to release it")
	}
	if released.IsPending() || released.Trace.Last().Timestamp != "2026-11-23T09:00:00Z" || pending.Trace.Last().Timestamp != "2026-11-22T12:00:00Z" {
		t.Errorf("Released = %+v; want no longer pending, restamped, the original untouched", released)
	}
	other := released
	other.Verbs = []string{"Update", "Delete"}
	if other.Releases(pending) {
		t.Error("Releases: a wider grant releases nothing")
	}
	if (Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{Resource: "r"}, Pending: map[string]string{"a": "b"}}).Validate() == nil {
		t.Error("Validate: only an External allowance can be pending")
	}
	if s := Format([]Allowance{pending}); !strings.Contains(s, `"pending":{"spec.size":"aaa"}`) {
		t.Errorf("Format = %s, want the pending values", s)
	}
	if as, err := Parse(Format([]Allowance{pending})); err != nil || !as[0].IsPending() {
		t.Errorf("Parse(Format(pending)) = %v, %v", as, err)
	}
}
