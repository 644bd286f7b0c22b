package rollouts

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

var (
	xstore = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XStore"}
	now    = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
)

const logicNew = "logic 0a1b2c3d4e5f"

// store is XStore <ns>/<name> on revision rev; logic is what its
// KausalityUpgraded names ("" for none), upgraded whether it is True.
func store(ns, name, rev, logic string, upgraded bool, ann ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(xstore)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(ns + "-" + name))
	if rev != "" {
		_ = unstructured.SetNestedField(u.Object, rev, "spec", "crossplane", "compositionRevisionRef", "name")
	}
	cs := []any{map[string]any{"type": "Ready", "status": "True"}}
	if logic != "" {
		st := "False"
		if upgraded {
			st = "True"
		}
		cs = append(cs, map[string]any{"type": v1alpha1.ConditionUpgraded, "status": st, "message": logic + ": some composed resources have not applied the current logic yet"})
	}
	_ = unstructured.SetNestedSlice(u.Object, cs, "status", "conditions")
	if len(ann) == 2 {
		u.SetAnnotations(map[string]string{ann[0]: ann[1]})
	}
	return u
}

func upgrade(name string, generation int64, r *v1alpha1.UpgradeRollout) v1alpha1.UpgradeAllowance {
	return v1alpha1.UpgradeAllowance{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation}, Spec: v1alpha1.UpgradeAllowanceSpec{Rollout: r}}
}

func turns(ts ...rollout.Turn) string { return rollout.Turns(ts).Format() }

func TestWork(t *testing.T) {
	paced := upgrade("pt", 2, &v1alpha1.UpgradeRollout{})
	cases := map[string]struct {
		reason string
		uas    []v1alpha1.UpgradeAllowance
		xrs    []*unstructured.Unstructured
		// turns by XR name; absent: none.
		turns  map[string]string
		status map[string]*v1alpha1.RolloutStatus
		active bool
	}{
		"FirstOfEachFleet": {
			reason: "A fleet is one kind, namespace and revision: each begins with its first composite in name order.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs: []*unstructured.Unstructured{
				store("team", "b", "r1", logicNew, false), store("team", "a", "r1", logicNew, false),
				store("ops", "c", "r1", logicNew, false), store("ops", "d", "r1", logicNew, false),
			},
			turns: map[string]string{"a": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew}), "c": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew})},
			status: map[string]*v1alpha1.RolloutStatus{"pt": {Composites: 4, Turns: 2,
				Message: "exponentiallyUpdated(xr, xrs) is false"}},
			active: true,
		},
		"NextBatch": {
			reason: "Once the first applied the logic and is Ready, the batch doubles.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs: []*unstructured.Unstructured{
				store("team", "a", "r1", logicNew, true), store("team", "b", "r1", logicNew, false),
				store("team", "c", "r1", "", false), store("team", "d", "r1", "", false),
			},
			turns: map[string]string{"a": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew}), "b": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew})},
			status: map[string]*v1alpha1.RolloutStatus{"pt": {Composites: 4, Updated: 1, Turns: 2,
				Message: "exponentiallyUpdated(xr, xrs) is false"}},
			active: true,
		},
		"TurnKept": {
			reason: "A turn once given stays while the generation and logic do: a of the first batch not Ready for a moment does not recall b's.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs: []*unstructured.Unstructured{
				store("team", "a", "r1", logicNew, false), store("team", "b", "r1", logicNew, false, v1alpha1.AnnotationRolloutTurns, turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew})),
				store("team", "c", "r1", logicNew, false),
			},
			turns: map[string]string{"a": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew}), "b": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew})},
			status: map[string]*v1alpha1.RolloutStatus{"pt": {Composites: 3, Turns: 2,
				Message: "exponentiallyUpdated(xr, xrs) is false"}},
			active: true,
		},
		"TurnOfAnOlderGenerationDropped": {
			reason: "A turn given for an older generation of the UpgradeAllowance is not kept: its rollout may have changed.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs: []*unstructured.Unstructured{
				store("team", "a", "r1", logicNew, false), store("team", "b", "r1", logicNew, false, v1alpha1.AnnotationRolloutTurns, turns(rollout.Turn{Upgrade: "pt", Generation: 1, Logic: logicNew})),
			},
			turns: map[string]string{"a": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew})},
			status: map[string]*v1alpha1.RolloutStatus{"pt": {Composites: 2, Turns: 1,
				Message: "exponentiallyUpdated(xr, xrs) is false"}},
			active: true,
		},
		"NoRollout": {
			reason: "An UpgradeAllowance without a rollout paces nothing: no turn, no status, and a stale turn goes.",
			uas:    []v1alpha1.UpgradeAllowance{upgrade("at-once", 1, nil)},
			xrs:    []*unstructured.Unstructured{store("team", "a", "r1", logicNew, false, v1alpha1.AnnotationRolloutTurns, turns(rollout.Turn{Upgrade: "gone", Generation: 1, Logic: logicNew}))},
			status: map[string]*v1alpha1.RolloutStatus{},
		},
		"Invalid": {
			reason: "A rollout that does not compile gives no turn; its status says why.",
			uas:    []v1alpha1.UpgradeAllowance{upgrade("bad", 1, &v1alpha1.UpgradeRollout{PropagateWhen: []string{"nope("}})},
			xrs:    []*unstructured.Unstructured{store("team", "a", "r1", logicNew, false)},
			status: map[string]*v1alpha1.RolloutStatus{"bad": {Message: "UpgradeAllowance bad: spec.rollout: "}},
		},
		"NoRevisionNoLogic": {
			reason: "A composite on no revision yet, or that names no logic, is in no roll-out.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs:    []*unstructured.Unstructured{store("team", "a", "", logicNew, false), store("team", "b", "r1", "", false)},
			status: map[string]*v1alpha1.RolloutStatus{"pt": {}},
		},
		"Done": {
			reason: "Every composite applied it: each keeps its turn and nothing is under way.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs:    []*unstructured.Unstructured{store("team", "a", "r1", logicNew, true), store("team", "b", "r1", logicNew, true)},
			turns:  map[string]string{"a": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew}), "b": turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew})},
			status: map[string]*v1alpha1.RolloutStatus{"pt": {Composites: 2, Updated: 2, Turns: 2}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Work(rollout.NewRules(), tc.uas, tc.xrs, now)
			got := map[string]string{}
			for _, xr := range tc.xrs {
				if s := p.Turns[xr.GetUID()].Format(); s != "" {
					got[xr.GetName()] = s
				}
			}
			if diff := cmp.Diff(tc.turns, got, cmpEmpty()); diff != "" {
				t.Errorf("%s\nturns: -want, +got:\n%s", tc.reason, diff)
			}
			for n, st := range p.Status {
				if w := tc.status[n]; w != nil && strings.HasPrefix(st.Message, w.Message) && w.Message != "" {
					st.Message = w.Message
				}
			}
			if diff := cmp.Diff(tc.status, p.Status, cmpEmpty()); diff != "" {
				t.Errorf("%s\nstatus: -want, +got:\n%s", tc.reason, diff)
			}
			if p.Active != tc.active {
				t.Errorf("%s\nActive = %t, want %t", tc.reason, p.Active, tc.active)
			}
		})
	}
}

func cmpEmpty() cmp.Option {
	return cmp.FilterValues(func(a, b any) bool { return isEmpty(a) && isEmpty(b) }, cmp.Ignore())
}

func isEmpty(v any) bool {
	switch m := v.(type) {
	case map[string]string:
		return len(m) == 0
	case map[string]*v1alpha1.RolloutStatus:
		return len(m) == 0
	}
	return false
}

func TestReconcile(t *testing.T) {
	paced := upgrade("pt", 2, &v1alpha1.UpgradeRollout{})
	given := rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew}
	type want struct {
		err     error
		result  reconcile.Result
		patched []string // XR name=annotation patch
		status  []string // UpgradeAllowance status patches
	}
	cases := map[string]struct {
		reason string
		uas    []v1alpha1.UpgradeAllowance
		xrs    []*unstructured.Unstructured
		patch  error
		want   want
	}{
		"RecordsTurns": {
			reason: "The first composite gets its turn in one patch of the annotation alone, the status its counts, and the fleet is counted again soon.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs:    []*unstructured.Unstructured{store("team", "a", "r1", logicNew, false), store("team", "b", "r1", logicNew, false)},
			want: want{result: reconcile.Result{RequeueAfter: Active},
				patched: []string{fmt.Sprintf(`a={"metadata":{"annotations":{"kausality.io/rollout-turns":%q}}}`, turns(given))},
				status:  []string{`pt={"status":{"rollout":{"composites":2,"message":"exponentiallyUpdated(xr, xrs) is false","turns":1,"updated":0}}}`}},
		},
		"NothingChanged": {
			reason: "Turns and status as recorded: no write.",
			uas: []v1alpha1.UpgradeAllowance{func() v1alpha1.UpgradeAllowance {
				u := paced
				u.Status.Rollout = &v1alpha1.RolloutStatus{Composites: 1, Updated: 1, Turns: 1}
				return u
			}()},
			xrs:  []*unstructured.Unstructured{store("team", "a", "r1", logicNew, true, v1alpha1.AnnotationRolloutTurns, turns(given))},
			want: want{result: reconcile.Result{RequeueAfter: Idle}},
		},
		"MessageCleared": {
			reason: "Once nothing holds the roll-out its message is removed (a null in the merge patch), not kept from before.",
			uas: []v1alpha1.UpgradeAllowance{func() v1alpha1.UpgradeAllowance {
				u := paced
				u.Status.Rollout = &v1alpha1.RolloutStatus{Composites: 1, Updated: 0, Turns: 1, Message: "exponentiallyUpdated(xr, xrs) is false"}
				return u
			}()},
			xrs: []*unstructured.Unstructured{store("team", "a", "r1", logicNew, true, v1alpha1.AnnotationRolloutTurns, turns(given))},
			want: want{result: reconcile.Result{RequeueAfter: Idle},
				status: []string{`pt={"status":{"rollout":{"composites":1,"message":null,"turns":1,"updated":1}}}`}},
		},
		"StaleTurnRemoved": {
			reason: "A turn no roll-out gives any more is removed (a null in the merge patch).",
			xrs:    []*unstructured.Unstructured{store("team", "a", "r1", logicNew, true, v1alpha1.AnnotationRolloutTurns, turns(given))},
			want: want{result: reconcile.Result{RequeueAfter: Idle},
				patched: []string{`a={"metadata":{"annotations":{"kausality.io/rollout-turns":null}}}`}},
		},
		"PatchFails": {
			reason: "A write that fails is retried with the error.",
			uas:    []v1alpha1.UpgradeAllowance{paced},
			xrs:    []*unstructured.Unstructured{store("team", "a", "r1", logicNew, false)},
			patch:  errors.New("boom"),
			want: want{err: errors.Wrapf(errors.New("boom"), errFmtRecordTurns, "XStore", "a"),
				patched: []string{fmt.Sprintf(`a={"metadata":{"annotations":{"kausality.io/rollout-turns":%q}}}`, turns(given))}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var patched, status []string
			kube := &test.MockClient{
				MockList: func(_ context.Context, l client.ObjectList, _ ...client.ListOption) error {
					switch l := l.(type) {
					case *v1alpha1.UpgradeAllowanceList:
						l.Items = tc.uas
					case *unstructured.UnstructuredList:
						for _, xr := range tc.xrs {
							l.Items = append(l.Items, *xr)
						}
					}
					return nil
				},
				MockPatch: func(_ context.Context, o client.Object, p client.Patch, _ ...client.PatchOption) error {
					b, _ := p.Data(o)
					patched = append(patched, o.GetName()+"="+string(b))
					return tc.patch
				},
				MockStatusPatch: func(_ context.Context, o client.Object, p client.Patch, _ ...client.SubResourcePatchOption) error {
					b, _ := p.Data(o)
					status = append(status, o.GetName()+"="+string(b))
					return nil
				},
			}
			r := &Reconciler{Kube: kube, Fleet: kube, Composites: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{xstore} }, Rules: rollout.NewRules(), Now: func() time.Time { return now }}
			got, err := r.Reconcile(context.Background(), Key)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nReconcile(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.result, got); diff != "" {
				t.Errorf("%s\nReconcile(): -want result, +got result:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.patched, patched); diff != "" {
				t.Errorf("%s\nXR patches: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.status, status); diff != "" {
				t.Errorf("%s\nstatus patches: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// BenchmarkWork is one pass of the roll-out controller over a fleet of 50,
// 500 and 5,000 XStores, a quarter of them already upgraded, under one
// paced UpgradeAllowance: its time per composite, and the heap the fleet's
// cached objects hold per composite (each a whole XStore as the watch
// cache keeps it, managed fields stripped, with the status and turns
// Kausality writes). A pass reads the fleet from that cache only: it asks
// the API server for nothing, and writes the turns that changed. make
// bench-scale reports both with their growth.
func BenchmarkWork(b *testing.B) {
	uas := []v1alpha1.UpgradeAllowance{upgrade("pt", 2, &v1alpha1.UpgradeRollout{})}
	rules := rollout.NewRules()
	for _, n := range []int{50, 500, 5000} {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		xrs := make([]*unstructured.Unstructured, n)
		for i := range xrs {
			xrs[i] = store("shop", fmt.Sprintf("shop-%05d", i), "xstores-2", logicNew, i < n/4,
				v1alpha1.AnnotationRolloutTurns, turns(rollout.Turn{Upgrade: "pt", Generation: 2, Logic: logicNew}))
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		b.Run(fmt.Sprintf("fleet=%d", n), func(b *testing.B) {
			for b.Loop() {
				if p := Work(rules, uas, xrs, now); len(p.Turns) == 0 {
					b.Fatal("a pass gave no turn")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/composite")
			b.ReportMetric(float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))/float64(n), "cached-B/composite")
		})
		goruntime.KeepAlive(xrs)
	}
}
