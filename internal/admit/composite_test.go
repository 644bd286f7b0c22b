package admit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// claimWith is the DatabaseClaim orders at generation 2 with spec.size and
// the annotations given as key, value pairs.
func claimWith(size string, kv ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
	u.SetAPIVersion("example.com/v1alpha1")
	u.SetKind("DatabaseClaim")
	u.SetNamespace("team-a")
	u.SetName("orders")
	u.SetGeneration(2)
	ann := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		ann[kv[i]] = kv[i+1]
	}
	u.SetAnnotations(ann)
	return u
}

func TestInject(t *testing.T) {
	hop := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 3, Field: "spec.size", User: alice, Timestamp: allowance.Timestamp(now)}
	earned := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "example.com", Resource: "xdatabases"}, Verbs: []string{"Update"}, Generation: 3, Initiator: alice, Trace: allowance.Trace{hop}}
	copied := `[{"relation":"ControllerChild","target":{"apiGroup":"example.com","resource":"xdatabases"},"verbs":["Update"],"generation":9,"trace":[]}]`
	cases := map[string]struct {
		reason     string
		old, obj   *unstructured.Unstructured
		d          policy.Decision
		want       map[string]string // the kausality annotations afterwards
		wantErrHas string
	}{
		"EarnsFromStored": {reason: "The write earns an allowance and a trace; what the writer sent (a Claim's copy) is ignored.",
			old: claimWith("small"), obj: claimWith("large", v1alpha1.AnnotationAllowances, copied), d: policy.Decision{Allowances: []allowance.Allowance{earned}, Hop: hop},
			want: map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{earned}), v1alpha1.AnnotationTrace: allowance.FormatTrace(allowance.Trace{hop})}},
		"EarnsNothingKeepsTrace": {reason: "A write that earns nothing keeps the stored trace and allowances.",
			old: claimWith("small", v1alpha1.AnnotationTrace, "[]"), obj: claimWith("small", v1alpha1.AnnotationTrace, `[{"kind":"Forged"}]`),
			want: map[string]string{v1alpha1.AnnotationTrace: "[]"}},
		"UnreadableMetadataOnly": {reason: "With an unreadable stored annotation, a write that changes nothing passes and keeps it (finalizer removal never gets stuck).",
			old: claimWith("small", v1alpha1.AnnotationAllowances, "["), obj: claimWith("small", v1alpha1.AnnotationAllowances, copied),
			want: map[string]string{v1alpha1.AnnotationAllowances: "["}},
		"UnreadableRemoved": {reason: "Removing an unreadable annotation is the repair: it counts as none.",
			old: claimWith("small", v1alpha1.AnnotationAllowances, "["), obj: claimWith("large"), d: policy.Decision{Allowances: []allowance.Allowance{earned}, Hop: hop},
			want: map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{earned}), v1alpha1.AnnotationTrace: allowance.FormatTrace(allowance.Trace{hop})}},
		"UnreadableBlocksSpecChanges": {reason: "A spec change while the stored annotation cannot be read is refused, naming it.",
			old: claimWith("small", v1alpha1.AnnotationAllowances, "["), obj: claimWith("large", v1alpha1.AnnotationAllowances, "["), d: policy.Decision{Allowances: []allowance.Allowance{earned}, Hop: hop},
			wantErrHas: "cannot parse annotation kausality.io/allowances on DatabaseClaim team-a/orders"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Inject(tc.old, tc.obj, tc.d, nil)
			if tc.wantErrHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrHas) {
					t.Fatalf("%s\nInject(...) = %v, want an error containing %q", tc.reason, err, tc.wantErrHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nInject(...) = %v", tc.reason, err)
			}
			got := map[string]string{}
			for _, k := range []string{v1alpha1.AnnotationAllowances, v1alpha1.AnnotationTrace} {
				if v, ok := tc.obj.GetAnnotations()[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nannotations: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParentFor(t *testing.T) {
	size := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "example.com", Resource: "xdatabases"}, Verbs: []string{"Update"},
		Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}}, Generation: 2, Initiator: alice,
		Trace: allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 2, User: alice, Timestamp: allowance.Timestamp(now)}}}
	claim := claimWith("large", v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{size}))
	xr := func(spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetAPIVersion("example.com/v1alpha1")
		u.SetKind("XDatabase")
		u.SetName("orders-x1")
		return u
	}
	old := xr(map[string]any{"size": "small", "compositionRef": map[string]any{"name": "a"}})
	cases := map[string]struct {
		reason   string
		claim    *unstructured.Unstructured
		obj      *unstructured.Unstructured
		wantOK   bool
		wantNote string
	}{
		"Covered": {reason: "The Claim's allowance covers the size change.", claim: claim, obj: xr(map[string]any{"size": "large", "compositionRef": map[string]any{"name": "a"}}), wantOK: true},
		"CrossplaneFieldOnly": {reason: "Crossplane's own fields (resourceRefs) are no change a Claim must allow: without allowances nothing is missing.", claim: claimWith("large"),
			obj: xr(map[string]any{"size": "small", "compositionRef": map[string]any{"name": "a"}, "resourceRefs": []any{}})},
		"NotCovered": {reason: "The engine is not the allowance's field: the note names it.", claim: claim, obj: xr(map[string]any{"size": "small", "engine": "mysql", "compositionRef": map[string]any{"name": "a"}}), wantNote: "covers spec.engine"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, note, err := ParentFor(tc.claim, old, tc.obj, policy.ChildFor(tc.obj.GroupVersionKind(), "xdatabases"))
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tc.wantOK || !strings.Contains(note, tc.wantNote) {
				t.Errorf("%s\nParentFor(...) = %v, %q; want found %t, note containing %q", tc.reason, got, note, tc.wantOK, tc.wantNote)
			}
		})
	}
	if !CrossplaneField("spec.crossplane.compositionRef") || CrossplaneField("spec.crossplaneX") {
		t.Error("CrossplaneField: spec.crossplane and what lies below it, on segment boundaries")
	}
}

// TestParentForComposingComposite: Crossplane marks a composite Synced at
// the generation it reads back after composing. When Alice's resize of the
// XPlatform lands while Crossplane composes from the copy before it, the
// XPlatform reads Synced at the resize's generation though its XStore was
// composed from the generation before: the next reconcile, which carries the
// resize down, must still find the XPlatform's allowance. It is used up for
// the XStore once the XStore was composed from its generation.
func TestParentForComposingComposite(t *testing.T) {
	size := allowance.Allowance{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "v2.example.com", Resource: "xstores"}, Verbs: []string{"Update"},
		Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}}, Generation: 4, Initiator: alice,
		Trace: allowance.Trace{{APIVersion: "v2.example.com/v1alpha1", Kind: "XPlatform", Name: "plat", Generation: 4, Field: "spec.size", User: alice, Timestamp: allowance.Timestamp(now)}}}
	platform := func(synced int64, composed ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec":   map[string]any{"size": "large", "crossplane": map[string]any{"compositionRef": map[string]any{"name": "xplatforms-nested"}}},
			"status": map[string]any{"conditions": append([]any{map[string]any{"type": "Synced", "status": "True", "observedGeneration": synced}}, composed...)},
		}}
		u.SetAPIVersion("v2.example.com/v1alpha1")
		u.SetKind("XPlatform")
		u.SetNamespace("v2-freeze")
		u.SetName("plat")
		u.SetGeneration(4)
		u.SetAnnotations(map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{size})})
		return u
	}
	store := func(size string, composedFrom string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size, "crossplane": map[string]any{"compositionRef": map[string]any{"name": "xstores-nested"}}}}}
		u.SetAPIVersion("v2.example.com/v1alpha1")
		u.SetKind("XStore")
		u.SetNamespace("v2-freeze")
		u.SetName("plat-6dcc41f14ddc")
		u.SetAnnotations(map[string]string{v1alpha1.AnnotationComposedGeneration: composedFrom, AnnotationCompositionResourceName: "store"})
		return u
	}
	recorded := func(gen int64, untouched ...string) map[string]any {
		return map[string]any{"type": v1alpha1.ConditionComposed, "status": "True", "reason": "Composed",
			"message": allowance.Composed{Generation: gen, Untouched: untouched}.String()}
	}
	cases := map[string]struct {
		reason   string
		parent   *unstructured.Unstructured
		old, obj *unstructured.Unstructured
		wantOK   bool
		wantNote string
	}{
		"SyncedBeforeCarriedDown": {
			reason: "The XPlatform reads Synced at generation 4, set by the reconcile that composed the XStore from generation 3: the allowance still covers carrying the resize down.",
			parent: platform(4), old: store("small", "3"), obj: store("large", "4"), wantOK: true,
		},
		"NotYetSynced": {
			reason: "Before Crossplane marks the XPlatform Synced at the resize's generation the allowance covers the resize, as before.",
			parent: platform(3), old: store("small", "3"), obj: store("large", "4"), wantOK: true,
		},
		"UsedUp": {
			reason: "Once the XStore was composed from generation 4, the allowance is used up for it: a later change of spec.size at the same generation has no cause.",
			parent: platform(4), old: store("large", "4"), obj: store("huge", "4"), wantNote: "no unconsumed allowance on XPlatform v2-freeze/plat covers spec.size",
		},
		"UsedUpByTheParentsRecord": {
			reason: "Once the XPlatform records that its run at generation 4 left the XStore as stored, the allowance is used up for it as its own record would use it.",
			parent: platform(4, recorded(4, "store")), old: store("small", "3"), obj: store("large", "3"), wantNote: "no unconsumed allowance on XPlatform v2-freeze/plat covers spec.size",
		},
		"ParentsRecordOfOthers": {
			reason: "The XPlatform's record of other resources leaves the allowance to the XStore.",
			parent: platform(4, recorded(4, "network")), old: store("small", "3"), obj: store("large", "3"), wantOK: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, note, err := ParentFor(tc.parent, tc.old, tc.obj, policy.ChildFor(tc.obj.GroupVersionKind(), "xstores"))
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tc.wantOK || !strings.Contains(note, tc.wantNote) {
				t.Errorf("%s\nParentFor(...) = %v, %q; want found %t, note containing %q", tc.reason, got, note, tc.wantOK, tc.wantNote)
			}
		})
	}

	// A Claim's allowance is consumed once the Claim is observed at its
	// generation: the claim controller syncs the Claim before marking it.
	claim := claimWith("large", v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{{Relation: v1alpha1.RelationControllerChild,
		Target: v1alpha1.Target{APIGroup: "example.com", Resource: "xdatabases"}, Verbs: []string{"Update"}, Generation: 2, Initiator: alice,
		Trace: allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 2, User: alice, Timestamp: allowance.Timestamp(now)}}}}))
	claim.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True", "observedGeneration": int64(2)}}}
	xdb := func(size string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size, "claimRef": map[string]any{"name": "orders"}}}}
		u.SetAPIVersion("example.com/v1alpha1")
		u.SetKind("XDatabase")
		u.SetName("orders-x1")
		return u
	}
	if got, _, err := ParentFor(claim, xdb("small"), xdb("large"), policy.ChildFor(xdb("").GroupVersionKind(), "xdatabases")); err != nil || got != nil {
		t.Errorf("ParentFor(Claim observed at the allowance's generation) = %v, %v; want no allowance: a Claim's is consumed by its observed generation", got, err)
	}
}

func TestRefuseBroken(t *testing.T) {
	broken := []string{`AllowancePolicy claims: rules[0].conditions[0]: syntax error`}
	checkVerdict(t, "A spec change while a policy for the kind does not compile is refused, naming the policy.", "RefuseBroken(spec change)",
		RefuseBroken(broken, claimWith("small"), claimWith("large")), metrics.ReasonBrokenPolicy,
		"its spec cannot change while an AllowancePolicy for DatabaseClaim does not compile: AllowancePolicy claims")
	checkVerdict(t, "A metadata-only write passes, so no deletion gets stuck.", "RefuseBroken(metadata only)",
		RefuseBroken(broken, claimWith("small"), claimWith("small", "finalizer-gone", "true")), "", "")
	checkVerdict(t, "A creation is refused: what the policy would permit is unknown.", "RefuseBroken(creation)",
		RefuseBroken(broken, nil, claimWith("small")), metrics.ReasonBrokenPolicy, "does not compile")
	checkVerdict(t, "Without a broken policy nothing is refused.", "RefuseBroken(no broken policy)",
		RefuseBroken(nil, claimWith("small"), claimWith("large")), "", "")
}

func TestComposed(t *testing.T) {
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"resourceRefs": []any{map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": "a"}, map[string]any{"kind": "Bucket"}},
		"crossplane":   map[string]any{"resourceRefs": []any{map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": "b", "namespace": "other"}}},
	}}}
	xr.SetNamespace("team-a")
	var got []string
	for _, u := range Composed(xr) {
		got = append(got, u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
	}
	if diff := cmp.Diff([]string{"Bucket team-a/a", "Bucket other/b"}, got); diff != "" {
		t.Errorf("Composed: references without a name are skipped, the composite's namespace is the default: -want, +got:\n%s", diff)
	}
}
