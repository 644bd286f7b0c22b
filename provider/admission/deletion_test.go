package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	kpolicy "github.com/kausality-io/kausality-crossplane/internal/policy"
)

// storedBuckets are the Buckets the API server holds, by name, as the
// tests compare them (without the resource version the fake client keeps).
func storedBuckets(t testing.TB, k client.Reader) map[string]map[string]any {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(bucketGVK.GroupVersion().WithKind("BucketList"))
	if err := k.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, b := range l.Items {
		unstructured.RemoveNestedField(b.Object, "metadata", "resourceVersion")
		out[b.GetName()] = b.Object
	}
	return out
}

// byName are the objects, by name.
func byName(us ...*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, u := range us {
		out[u.GetName()] = u.Object
	}
	return out
}

func TestDeletion(t *testing.T) {
	type args struct {
		// objs are what the API server holds: policies, the XR, Buckets.
		objs []client.Object
		req  admission.Request
		// undiscovered: the provider has just started and not yet
		// discovered the managed kinds.
		undiscovered bool
	}
	type want struct {
		result result
		// buckets are the Buckets as stored afterwards.
		buckets map[string]map[string]any
	}
	claims := allowancePolicy(t, claimsPolicy)
	orphans := allowancePolicy(t, xdatabasesPolicy)
	deletesCloud := allowancePolicy(t, xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) {
		p.Spec.Deleting.Policies = append(p.Spec.Deleting.Policies, v1alpha1.PolicyEntry{
			Target:   v1alpha1.Target{External: map[string]string{"apiGroup": "recorder.kausality.io", "kind": "Bucket"}},
			Relation: v1alpha1.RelationExternal, Verbs: []string{v1alpha1.VerbDelete},
		})
	})

	deletable := claim(t, annotate(v1alpha1.AnnotationAllowDelete, "true"))
	data := bucket(t)
	logs := bucket(t, name("orders-logs"), generation(2), synced("True", 2))
	// Buckets that are not the XR's gated resources: never touched.
	ungated := bucket(t, name("orders-cache"), unlabel(v1alpha1.LabelGated))
	other := bucket(t, name("payments-data"), label("crossplane.io/composite", "payments-x1"))
	// The XR composes both Buckets (spec.resourceRefs).
	composite := func(mods ...mod) *unstructured.Unstructured {
		return xr(t, append([]mod{set("spec.resourceRefs[1]", map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": "orders-logs"})}, mods...)...)
	}
	all := []client.Object{composite(), data, logs, ungated, other}
	untouched := byName(data, logs, ungated, other)

	// opened is b with its Delete gate opened for a deletion whose own
	// hop is origin.
	opened := func(b *unstructured.Unstructured, origin allowance.Hop) *unstructured.Unstructured {
		gen := b.GetGeneration() + 1
		own := allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: b.GetName(), Generation: gen, Timestamp: origin.Timestamp}
		out := b.DeepCopy()
		allowances(allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbDelete, gen, allowance.Trace{origin, own}))(out)
		policies(gate.Observe, gate.Delete)(out)
		return out
	}
	// revoked is an opened Bucket whose Delete gate was revoked: its
	// allowance marked consumed, its gate closed again.
	revoked := func(b *unstructured.Unstructured) *unstructured.Unstructured {
		as, _ := allowance.Parse(b.GetAnnotations()[v1alpha1.AnnotationAllowances])
		allowances(consumed(as[0]))(b)
		policies(gate.Observe, gate.LateInitialize)(b)
		return b
	}
	// wildcard is b with its gate open for a change whose rule granted the
	// External verbs "*": it includes Delete, but no deletion opened it.
	wildcard := func(b *unstructured.Unstructured, origin allowance.Hop) *unstructured.Unstructured {
		gen := b.GetGeneration() + 1
		own := allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: b.GetName(), Generation: gen, Timestamp: origin.Timestamp}
		out := b.DeepCopy()
		allowances(allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbAll, gen, allowance.Trace{origin, own}))(out)
		policies("*")(out)
		return out
	}
	byAlice := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 1, User: alice, Timestamp: ts(0)}
	// Nested XRs: an XPlatform composed the XDatabase, which composed the
	// Buckets; Alice deletes the XPlatform.
	platform := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "XPlatform",
		"metadata": map[string]any{"name": "platform", "uid": "00000000-0000-4000-8000-0000000000f1", "generation": int64(1)},
		"spec":     map[string]any{"crossplane": map[string]any{"resourceRefs": []any{map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "XDatabase", "name": "orders-x1"}}}},
	}}
	nested := func(mods ...mod) *unstructured.Unstructured {
		return composite(append([]mod{unset("spec.claimRef"), set("metadata.ownerReferences", []any{map[string]any{
			"apiVersion": "example.com/v1alpha1", "kind": "XPlatform", "name": "platform", "uid": "00000000-0000-4000-8000-0000000000f1", "controller": true,
		}})}, mods...)...)
	}
	platforms := func(verbs ...string) *v1alpha1.AllowancePolicy {
		return allowancePolicy(t, `
metadata: {name: xplatforms}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XPlatform}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  deleting:
    policies:
    - target: {apiGroup: example.com, apiVersion: v1alpha1, resource: xdatabases}
      relation: ControllerChild
      verbs: [`+strings.Join(verbs, ", ")+`]
`)
	}
	protectedCloud := allowancePolicy(t, xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) {
		p.Spec.DeletionProtection = true
		p.Spec.Deleting.Policies = append(p.Spec.Deleting.Policies, v1alpha1.PolicyEntry{
			Target:   v1alpha1.Target{External: map[string]string{"apiGroup": "recorder.kausality.io", "kind": "Bucket"}},
			Relation: v1alpha1.RelationExternal, Verbs: []string{v1alpha1.VerbDelete},
		})
	})
	byAliceOnPlatform := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XPlatform", Name: "platform", Generation: 1, User: alice, Timestamp: ts(0)}
	gc := authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:generic-garbage-collector", Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	byUpgrade := allowance.Hop{APIVersion: "kausality.io/v1alpha1", Kind: v1alpha1.UpgradeAllowanceKind, Name: "xdatabases-buckets-2", Generation: 1, Timestamp: ts(0)}
	opensBoth := "deleting DatabaseClaim team-a/orders deletes these cloud resources, as its policies allow: Bucket orders-data, Bucket orders-logs"

	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"ProtectedDenied": {
			reason: "Deleting a Claim whose policy sets deletionProtection without kausality.io/allow-delete is denied naming the annotation; nothing is opened.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: remove(asAlice, claim(t))},
			want: want{
				result:  result{Code: http.StatusForbidden, Message: `DatabaseClaim team-a/orders is protected from deletion by AllowancePolicy claims; set the annotation kausality.io/allow-delete: "true" on it to delete it`},
				buckets: untouched,
			},
		},
		"ProtectedAllowDeleteNotTrue": {
			reason: "Only the value \"true\" lets a protected object go.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: remove(asAlice, claim(t, annotate(v1alpha1.AnnotationAllowDelete, "yes")))},
			want: want{
				result:  result{Code: http.StatusForbidden, Message: `DatabaseClaim team-a/orders is protected from deletion by AllowancePolicy claims; set the annotation kausality.io/allow-delete: "true" on it to delete it`},
				buckets: untouched,
			},
		},
		"DeletingPoliciesDeleteCloud": {
			reason: "The XR's deleting policies allow the external Delete: each gated Bucket of that XR gets an External Delete allowance traced to the deleting user and the gate [Observe, Delete]; other Buckets are not touched.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: remove(asAlice, deletable)},
			want: want{
				result:  result{Allowed: true, Warnings: []string{opensBoth}},
				buckets: byName(opened(data, byAlice), opened(logs, byAlice), ungated, other),
			},
		},
		"DeletingPoliciesOrphan": {
			reason: "The XR's deleting policies do not allow the external Delete: the deletion is admitted and every gate stays closed, so the cloud resources are orphaned.",
			args:   args{objs: append([]client.Object{claims, orphans}, all...), req: remove(asAlice, deletable)},
			want:   want{result: result{Allowed: true}, buckets: untouched},
		},
		"DryRun": {
			reason: "A dry run opens nothing.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: dryRun(remove(asAlice, deletable))},
			want:   want{result: result{Allowed: true}, buckets: untouched},
		},
		"CompositeDeletedByCrossplane": {
			reason: "Crossplane deleting a Claim's composite carries out the Claim's deletion, which opened what its user was permitted: it opens nothing of its own (else Bob's Claim deletion would open through Crossplane).",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: remove(asCrossplane, composite())},
			want:   want{result: result{Allowed: true}, buckets: untouched},
		},
		"OpenedOnce": {
			reason: "A Delete gate the Claim's deletion opened stays as it is when Crossplane then deletes the composite: the allowance keeps the Claim's trace.",
			args: args{objs: []client.Object{claims, deletesCloud, composite(), opened(data, byAlice), opened(logs, byAlice), ungated, other},
				req: remove(asCrossplane, composite())},
			want: want{result: result{Allowed: true}, buckets: byName(opened(data, byAlice), opened(logs, byAlice), ungated, other)},
		},
		"BobDeletesOrphans": {
			reason: "Bob (edit rights, allow-delete set) may delete the Claim, but no policy lets him initiate: no Delete gate opens, the cloud resources are orphaned.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: remove(asBob, deletable)},
			want:   want{result: result{Allowed: true}, buckets: untouched},
		},
		"NoDeletingSectionOrphans": {
			reason: "A policy without a deleting section leaves the deleting phase unrestricted for the function, but deleting cloud resources is granted explicitly or not at all.",
			args: args{objs: append([]client.Object{claims, allowancePolicy(t, xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) { p.Spec.Deleting = nil })}, all...),
				req: remove(asAlice, deletable)},
			want: want{result: result{Allowed: true}, buckets: untouched},
		},
		"ForeignResourceRef": {
			reason: "A Claim whose spec.resourceRef names a composite that does not claim it back (Bob pointed it at Alice's) opens nothing.",
			args: args{objs: append([]client.Object{claims, deletesCloud}, all...),
				req: remove(asAlice, claim(t, name("bobs"), annotate(v1alpha1.AnnotationAllowDelete, "true")))},
			want: want{result: result{Allowed: true}, buckets: untouched},
		},
		"LabelWithoutControllerReference": {
			reason: "A Bucket that carries the composite's label but another controller is not the composite's: it stays closed.",
			args: args{objs: []client.Object{claims, deletesCloud, composite(), data, bucket(t, name("orders-impostor"), set("metadata.ownerReferences[0].uid", "someone-else"))},
				req: remove(asAlice, deletable)},
			want: want{result: result{Allowed: true, Warnings: []string{"deleting DatabaseClaim team-a/orders deletes these cloud resources, as its policies allow: Bucket orders-data"}},
				buckets: byName(opened(data, byAlice), bucket(t, name("orders-impostor"), set("metadata.ownerReferences[0].uid", "someone-else")))},
		},
		"OwnedButNotComposed": {
			reason: "Bob's own Bucket with a controller reference to Alice's XR and its composite label (both his to set) is no resource of that XR: its gate stays closed.",
			args: args{objs: []client.Object{claims, deletesCloud, composite(), data, logs, bucket(t, name("bobs"))},
				req: remove(asAlice, deletable)},
			want: want{result: result{Allowed: true, Warnings: []string{opensBoth}},
				buckets: byName(opened(data, byAlice), opened(logs, byAlice), bucket(t, name("bobs")))},
		},
		"UnclaimedCompositeDeletedByAlice": {
			reason: "Deleting a composite directly (unclaimed or modern) opens its resources' Delete gates as its policies allow the user.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: remove(asAlice, composite(unset("spec.claimRef")))},
			want: want{
				result: result{Allowed: true, Warnings: []string{"deleting XDatabase orders-x1 deletes these cloud resources, as its policies allow: Bucket orders-data, Bucket orders-logs"}},
				buckets: byName(opened(data, allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 3, User: alice, Timestamp: ts(0)}),
					opened(logs, allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 3, User: alice, Timestamp: ts(0)}), ungated, other),
			},
		},
		"OrphaningCompositeDeletion": {
			reason: "Deleting a composite with propagationPolicy Orphan keeps its Buckets: no Delete gate opens, which would outlive the deletion and let anyone who may delete a kept Bucket delete its cloud resource.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: orphan(remove(asAlice, composite(unset("spec.claimRef"))))},
			want: want{
				result:  result{Allowed: true, Warnings: []string{"XDatabase orders-x1 is deleted orphaning what it composed: their gates stay closed and their cloud resources are kept"}},
				buckets: untouched,
			},
		},
		"OrphaningClaimDeletion": {
			reason: "A Claim's composite is deleted by Crossplane whatever the Claim's propagation policy: the Claim's deletion opens as its policies allow.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: orphan(remove(asAlice, deletable))},
			want: want{
				result:  result{Allowed: true, Warnings: []string{opensBoth}},
				buckets: byName(opened(data, byAlice), opened(logs, byAlice), ungated, other),
			},
		},
		"NotDiscoveredYet": {
			reason: "Right after a restart the managed kinds are unknown: a gated Bucket would be taken for a composite and its open gate left open, so every deletion is refused with a retryable error until discovery has run.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, composite(), wildcard(data, byAlice)), req: remove(asBob, wildcard(data, byAlice)), undiscovered: true},
			want: want{
				result:  result{Code: http.StatusServiceUnavailable, Message: "cannot decide what deleting Bucket orders-data does yet: the provider has not discovered the managed resource kinds since it started; retry in a moment"},
				buckets: byName(wildcard(data, byAlice)),
			},
		},
		"MalformedAllowancesDenied": {
			reason: "When a Bucket's allowances cannot be read, what the deletion does to the cloud cannot be decided, so it is denied.",
			args: args{objs: []client.Object{claims, deletesCloud, composite(), bucket(t, annotate(v1alpha1.AnnotationAllowances, "["))},
				req: remove(asAlice, deletable)},
			want: want{
				result: result{Code: http.StatusForbidden,
					Message: "cannot decide what deleting DatabaseClaim team-a/orders does to the cloud, so it is not deleted: cannot parse annotation kausality.io/allowances on Bucket orders-data: invalid JSON: unexpected EOF"},
				buckets: byName(bucket(t, annotate(v1alpha1.AnnotationAllowances, "["))),
			},
		},
		"CompositeGone": {
			reason: "A Claim whose composite is already gone has nothing to open.",
			args:   args{objs: []client.Object{claims, deletesCloud, data, logs}, req: remove(asAlice, deletable)},
			want:   want{result: result{Allowed: true}, buckets: byName(data, logs)},
		},
		"NoPolicies": {
			reason: "A kind without policies is neither protected nor opens anything.",
			args:   args{objs: all, req: remove(asAlice, claim(t))},
			want:   want{result: result{Allowed: true}, buckets: untouched},
		},
		"BucketDeletedAloneRevokesTheDeleteGate": {
			reason: "Bob deletes a Bucket whose Delete gate was opened for a Claim deletion that never became final (the XR and the Claim stand): the gate is revoked before the deletion goes on, so the cloud bucket is orphaned.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), claim(t), opened(data, byAlice)}, req: remove(asBob, opened(data, byAlice))},
			want: want{
				result:  result{Allowed: true, Warnings: []string{"the Delete gate of Bucket orders-data was opened for a deletion above it that has not happened; deleting Bucket orders-data by itself orphans its cloud resource"}},
				buckets: byName(revoked(opened(data, byAlice))),
			},
		},
		"UnpermittedDeletionRevokesAnEarlierGate": {
			reason: "Alice's deletion opened the gates and was refused by another check; Bob, whom the deleting rules do not name, deletes the Claim: the gates are Alice's refused deletion's, so they are revoked and his deletion orphans.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), opened(data, byAlice), opened(logs, byAlice)}, req: remove(asBob, deletable)},
			want: want{result: result{Allowed: true}, buckets: byName(func() []*unstructured.Unstructured {
				var out []*unstructured.Unstructured
				for _, b := range []*unstructured.Unstructured{opened(data, byAlice), opened(logs, byAlice)} {
					out = append(out, revoked(b))
				}
				return out
			}()...)},
		},
		"UnpermittedRedeleteKeepsAFinalDeletionsGates": {
			reason: "Bob deleting the Claim again while Alice's deletion of it is final (it is being deleted) does not take her gates away.",
			args: args{objs: []client.Object{claims, deletesCloud, composite(), opened(data, byAlice), opened(logs, byAlice)},
				req: remove(asBob, claim(t, annotate(v1alpha1.AnnotationAllowDelete, "true"), set("metadata.deletionTimestamp", "2026-11-22T12:00:00Z")))},
			want: want{result: result{Allowed: true}, buckets: byName(opened(data, byAlice), opened(logs, byAlice))},
		},
		"BucketDeletedWithItsComposite": {
			reason: "The garbage collector deleting a Bucket whose composite is being deleted carries out the deletion the gate was opened for: the gate stays open.",
			args: args{objs: []client.Object{claims, deletesCloud, composite(set("metadata.deletionTimestamp", "2026-11-22T12:00:00Z"), set("metadata.finalizers", []any{"composite.apiextensions.crossplane.io"})), claim(t), opened(data, byAlice)},
				req: remove(asBob, opened(data, byAlice))},
			want: want{result: result{Allowed: true}, buckets: byName(opened(data, byAlice))},
		},
		"DroppedByUpgradeDeletedByCrossplane": {
			reason: "New logic dropped the Bucket and an UpgradeAllowance granted its deletion: the function opened its Delete gate for Crossplane's deletion, which keeps it although the XR and the Claim stand.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), claim(t), opened(data, byUpgrade)}, req: remove(asCrossplane, opened(data, byUpgrade))},
			want:   want{result: result{Allowed: true}, buckets: byName(opened(data, byUpgrade))},
		},
		"DroppedByUpgradeDeletedByBob": {
			reason: "That gate is for Crossplane's deletion alone: Bob deleting the Bucket by itself revokes it first, and the cloud bucket is orphaned.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), claim(t), opened(data, byUpgrade)}, req: remove(asBob, opened(data, byUpgrade))},
			want: want{
				result:  result{Allowed: true, Warnings: []string{"the Delete gate of Bucket orders-data was opened for a deletion above it that has not happened; deleting Bucket orders-data by itself orphans its cloud resource"}},
				buckets: byName(revoked(opened(data, byUpgrade))),
			},
		},
		"WildcardGateRevokedByBucketDeletion": {
			reason: "Alice deletes a Bucket whose gate is open for her change under a rule granting the External verbs \"*\": that gate includes Delete but was opened for a change, not this deletion, so it is revoked first and the cloud bucket is orphaned.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), claim(t), wildcard(data, byAlice)}, req: remove(asAlice, wildcard(data, byAlice))},
			want: want{
				result:  result{Allowed: true, Warnings: []string{"the gate of Bucket orders-data was open for a change that includes Delete; a deletion closes it, so deleting Bucket orders-data does not delete its cloud resource unless a deleting rule permits it"}},
				buckets: byName(revoked(wildcard(data, byAlice))),
			},
		},
		"WildcardGateRevokedByClaimDeletion": {
			reason: "Alice deletes the Claim (allow-delete set) while a \"*\" gate is open on a Bucket, and the deleting rules do not allow the external Delete: the gate is revoked, so the garbage collector's deletion of the Bucket orphans it.",
			args:   args{objs: []client.Object{claims, orphans, composite(), wildcard(data, byAlice), logs}, req: remove(asAlice, deletable)},
			want:   want{result: result{Allowed: true}, buckets: byName(revoked(wildcard(data, byAlice)), logs)},
		},
		"WildcardGateDryRun": {
			reason: "A dry run revokes nothing.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), claim(t), wildcard(data, byAlice)}, req: dryRun(remove(asAlice, wildcard(data, byAlice)))},
			want: want{
				result:  result{Allowed: true, Warnings: []string{"the gate of Bucket orders-data was open for a change that includes Delete; a deletion closes it, so deleting Bucket orders-data does not delete its cloud resource unless a deleting rule permits it"}},
				buckets: byName(wildcard(data, byAlice)),
			},
		},
		"UngatedBucketOfRestrictedKindGatedClosed": {
			reason: "Bob deletes a Bucket created before a policy restricted its kind and never written since (ungated, managementPolicies [\"*\"]): its gate is closed and it is labelled gated before the deletion goes on, so the cloud bucket is orphaned.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), bucket(t, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*"))}, req: remove(asBob, bucket(t, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*")))},
			want: want{
				result:  result{Allowed: true, Warnings: []string{"Bucket orders-cache is of a kind AllowancePolicies restrict and was not gated: its gate was closed first, so deleting it orphans its cloud resource"}},
				buckets: byName(bucket(t, name("orders-cache"), policies(gate.Observe, gate.LateInitialize))),
			},
		},
		"UngatedBucketInAuditNamespace": {
			reason: "In a Namespace in Audit mode Kausality closes no gate: the ungated Bucket is deleted as it would be without Kausality.",
			args: args{objs: []client.Object{claims, deletesCloud, composite(), namespace(v1alpha1.AnnotationMode, "Audit"), bucket(t, inTeamA, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*"))},
				req: remove(asBob, bucket(t, inTeamA, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*")))},
			want: want{result: result{Allowed: true}, buckets: byName(bucket(t, inTeamA, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*")))},
		},
		"UngatedBucketOfUnrestrictedKind": {
			reason: "Without a policy restricting its kind, deleting an ungated Bucket is not Kausality's business.",
			args:   args{objs: []client.Object{bucket(t, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*"))}, req: remove(asBob, bucket(t, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*")))},
			want:   want{result: result{Allowed: true}, buckets: byName(bucket(t, name("orders-cache"), unlabel(v1alpha1.LabelGated), policies("*")))},
		},
		"BucketWithoutDeleteGate": {
			reason: "Deleting a Bucket without an open Delete gate is not this webhook's concern: it is orphaned by its closed gate.",
			args:   args{objs: []client.Object{claims, deletesCloud, composite(), claim(t), data}, req: remove(asBob, data)},
			want:   want{result: result{Allowed: true}, buckets: byName(data)},
		},
		"ParentDeletionOpensNestedGates": {
			reason: "Alice deletes the XPlatform; its deleting rules let her delete the XDatabase it composed, whose own deleting rules let her delete the cloud buckets: the garbage collector deletes the XDatabase next, so its Buckets' Delete gates open now, traced to her deletion of the XPlatform.",
			args:   args{objs: []client.Object{platforms("\"*\""), protectedCloud, platform, nested(), data, logs, ungated, other}, req: remove(asAlice, platform)},
			want: want{
				result:  result{Allowed: true, Warnings: []string{"deleting XPlatform platform deletes these cloud resources, as its policies allow: Bucket orders-data, Bucket orders-logs"}},
				buckets: byName(opened(data, byAliceOnPlatform), opened(logs, byAliceOnPlatform), ungated, other),
			},
		},
		"ParentDeletionWithoutChildRule": {
			reason: "The XPlatform's deleting rules do not let the user delete the XDatabase: nothing below opens, whatever the XDatabase's own rules say.",
			args:   args{objs: []client.Object{platforms("Update"), protectedCloud, platform, nested(), data, logs, ungated, other}, req: remove(asAlice, platform)},
			want:   want{result: result{Allowed: true}, buckets: untouched},
		},
		"NestedDeletedByTheGarbageCollector": {
			reason: "The garbage collector deleting the XDatabase (its XPlatform is gone) carries out that deletion: deletion protection does not stop it, and it opens and revokes nothing.",
			args:   args{objs: []client.Object{protectedCloud, nested(), opened(data, byAliceOnPlatform), logs, ungated, other}, req: remove(gc, nested())},
			want:   want{result: result{Allowed: true}, buckets: byName(opened(data, byAliceOnPlatform), logs, ungated, other)},
		},
		"NestedDeletedByAliceProtected": {
			reason: "Alice deleting a composed XDatabase by hand is protected like any other.",
			args:   args{objs: []client.Object{protectedCloud, nested(), data, logs, ungated, other}, req: remove(asAlice, nested())},
			want: want{
				result:  result{Code: http.StatusForbidden, Message: `XDatabase orders-x1 is protected from deletion by AllowancePolicy xdatabases; set the annotation kausality.io/allow-delete: "true" on it to delete it`},
				buckets: untouched,
			},
		},
		"NotADeletion": {
			reason: "Other operations are not this webhook's business.",
			args:   args{objs: append([]client.Object{claims, deletesCloud}, all...), req: update(asAlice, claim(t), claim(t, set("spec.size", "large")))},
			want:   want{result: result{Allowed: true}, buckets: untouched},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			k := kube(t, tc.args.objs...)
			h := &Deletion{Policies: k, Cache: kpolicy.NewCache(), Reader: k, Kube: k, Trusted: trusted,
				Managed: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{bucketGVK} }, Now: now}
			if tc.args.undiscovered {
				h.Managed = func() []schema.GroupVersionKind { return nil }
				h.Discovered = func() bool { return false }
			}
			got := want{result: outcome(t, tc.args.req, h.Handle(context.Background(), tc.args.req)), buckets: storedBuckets(t, k)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
