package allowance

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

const seedAllowance = `[{"relation":"ControllerChild","target":{"apiGroup":"rds.aws.crossplane.io","apiVersion":"v1alpha1","resource":"rdsinstances"},"verbs":["Update"],"mutations":[{"jsonPath":"spec.forProvider.instanceClass","verbs":["Mutate"]}],"generation":12,"initiator":"hans@example.com","trace":[{"apiVersion":"example.com/v1alpha1","kind":"DatabaseClaim","name":"my-database","generation":5,"field":"spec.size","user":"hans@example.com","timestamp":"2026-01-24T10:30:00Z","attestations":{"metadata.annotations[jira]":"INFRA-23232"}}]}]`

func TestParse(t *testing.T) {
	seed := []Allowance{{
		Relation:   v1alpha1.RelationControllerChild,
		Target:     v1alpha1.Target{APIGroup: "rds.aws.crossplane.io", APIVersion: "v1alpha1", Resource: "rdsinstances"},
		Verbs:      []string{"Update"},
		Mutations:  []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceClass", Verbs: []v1alpha1.MutationVerb{"Mutate"}}},
		Generation: 12,
		Initiator:  "hans@example.com",
		Trace: Trace{{
			APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "my-database", Generation: 5,
			Field: "spec.size", User: "hans@example.com", Timestamp: "2026-01-24T10:30:00Z",
			Attestations: map[string]string{"metadata.annotations[jira]": "INFRA-23232"},
		}},
	}}
	type want struct {
		as  []Allowance
		err string // substring; empty means no error
	}
	cases := map[string]struct {
		reason string
		in     string
		want   want
	}{
		"Empty":         {reason: "An absent annotation is no allowances.", in: "", want: want{}},
		"EmptyArray":    {reason: "An empty array is no allowances.", in: "[]", want: want{as: []Allowance{}}},
		"Seed":          {reason: "The DESIGN example parses.", in: seedAllowance, want: want{as: seed}},
		"YAMLNotJSON":   {reason: "The annotation is JSON.", in: "- relation: External", want: want{err: "invalid JSON"}},
		"UnknownField":  {reason: "A typo must not silently drop a field.", in: `[{"relation":"External","target":{"external":{"kind":"X"}},"generation":1,"verb":["Update"]}]`, want: want{err: `unknown field "verb"`}},
		"NewerRelease":  {reason: "A field a newer release adds may narrow the grant: refused, naming the upgrade order.", in: `[{"relation":"External","target":{"external":{"kind":"X"}},"generation":1,"verbs":["Update"],"notAfter":"2027-01-01T00:00:00Z"}]`, want: want{err: `unknown field "notAfter": written by a newer release of Kausality? Upgrade provider-kausality before function-kausality`}},
		"BadRelation":   {reason: "Relations are a closed set.", in: `[{"relation":"Sibling","target":{"resource":"x"},"generation":1}]`, want: want{err: `allowance [0]: relation "Sibling"`}},
		"NoTarget":      {reason: "ControllerChild needs a resource.", in: `[{"relation":"ControllerChild","target":{},"generation":1}]`, want: want{err: "needs target.resource"}},
		"NoExternal":    {reason: "External needs target.external.", in: `[{"relation":"External","target":{},"generation":1}]`, want: want{err: "needs target.external"}},
		"BadVerb":       {reason: "ControllerChild verbs are a closed set.", in: `[{"relation":"ControllerChild","target":{"resource":"x"},"verbs":["Patch"],"generation":1}]`, want: want{err: `verb "Patch"`}},
		"BadMutVerb":    {reason: "Mutation verbs are a closed set.", in: `[{"relation":"ControllerChild","target":{"resource":"x"},"mutations":[{"jsonPath":"spec","verbs":["Replace"]}],"generation":1}]`, want: want{err: `mutations[0].verbs: "Replace"`}},
		"NegativeGen":   {reason: "Generations are never negative.", in: `[{"relation":"External","target":{"external":{"kind":"X"}},"generation":-1}]`, want: want{err: "negative"}},
		"BadTimestamp":  {reason: "Timestamps are RFC 3339.", in: `[{"relation":"External","target":{"external":{"kind":"X"}},"generation":1,"trace":[{"apiVersion":"v1","kind":"K","name":"n","generation":1,"timestamp":"yesterday"}]}]`, want: want{err: `trace: hop [0]: timestamp "yesterday"`}},
		"HopNoName":     {reason: "Every hop names an object.", in: `[{"relation":"External","target":{"external":{"kind":"X"}},"generation":1,"trace":[{"apiVersion":"v1","kind":"K","generation":1}]}]`, want: want{err: "hop [0]: name is empty"}},
		"Trailing":      {reason: "Appended text must not be silently ignored.", in: `[] []`, want: want{err: "trailing data"}},
		"TooLarge":      {reason: "Values larger than annotations can hold are refused before decoding.", in: "[" + strings.Repeat(" ", MaxAnnotationBytes) + "]", want: want{err: "more than"}},
		"ExternalMutat": {reason: "The spec fields an External allowance ships are checked like any bound.", in: `[{"relation":"External","target":{"external":{"kind":"X"}},"mutations":[{"jsonPath":"spec","verbs":["Replace"]}],"generation":1}]`, want: want{err: `"Replace" is not one of Insert`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nParse(...): want error containing %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nParse(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.as, got); diff != "" {
				t.Errorf("%s\nParse(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFormatStable(t *testing.T) {
	as, err := Parse(seedAllowance)
	if err != nil {
		t.Fatal(err)
	}
	if got := Format(as); got != seedAllowance {
		t.Errorf("Format(Parse(seed)) changed the value:\nwant %s\n got %s", seedAllowance, got)
	}
	// Attestation maps are written in key order whatever order they were built in.
	a := Allowance{Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"z": "1", "a": "2"}}, Generation: 1}
	if got, want := Format([]Allowance{a}), `[{"relation":"External","target":{"external":{"a":"2","z":"1"}},"generation":1}]`; got != want {
		t.Errorf("Format: want %s, got %s", want, got)
	}
	if got := Format(nil); got != "[]" {
		t.Errorf("Format(nil): want [], got %s", got)
	}
}

func TestConsumedAt(t *testing.T) {
	a := Allowance{Generation: 5}
	cases := map[string]struct {
		a        Allowance
		observed int64
		ok       bool
		want     bool
	}{
		"NotObserved":             {a: a, want: false},
		"Behind":                  {a: a, observed: 4, ok: true, want: false},
		"CaughtUp":                {a: a, observed: 5, ok: true, want: true},
		"Ahead":                   {a: a, observed: 7, ok: true, want: true},
		"Marked":                  {a: Allowance{Generation: 9, Consumed: true}, observed: 1, ok: true, want: true},
		"DeleteWaitsForDeletion":  {a: Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Delete"}, Generation: 5}, observed: 7, ok: true, want: false},
		"DeleteMarked":            {a: Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Delete"}, Generation: 5, Consumed: true}, want: true},
		"UpdateAndDeleteNoRecord": {a: Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Update", "Delete"}, Generation: 5}, observed: 5, ok: true, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.ConsumedAt(tc.observed, tc.ok); got != tc.want {
				t.Errorf("ConsumedAt(%d, %t) = %t, want %t", tc.observed, tc.ok, got, tc.want)
			}
		})
	}
}

func TestObservedGeneration(t *testing.T) {
	cases := map[string]struct {
		obj    map[string]any
		want   int64
		wantOK bool
	}{
		"None":      {obj: map[string]any{"status": map[string]any{}}},
		"TopLevel":  {obj: map[string]any{"status": map[string]any{"observedGeneration": int64(3)}}, want: 3, wantOK: true},
		"JSONFloat": {obj: map[string]any{"status": map[string]any{"observedGeneration": float64(4)}}, want: 4, wantOK: true},
		"Synced": {obj: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(9)},
			map[string]any{"type": "Synced", "status": "True", "observedGeneration": int64(2)},
		}}}, want: 2, wantOK: true},
		"SyncedJSONFloat": {obj: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True", "observedGeneration": float64(7)},
		}}}, want: 7, wantOK: true},
		"TopLevelWins": {obj: map[string]any{"status": map[string]any{"observedGeneration": int64(6), "conditions": []any{
			map[string]any{"type": "Synced", "status": "True", "observedGeneration": int64(2)},
		}}}, want: 6, wantOK: true},
		"NoStatus": {obj: map[string]any{}},
		"Paused": {obj: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "False", "reason": "ReconcilePaused", "observedGeneration": int64(5)},
		}}}},
		"Failed": {obj: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "False", "reason": "ReconcileError", "observedGeneration": int64(5)},
		}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ObservedGeneration(tc.obj)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ObservedGeneration() = %d, %t; want %d, %t", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestOnComposite(t *testing.T) {
	xr := func(gen, observed int64) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"generation": gen},
			"status": map[string]any{"conditions": []any{
				map[string]any{"type": "Synced", "status": "True", "observedGeneration": observed},
			}},
		}
	}
	at5 := Allowance{Generation: 5, Verbs: []string{"Create"}}
	cases := map[string]struct {
		reason string
		as     []Allowance
		xr     map[string]any
		want   int
	}{
		"NotYetObserved": {
			reason: "The composite has not observed the allowance's generation.",
			as:     []Allowance{at5}, xr: xr(5, 4), want: 1,
		},
		"ObservedWhileComposingEarlier": {
			reason: "The write landed while Crossplane composed generation 4, so Synced reads 5 before anything composed from 5.",
			as:     []Allowance{at5}, xr: xr(5, 5), want: 1,
		},
		"ResourceRefsRaisedGeneration": {
			reason: "Composing from 5, Crossplane records its resource references first (generation 6) and creates the new resource after: the allowance must still be there for the Create to chain.",
			as:     []Allowance{at5}, xr: xr(6, 5), want: 1,
		},
		"ObservedLater": {
			reason: "A reconcile read back a later generation: the one that composed from 5 is done.",
			as:     []Allowance{at5}, xr: xr(6, 6), want: 0,
		},
		"Consumed": {
			as: []Allowance{{Generation: 5, Consumed: true}}, xr: xr(5, 4), want: 0,
		},
		"Unreconciled": {
			reason: "No Synced condition: nothing says the composite moved past the allowance.",
			as:     []Allowance{at5}, xr: map[string]any{"metadata": map[string]any{"generation": int64(9)}}, want: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OnComposite(tc.as, tc.xr); len(got) != tc.want {
				t.Errorf("%s\nOnComposite() kept %d allowances; want %d", tc.reason, len(got), tc.want)
			}
		})
	}
}

func TestTrace(t *testing.T) {
	parent := Trace{{APIVersion: "v1", Kind: "Claim", Name: "c", Generation: 2, Field: "spec.size", User: "hans"}}
	child := append(Trace{{APIVersion: "v1", Kind: "Claim", Name: "c", Generation: 2, Field: "spec.size", User: "hans", Timestamp: "2026-01-01T00:00:00Z"}},
		Hop{APIVersion: "v1", Kind: "XR", Name: "x", Generation: 7})
	if !child.Extends(parent) {
		t.Errorf("Extends: a trace with one more hop (timestamps aside) must extend its parent")
	}
	if parent.Extends(parent) {
		t.Errorf("Extends: a trace does not extend itself")
	}
	other := Trace{{APIVersion: "v1", Kind: "Claim", Name: "c", Generation: 3, Field: "spec.size"}}
	if child.Extends(other) {
		t.Errorf("Extends: a different parent generation is another chain")
	}
	if got := child.Initiator(); got != "hans" {
		t.Errorf("Initiator() = %q, want hans", got)
	}
	tr, err := ParseTrace(FormatTrace(child))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(child, tr); diff != "" {
		t.Errorf("ParseTrace(FormatTrace(t)): -want, +got:\n%s", diff)
	}
	if _, err := ParseTrace(`{"kind":"x"}`); err == nil {
		t.Errorf("ParseTrace: an object is not a trace")
	}
}

func TestSortIsDeterministic(t *testing.T) {
	mk := func(kind, name, field string, gen int64) Allowance {
		return Allowance{Relation: v1alpha1.RelationExternal, Generation: gen, Trace: Trace{{Kind: kind, Name: name, Field: field}}}
	}
	as := []Allowance{mk("XDatabase", "b", "spec.size", 1), mk("XDatabase", "a", "spec.size", 1), mk("DatabaseClaim", "z", "spec.engine", 1), mk("XDatabase", "a", "spec.engine", 1)}
	Sort(as)
	var got []string
	for _, a := range as {
		got = append(got, a.Trace[0].Key())
	}
	want := []string{"DatabaseClaim/z/spec.engine", "XDatabase/a/spec.engine", "XDatabase/a/spec.size", "XDatabase/b/spec.size"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sort: -want, +got:\n%s", diff)
	}
}

func TestTraceLabels(t *testing.T) {
	got := TraceLabels(map[string]string{"kausality.io/trace-ticket": "JIRA-1", "kausality.io/trace-": "x", "kausality.io/trace": "[]", "other": "y"})
	if diff := cmp.Diff(map[string]string{"ticket": "JIRA-1"}, got); diff != "" {
		t.Errorf("TraceLabels: -want, +got:\n%s", diff)
	}
	if TraceLabels(nil) != nil {
		t.Errorf("TraceLabels(nil) must be nil so that hops omit labels")
	}
}

func TestParseFreeze(t *testing.T) {
	if f, err := ParseFreeze(`{"user":"alice","message":"incident 42","at":"2026-01-24T10:30:00Z"}`); err != nil || f.User != "alice" {
		t.Errorf("ParseFreeze(valid) = %+v, %v", f, err)
	}
	for in, want := range map[string]string{
		`{"message":"x"}`:              "user is empty",
		`true`:                         "invalid JSON",
		`{"user":"a","at":"monday"}`:   "not RFC 3339",
		`{"user":"a","reason":"typo"}`: "unknown field",
	} {
		if _, err := ParseFreeze(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFreeze(%s): want error containing %q, got %v", in, want, err)
		}
	}
}

func TestExpiredAt(t *testing.T) {
	at := time.Date(2026, 1, 24, 10, 0, 0, 0, time.UTC)
	a := Allowance{Trace: Trace{{Kind: "Bucket", Name: "b", Timestamp: Timestamp(at)}}}
	cases := map[string]struct {
		a     Allowance
		now   time.Time
		limit time.Duration
		want  bool
	}{
		"WithinLimit":    {a: a, now: at.Add(time.Minute), limit: time.Hour},
		"PastLimit":      {a: a, now: at.Add(2 * time.Hour), limit: time.Hour, want: true},
		"NoLimit":        {a: a, now: at.Add(1000 * time.Hour)},
		"NoTrace":        {a: Allowance{}, now: at.Add(2 * time.Hour), limit: time.Hour},
		"BadTimestampNo": {a: Allowance{Trace: Trace{{Timestamp: "yesterday"}}}, now: at, limit: time.Nanosecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.ExpiredAt(tc.now, tc.limit); got != tc.want {
				t.Errorf("ExpiredAt() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConsumedBy(t *testing.T) {
	upd := Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Update"}, Generation: 5}
	cases := map[string]struct {
		reason string
		a      Allowance
		p      Progress
		want   bool
	}{
		"NoRecordObservationConsumes": {reason: "Without an approval record observation alone consumes, as before.", a: upd, p: Progress{Observed: 5, Reconciled: true}, want: true},
		"ApprovedAndObserved":         {reason: "A generation an open gate let through and the provider observed consumes.", a: upd, p: Progress{Observed: 5, Reconciled: true, Approved: 5, HasApproved: true}, want: true},
		"ObservedBehindClosedGate":    {reason: "A generation the provider observed behind a closed gate applied nothing: the change still waits.", a: upd, p: Progress{Observed: 6, Reconciled: true, Approved: 4, HasApproved: true}},
		"ApprovedNotObserved":         {reason: "Approved but not yet observed: not applied yet.", a: upd, p: Progress{Observed: 4, Reconciled: true, Approved: 5, HasApproved: true}},
		"ApprovedLaterThanItsOwn":     {reason: "The write landed after another raised the generation, so its gate opened at a later generation than the allowance's own; the provider observed only the earlier one.", a: upd, p: Progress{Observed: 5, Reconciled: true, Approved: 6, HasApproved: true}},
		"UpdateAndDeleteHeld":         {reason: "An unsupported Update+Delete never opened, so it is not used up by a Synced generation.", a: Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Update", "Delete"}, Generation: 5}, p: Progress{Observed: 5, Reconciled: true, Approved: 3, HasApproved: true}},
		"ControllerChildObserved":     {reason: "Only spec-shipping External grants wait for an approval.", a: Allowance{Relation: v1alpha1.RelationControllerChild, Verbs: []string{"Update"}, Generation: 5}, p: Progress{Observed: 5, Reconciled: true, Approved: 1, HasApproved: true}, want: true},
		"ObservedBehindNarrowedGate": {reason: "Bob narrowed the open gate before the provider applied the resize: the generation it observed, Synced, was behind a gate without Update, so the change still waits and the gate reopens.",
			a: upd, p: Progress{Observed: 6, Reconciled: true, Approved: 5, HasApproved: true, Gate: []string{"Observe", "LateInitialize"}, HasGate: true}},
		"ObservedBehindOpenGate": {reason: "Observed behind the gate that opened for it: applied.",
			a: upd, p: Progress{Observed: 5, Reconciled: true, Approved: 5, HasApproved: true, Gate: []string{"Observe", "Update", "LateInitialize"}, HasGate: true}, want: true},
		"CreateBehindNarrowedGate": {reason: "A Create gate narrowed before the provider created the resource: crossplane-runtime skips the Create and reports Synced, which creates nothing.",
			a: Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Create"}, Generation: 1}, p: Progress{Observed: 2, Reconciled: true, Approved: 1, HasApproved: true, Gate: []string{"Observe", "LateInitialize"}, HasGate: true}},
		"ExpiredBehindClosedGate": {reason: "The function closed the gate at the limit while the provider was down, after the provider applied the change: an expired allowance opens nothing again, so the generation observed past its approval uses it up.",
			a: upd, p: Progress{Observed: 6, Reconciled: true, Approved: 5, HasApproved: true, Gate: []string{"Observe", "LateInitialize"}, HasGate: true, Expired: func(Allowance) bool { return true }}, want: true},
		"StarGate": {reason: "A gate of \"*\" opens every verb.",
			a: upd, p: Progress{Observed: 5, Reconciled: true, Approved: 5, HasApproved: true, Gate: []string{"*"}, HasGate: true}, want: true},
		"DeleteAlone": {reason: "Delete alone is used up by the deletion only.", a: Allowance{Relation: v1alpha1.RelationExternal, Verbs: []string{"Delete"}, Generation: 5}, p: Progress{Observed: 9, Reconciled: true, Approved: 9, HasApproved: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.ConsumedBy(tc.p); got != tc.want {
				t.Errorf("%s\nConsumedBy(%+v) = %t, want %t", tc.reason, tc.p, got, tc.want)
			}
		})
	}
}

func TestProgressOf(t *testing.T) {
	mr := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationApprovedGeneration: "4"}},
		"status":   map[string]any{"observedGeneration": int64(6)},
	}
	if got, want := ProgressOf(mr), (Progress{Observed: 6, Reconciled: true, Approved: 4, HasApproved: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("ProgressOf() = %+v, want %+v", got, want)
	}
	mr["spec"] = map[string]any{"managementPolicies": []any{"Observe", "Update"}}
	if got := ProgressOf(mr); !got.HasGate || !reflect.DeepEqual(got.Gate, []string{"Observe", "Update"}) {
		t.Errorf("ProgressOf() gate = %v (%t), want [Observe Update]", got.Gate, got.HasGate)
	}
	delete(mr, "spec")
	mr["metadata"] = map[string]any{"annotations": map[string]any{v1alpha1.AnnotationApprovedGeneration: "-1"}}
	if got := ProgressOf(mr); got.HasApproved {
		t.Errorf("ProgressOf() with a negative approved generation = %+v, want no approval record", got)
	}
}

func TestHopSizeErrors(t *testing.T) {
	big := strings.Repeat("x", MaxHopValue+1)
	quarter := strings.Repeat("y", MaxHopValues/4)
	cases := map[string]struct {
		hop  Hop
		want map[string]string
	}{
		"WithinBounds": {hop: Hop{Labels: map[string]string{"ticket": "T-9"}, Attestations: map[string]string{"metadata.annotations[jira]": "INFRA-1"}}},
		"LabelTooLarge": {hop: Hop{Labels: map[string]string{"ticket": big}},
			want: map[string]string{"metadata.annotations[kausality.io/trace-ticket]": "1025 bytes, more than the 1024 a trace label or attestation may hold: every allowance of the chain copies it"}},
		"AttestationTooLarge": {hop: Hop{Attestations: map[string]string{"spec.note": big}},
			want: map[string]string{"spec.note": "1025 bytes, more than the 1024 a trace label or attestation may hold: every allowance of the chain copies it"}},
		"TogetherTooLarge": {hop: Hop{Labels: map[string]string{"a": quarter[:MaxHopValue], "b": quarter[:MaxHopValue], "c": quarter[:MaxHopValue]}, Attestations: map[string]string{"d": quarter[:MaxHopValue]}},
			want: map[string]string{"metadata.annotations[kausality.io/trace-*]": "the trace labels and attestations hold 4100 bytes together, more than 4096: every allowance of the chain copies them"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.hop.SizeErrors()); diff != "" {
				t.Errorf("SizeErrors(): -want, +got:\n%s", diff)
			}
		})
	}
}
