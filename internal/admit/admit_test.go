package admit

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

const (
	crossplane = "system:serviceaccount:crossplane-system:crossplane"
	kausality  = "system:serviceaccount:crossplane-system:provider-kausality"
	recorder   = "system:serviceaccount:crossplane-system:provider-recorder"
	bob        = "bob@example.com"
	alice      = "alice@example.com"
)

var (
	writers = Writers{Provider: kausality, Crossplane: crossplane}
	now     = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
)

// bucket is a gated Bucket controlled by XDatabase orders-x1, at
// generation 5, with the annotations given as key, value pairs.
func bucket(spec map[string]any, kv ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": spec}}}
	u.SetAPIVersion("recorder.kausality.io/v1alpha1")
	u.SetKind("Bucket")
	u.SetName("orders-data")
	u.SetGeneration(5)
	u.SetLabels(map[string]string{v1alpha1.LabelGated: "true"})
	ann := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		ann[kv[i]] = kv[i+1]
	}
	u.SetAnnotations(ann)
	return u
}

func TestProtect(t *testing.T) {
	const turns = `[{"upgrade":"pt-0-10","generation":1,"logic":"logic 0a1b2c3d4e5f"}]`
	stored := bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}")
	observeOnly := bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationRequestedPolicies, `["Observe"]`)
	cases := map[string]struct {
		reason string
		user   string
		old    *unstructured.Unstructured // stored when not nil
		obj    *unstructured.Unstructured
		want   string // a part of the refusal, "" when allowed
	}{
		"UserDropsRequest": {reason: "Without the request an observe-only import's gate would open for Create: only Kausality and Crossplane write it.", user: bob, old: observeOnly,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}"), want: "annotation kausality.io/requested-policies"},
		"UserWidensRequest": {reason: "Nor may a user widen the request.", user: bob, old: observeOnly,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationRequestedPolicies, `["*"]`), want: "annotation kausality.io/requested-policies"},
		"CrossplaneRecordsRequest": {reason: "Crossplane writes the request the function recorded.", user: crossplane,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationRequestedPolicies, `["Observe"]`)},
		"UserForgesApproval": {reason: "The approval record blesses pending changes: only Kausality writes it.", user: bob, obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, `{"spec.forProvider.region":"830f45bf08cb"}`), want: "annotation kausality.io/approved"},
		"UserForgesPreviousValue": {reason: "The value an abandoned change is answered with comes from the record the function keeps: no user may plant one.", user: bob,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationPrevious, `{"spec.forProvider.size":99}`), want: "annotation kausality.io/previous"},
		"UserForgesApprovedBefore": {reason: "What the approval goes back to when a change expires is written only with the approval.", user: bob,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationApprovedBefore, `{"spec.forProvider.size":"0123456789ab"}`), want: "annotation kausality.io/approved-before"},
		"UserDropsGatedLabel": {reason: "Dropping the gated label would un-gate the resource.", user: bob, obj: func() *unstructured.Unstructured { u := stored.DeepCopy(); u.SetLabels(nil); return u }(), want: "label kausality.io/gated"},
		"UserSetsFreeze":      {reason: "A freeze is anyone's to set.", user: bob, obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationFreeze, "incident")},
		"CrossplaneWrites":    {reason: "Crossplane writes the function's output.", user: crossplane, obj: bucket(nil)},
		"ProviderIsNotTrusted": {reason: "A cloud provider's service account is no trusted writer.", user: recorder, obj: bucket(nil, v1alpha1.AnnotationTrace, "[1]", v1alpha1.AnnotationApproved, "{}"),
			want: "annotation kausality.io/trace"},
		"UnreadableTraceRemoved": {reason: "Removing a trace nobody can read loses nothing and is the repair path.", user: bob,
			obj: bucket(nil, v1alpha1.AnnotationApproved, "{}")},
		"UserTakesATurn": {reason: "A roll-out turn lets an upgrade through: only the provider, which counts the fleet, records it.", user: bob,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationRolloutTurns, turns), want: "annotation kausality.io/rollout-turns"},
		"PipelineTakesATurn": {reason: "Crossplane writes what a pipeline step says; no step may give its XR a turn.", user: crossplane,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationRolloutTurns, turns), want: "annotation kausality.io/rollout-turns"},
		"ProviderGivesATurn": {reason: "The provider records the turns it worked out.", user: kausality,
			obj: bucket(nil, v1alpha1.AnnotationTrace, "[]", v1alpha1.AnnotationApproved, "{}", v1alpha1.AnnotationRolloutTurns, turns)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := stored
			if tc.old != nil {
				old = tc.old
			}
			if name == "UnreadableTraceRemoved" {
				old = bucket(nil, v1alpha1.AnnotationTrace, "[", v1alpha1.AnnotationApproved, "{}")
			}
			checkVerdict(t, tc.reason, "Protect("+tc.user+")", writers.Protect(tc.user, old, tc.obj), metrics.ReasonProtected, tc.want)
		})
	}
}

func TestRestoreStale(t *testing.T) {
	stored := bucket(nil, v1alpha1.AnnotationAllowances, `[{"relation":"External"}]`, v1alpha1.AnnotationApproved, "{}")
	stale := bucket(nil, "crossplane.io/external-name", "orders-data")
	if !RestoreStale(stored, stale) {
		t.Fatal("RestoreStale: a provider's bookkeeping write with an older copy of the annotations is a stale write-back")
	}
	if got := stale.GetAnnotations(); got[v1alpha1.AnnotationAllowances] != stored.GetAnnotations()[v1alpha1.AnnotationAllowances] || got[v1alpha1.AnnotationApproved] != "{}" || got["crossplane.io/external-name"] != "orders-data" {
		t.Errorf("RestoreStale: annotations %v, want the stored protected ones back and the bookkeeping kept", got)
	}
	if RestoreStale(stored, bucket(nil, v1alpha1.AnnotationApproved, "{}")) {
		t.Error("RestoreStale: a write without bookkeeping is no stale write-back; it is judged as it is")
	}
}

func TestLateInitialized(t *testing.T) {
	old := bucket(map[string]any{"size": int64(1)})
	cases := map[string]struct {
		reason string
		user   string
		obj    *unstructured.Unstructured
		want   bool
	}{
		"ProviderFillsUnsetField":  {reason: "A provider copying the cloud's value into an unset field.", user: recorder, obj: bucket(map[string]any{"size": int64(1), "region": "eu"}), want: true},
		"ProviderChangesSetField":  {reason: "A provider changing a set field is checked like a hand edit.", user: recorder, obj: bucket(map[string]any{"size": int64(2)})},
		"UserFillsUnsetField":      {reason: "Only a provider's service account late-initializes.", user: bob, obj: bucket(map[string]any{"size": int64(1), "region": "eu"})},
		"CrossplaneIsNoController": {reason: "Crossplane's writes are the function's output, checked by the chain.", user: crossplane, obj: bucket(map[string]any{"size": int64(1), "region": "eu"})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := writers.LateInitialized(tc.user, old, tc.obj); got != tc.want {
				t.Errorf("%s\nLateInitialized(%s) = %t, want %t", tc.reason, tc.user, got, tc.want)
			}
		})
	}
	if writers.LateInitialized(recorder, nil, old) {
		t.Error("LateInitialized: a creation is no late initialization")
	}
}

func TestFreeze(t *testing.T) {
	ps := []v1alpha1.AllowancePolicy{{Spec: v1alpha1.AllowancePolicySpec{
		For:      v1alpha1.ObjectKind{APIGroup: "recorder.kausality.io", APIVersion: "v1alpha1", Kind: "Bucket"},
		Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: alice, MayInitiate: true}},
	}}}
	ps[0].SetName("buckets")
	set, errs := policy.NewCache().For("recorder.kausality.io/v1alpha1", "Bucket", ps)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	byBob := allowance.FormatFreeze(allowance.Freeze{User: bob, Message: "incident", At: "2026-11-23T11:00:00Z"})
	cases := map[string]struct {
		reason   string
		user     string
		old, obj *unstructured.Unstructured
		want     string // a part of the denial, "" when admitted
		wantBy   string // who the stored freeze names afterwards, "" when none
	}{
		"AnyoneSets":          {reason: "Anyone may freeze; admission records who, whatever the value claims.", user: bob, old: bucket(nil), obj: bucket(nil, v1alpha1.AnnotationFreeze, `{"user":"alice@example.com"}`), wantBy: bob},
		"OthersCannotLift":    {reason: "Carol may not lift Bob's freeze.", user: "carol@example.com", old: bucket(nil, v1alpha1.AnnotationFreeze, byBob), obj: bucket(nil), want: "was set by bob@example.com"},
		"SetterLifts":         {reason: "Bob lifts his own freeze.", user: bob, old: bucket(nil, v1alpha1.AnnotationFreeze, byBob), obj: bucket(nil)},
		"InitiatorLifts":      {reason: "A subject a policy for the kind lets initiate may lift anyone's freeze.", user: alice, old: bucket(nil, v1alpha1.AnnotationFreeze, byBob), obj: bucket(nil)},
		"UnreadableNamesNone": {reason: "A freeze that cannot be read names nobody: Bob cannot lift it.", user: bob, old: bucket(nil, v1alpha1.AnnotationFreeze, "{"), obj: bucket(nil), want: "nobody readable"},
		"ProviderWriteBack":   {reason: "A provider never lifts a freeze: its older copy written back keeps the stored one.", user: recorder, old: bucket(nil, v1alpha1.AnnotationFreeze, byBob), obj: bucket(nil), wantBy: bob},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkVerdict(t, tc.reason, "Freeze("+tc.user+")", writers.Freeze(policy.Identity{Username: tc.user}, tc.old, tc.obj, set, now), metrics.ReasonFrozenWrite, tc.want)
			if t.Failed() {
				return
			}
			v, ok := tc.obj.GetAnnotations()[v1alpha1.AnnotationFreeze]
			f, _ := allowance.ParseFreeze(v)
			if tc.want == "" && (ok != (tc.wantBy != "") || f.User != tc.wantBy) {
				t.Errorf("%s\nfreeze afterwards %q, want one set by %q", tc.reason, v, tc.wantBy)
			}
		})
	}
}

func TestOnlyTurns(t *testing.T) {
	const turns = `[{"upgrade":"pt-0-10","generation":1,"logic":"logic 0a1b2c3d4e5f"}]`
	old := bucket(map[string]any{"size": int64(1)}, v1alpha1.AnnotationTrace, "[]")
	withTurns := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u = u.DeepCopy()
		ann := u.GetAnnotations()
		ann[v1alpha1.AnnotationRolloutTurns] = turns
		u.SetAnnotations(ann)
		u.SetResourceVersion("7")
		return u
	}
	cases := map[string]struct {
		reason   string
		old, obj *unstructured.Unstructured
		want     bool
	}{
		"TurnsOnly":   {reason: "The provider's record alone.", old: old, obj: withTurns(old), want: true},
		"AndSpec":     {reason: "A spec change besides is judged as every write.", old: old, obj: withTurns(bucket(map[string]any{"size": int64(2)}, v1alpha1.AnnotationTrace, "[]"))},
		"AndAnother":  {reason: "Another annotation besides is judged as every write.", old: old, obj: withTurns(bucket(map[string]any{"size": int64(1)}, v1alpha1.AnnotationTrace, "[1]"))},
		"Creation":    {reason: "A creation is judged as every write.", obj: withTurns(old)},
		"NothingTurn": {reason: "A write that changes nothing at all changes nothing but turns.", old: old, obj: old.DeepCopy(), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OnlyTurns(tc.old, tc.obj); got != tc.want {
				t.Errorf("%s\nOnlyTurns() = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
