package admission

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	kpolicy "github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

func TestManaged(t *testing.T) {
	type args struct {
		// objs are what the API server holds: the composite, its Claim,
		// policies and UpgradeAllowances (without policies, the scenario
		// suite's for XDatabases and their Claims, unless bare).
		objs []client.Object
		bare bool
		req  admission.Request
	}
	var (
		closed   = []string{gate.Observe, gate.LateInitialize}
		openedU  = []string{gate.Observe, gate.Update, gate.LateInitialize}
		frozenBy = `{"user":"carol@example.com","message":"incident 42","at":"2026-11-22T11:00:00Z"}`
	)
	// The XR carries Crossplane's propagation of Alice's resize (generation
	// 4, not yet observed), the Claim is reconciled.
	parentXR := func(mods ...mod) *unstructured.Unstructured {
		return xr(t, append([]mod{generation(4), synced("True", 3), set("spec.size", "large"), allowances(xrAllowances()...), trace(claimHop(), xrHop())}, mods...)...)
	}
	parentClaim := func(mods ...mod) *unstructured.Unstructured {
		return claim(t, append([]mod{generation(2), observed(2), set("spec.size", "large"), trace(claimHop())}, mods...)...)
	}
	ua := decode[v1alpha1.UpgradeAllowance](t, upgradeAllowance)
	// Controllers acting from their pods (pod-bound tokens) and the build
	// record a write by each gets.
	recorderPod, crossplanePod := pod("provider-recorder-5d8b", "xpkg.example.org/provider-recorder:v1"), pod("crossplane-7f9c", "xpkg.crossplane.io/crossplane/crossplane:v2.3.4")
	recorderBuild := logic.Controllers{asRecorder.Username: logic.BuildHash([]string{recorderPod.Spec.Containers[0].Image})}.Format()
	crossplaneBuild := logic.Controllers{asCrossplane.Username: logic.BuildHash([]string{crossplanePod.Spec.Containers[0].Image})}.Format()
	buckets := allowancePolicy(t, fixture.BucketsPolicy)

	// The function's write carrying the resize to the Bucket: the new
	// allowance and trace, the size, and the gate as the writer sends it.
	carry := func(mp []string, mods ...mod) *unstructured.Unstructured {
		return bucket(t, append([]mod{set("spec.forProvider.size", "large"), allowances(bucketAllowance()), trace(claimHop(), xrHop(), bucketHop()), policies(mp...)}, mods...)...)
	}
	// The Bucket once the resize is applied and observed at generation 6.
	applied := func(mods ...mod) *unstructured.Unstructured {
		return bucket(t, append([]mod{generation(6), synced("True", 6), set("spec.forProvider.size", "large"), trace(claimHop(), xrHop(), bucketHop())}, mods...)...)
	}
	// pendingFor is the resize's allowance held back by propagation
	// control for the value hashed h.
	pendingFor := func(h string) allowance.Allowance {
		a := bucketAllowance()
		a.Pending = map[string]string{"spec.forProvider.size": h}
		return a
	}
	// heldBy is a as a freeze holds it: it does not expire meanwhile.
	heldBy := func(a allowance.Allowance) allowance.Allowance {
		a.Held = true
		return a
	}
	withTrace := func(tr ...allowance.Hop) allowance.Allowance {
		a := bucketAllowance()
		a.Trace = tr
		return a
	}
	// A hand edit of the Bucket at the fixed time, by user.
	handHop := func(user string) allowance.Hop {
		return allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "orders-data", Generation: 6,
			Field: "spec.forProvider.size", User: user, Timestamp: ts(0)}
	}
	handEdit := "Bucket orders-data: change to spec.forProvider.size is not permitted: " + kpolicy.ReasonHandEdit
	kept := func(mp string) string {
		return "spec.managementPolicies of Bucket orders-data is kept at " + mp + " by Kausality: it opens only for unconsumed allowances"
	}
	upgradeHop := allowance.Hop{APIVersion: "kausality.io/v1alpha1", Kind: "UpgradeAllowance", Name: "xdatabases-buckets-2", Generation: 1}
	upgraded := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbUpdate, 6, allowance.Trace{upgradeHop, xrHop(), bucketHop()}).Shipping(sizeShipped)
	// A Function upgrade: function-patch-and-transform's v0.10 patch
	// releases, and the Bucket's write moving its record to one.
	ptUA := decode[v1alpha1.UpgradeAllowance](t, strings.Replace(strings.Replace(upgradeAllowance, "name: xdatabases-buckets-2,", "name: pt-0-10,", 1),
		"compositionRevisions: [xdatabases-buckets-2]", `functions: [{name: function-patch-and-transform, version: "v0.10.*"}]`, 1))
	ptHop := allowance.Hop{APIVersion: "kausality.io/v1alpha1", Kind: "UpgradeAllowance", Name: "pt-0-10", Generation: 1}
	ptUpgraded := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbUpdate, 6, allowance.Trace{ptHop, xrHop(), bucketHop()}).Shipping(sizeShipped)
	builtBy := func(version string) mod {
		return annotate(v1alpha1.AnnotationFunctionVersions, `{"function-patch-and-transform":"xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:`+version+`"}`)
	}
	initHop := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 1, User: crossplane, Timestamp: ts(-time.Minute)}
	createHop := allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "orders-data", Generation: 1, Timestamp: ts(-time.Minute)}
	creation := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbCreate, 1, allowance.Trace{initHop, createHop})
	deleting := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbDelete, 7,
		allowance.Trace{allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 2, User: alice, Timestamp: ts(0)},
			allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "orders-data", Generation: 7, Timestamp: ts(0)}})
	// Bob's Bucket adopting the cloud bucket orders-data, created by hand.
	adopter := func(mods ...mod) *unstructured.Unstructured {
		return bucket(t, append([]mod{name("bobs"), unlabel(v1alpha1.LabelGated), unset("metadata.ownerReferences"), unset("metadata.generation"), unset("status"),
			unannotate(v1alpha1.AnnotationCompositionRevision), annotate("crossplane.io/external-name", "orders-data")}, mods...)...)
	}
	adopterHop := allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "bobs", Generation: 1, User: bob, Timestamp: ts(0)}
	gatedWarning := "Bucket bobs is gated: AllowancePolicies restrict its kind, so it reaches the cloud only as far as allowances open its gate; compose it with function-kausality"
	newBucket := func(mods ...mod) *unstructured.Unstructured {
		return bucket(t, append([]mod{unset("metadata.generation"), unset("status"), allowances(creation), trace(initHop, createHop), policies(closed...)}, mods...)...)
	}

	// Controller builds: Crossplane and the Buckets' provider, each in a
	// pod that runs the new version, and the record of the old ones.
	const (
		xpOld, xpNew   = "xpkg.crossplane.io/crossplane/crossplane:v2.1.0", "xpkg.crossplane.io/crossplane/crossplane:v2.1.1"
		recOld, recNew = "xpkg.example.com/provider-recorder:v0.1.0", "xpkg.example.com/provider-recorder:v0.2.0"
	)
	recorder := asRecorder.Username
	xpPod, recPod := pod("crossplane-7f9c", xpNew), pod("provider-recorder-5d2a", recNew)
	asNewCrossplane, asNewRecorder := fromPod(asCrossplane, xpPod.Name), fromPod(asRecorder, recPod.Name)
	builds := func(kv ...string) mod {
		c := logic.Controllers{}
		for i := 0; i+1 < len(kv); i += 2 {
			c[kv[i]] = logic.BuildHash([]string{kv[i+1]})
		}
		return annotate(v1alpha1.AnnotationControllerBuilds, c.Format())
	}
	xpUA := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: crossplane-2-1, generation: 2}
spec:
  serviceAccount: `+crossplane+`
  policies:
  - target: {apiGroup: recorder.kausality.io, resource: buckets}
    verbs: [Update]
    mutations: [{jsonPath: spec.forProvider.size, verbs: [Mutate]}]
  - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
    relation: External
    verbs: [Update]`)
	recUA := decode[v1alpha1.UpgradeAllowance](t, `metadata: {name: recorder-0-2, generation: 1}
spec:
  serviceAccount: `+recorder+`
  policies:
  - target: {apiGroup: recorder.kausality.io, resource: buckets}
    verbs: [Update]
    mutations: [{jsonPath: spec.forProvider.region, verbs: [Insert]}]`)
	xpHop := allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "orders-data", Generation: 6,
		Field: "spec.forProvider.size", User: crossplane, Timestamp: ts(0)}
	xpTrace := allowance.Trace{{APIVersion: "kausality.io/v1alpha1", Kind: "UpgradeAllowance", Name: "crossplane-2-1", Generation: 2}, xpHop}
	xpUpgraded := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbUpdate, 6, xpTrace).Shipping(sizeShipped)
	newBuild := func(user, image, hashes, field string) string {
		return user + " runs a new build (" + image + "; controller " + user + " build " + hashes + ") and its write changes " + field +
			" of Bucket orders-data, which no allowance covers; an UpgradeAllowance with serviceAccount " + user + " whose policies cover that change lets the new build make it"
	}
	xpHashes := logic.BuildHash([]string{xpOld}) + " → " + logic.BuildHash([]string{xpNew})
	recHashes := logic.BuildHash([]string{recOld}) + " → " + logic.BuildHash([]string{recNew})

	cases := map[string]struct {
		reason string
		args   args
		want   result
		// warningsContain, when set, is checked instead of want's warnings.
		warningsContain string
		// approved, when set, is the approval the write must record.
		approved *gate.Approval
	}{
		"ChainedAllowanceOpensGate": {
			reason: "Crossplane stamps an allowance that chains to an unconsumed XR allowance: its gate opens in the same write.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(closed))},
			want:     result{Allowed: true, Object: carry(openedU).Object},
			approved: approvalAt(carry(closed), 6),
		},
		"ChainToAnUnguardedCompositeKind": {
			reason: "With no policy for the composite's kind, no webhook guards its allowances annotation: an allowance chaining to one is refused.",
			args: args{objs: []client.Object{parentXR(), parentClaim()}, bare: true,
				req: update(asCrossplane, bucket(t), carry(closed))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data does not chain to an unconsumed allowance of XDatabase orders-x1"},
		},
		// The Namespace's Log mode let a region change into the Bucket at
		// generation 5 (approved: generation 4, region eu): Alice's resize
		// must not ship it.
		"PendingChangeDoesNotRideAlong": {
			reason: "A spec difference since the last approved generation that no allowance covers keeps the Update gate closed, says so, and approves nothing.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, set("spec.forProvider.region", "us"), approvedAs(bucket(t, set("spec.forProvider.region", "eu")), 4)),
					carry(closed, set("spec.forProvider.region", "us"), approvedAs(bucket(t, set("spec.forProvider.region", "eu")), 4)))},
			want:            result{Allowed: true, Object: carry(closed, set("spec.forProvider.region", "us")).Object},
			warningsContain: "the gate of Bucket orders-data stays closed: spec.forProvider.region changed since generation 4 was let through to the cloud and no open allowance covers it",
			approved:        approvalAt(bucket(t, set("spec.forProvider.region", "eu")), 4),
		},
		"ApprovalPinnedOnFirstWrite": {
			reason: "A resource gated before the approval record existed gets it on its next write, pinned to the stored spec: otherwise what counts as approved would move with every write, a Log-mode change included.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t), bucket(t, annotate(v1alpha1.AnnotationTraceLabelPrefix+"team", "a")))},
			want:     result{Allowed: true, Object: bucket(t, annotate(v1alpha1.AnnotationTraceLabelPrefix+"team", "a")).Object},
			approved: approvalAt(bucket(t), 5),
		},
		"StaleCopyGetsAConflict": {
			reason: "A write from a copy older than the stored object gets the Conflict the API server would give it, which the writer retries; not a denial for its older protected annotations, and nothing unchecked.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t, set("metadata.resourceVersion", "8"), approvedAs(bucket(t), 6)), bucket(t, set("metadata.resourceVersion", "7"), annotate(v1alpha1.AnnotationTraceLabelPrefix+"poke", "1")))},
			want: result{Code: http.StatusConflict, Message: "Bucket orders-data has been modified since resource version 7; read it again and retry"},
		},
		"StepCannotNameAFieldItChanged": {
			reason: "A pipeline step after Kausality changes the region and names it among the fields the allowance ships: the composite's allowance lets only the size through, so Crossplane's write is denied.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(closed, set("spec.forProvider.region", "us"), allowances(func() allowance.Allowance {
					a := bucketAllowance()
					a.Mutations = append(a.Mutations, v1alpha1.MutationBound{JSONPath: "spec.forProvider.region", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert}})
					return a
				}())))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data ships spec.forProvider.region, which no allowance of XDatabase orders-x1 it chains to lets through"},
		},
		"CrossplaneCannotBlessAPendingChange": {
			reason: "The approval is the decision's: a writer (a pipeline step after Kausality) sending one that blesses the pending region changes nothing.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, set("spec.forProvider.region", "us"), approvedAs(bucket(t, set("spec.forProvider.region", "eu")), 4)),
					carry(closed, set("spec.forProvider.region", "us"), approvedAs(carry(closed, set("spec.forProvider.region", "us")), 6)))},
			want:            result{Allowed: true, Object: carry(closed, set("spec.forProvider.region", "us")).Object},
			warningsContain: "spec.forProvider.region changed since generation 4",
			approved:        approvalAt(bucket(t, set("spec.forProvider.region", "eu")), 4),
		},
		"CrossplaneCannotForgeWhatCameBefore": {
			reason: "What the approval goes back to when a change expires is the decision's too: a writer sending a record of its own has it dropped, whatever it says.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, set("spec.forProvider.region", "us"), approvedAs(bucket(t, set("spec.forProvider.region", "eu")), 4)),
					carry(closed, set("spec.forProvider.region", "us"), approvedAs(bucket(t, set("spec.forProvider.region", "eu")), 4),
						annotate(v1alpha1.AnnotationApprovedBefore, `{"spec.forProvider.region":"0123456789ab"}`)))},
			want:            result{Allowed: true, Object: carry(closed, set("spec.forProvider.region", "us")).Object},
			warningsContain: "spec.forProvider.region changed since generation 4",
			approved:        &gate.Approval{Spec: approvalAt(bucket(t, set("spec.forProvider.region", "eu")), 4).Spec, Generation: 4, Before: mutation.Applied{}},
		},
		"ConsumedParentDenied": {
			reason: "An allowance whose XR allowance is of a generation the XR has observed a later one than does not chain: Crossplane's write is denied.",
			args: args{objs: []client.Object{parentXR(generation(5), synced("True", 5)), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data does not chain to an unconsumed allowance of XDatabase orders-x1"},
		},
		"ResourceRefsRecordedChains": {
			reason: "Composing from the XR's allowance, Crossplane records the XR's resource references (a later generation) before it writes the Bucket: the allowance still chains until the XR observes a later generation.",
			args: args{objs: []client.Object{parentXR(generation(5), synced("True", 4)), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU))},
			want: result{Allowed: true, Object: carry(openedU).Object},
		},
		"ParentAllowanceComposedDenied": {
			reason: "An XR allowance the function already composed this Bucket from (its composed generation) is used up for it: a second allowance from it does not chain.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, annotate(v1alpha1.AnnotationComposedGeneration, "4")), carry(openedU))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data does not chain to an unconsumed allowance of XDatabase orders-x1"},
		},
		"ParentObservedButNotComposedChains": {
			reason: "Crossplane may mark the XR observed at the generation a concurrent Claim sync raised before composing it: the allowance of that generation still chains while the Bucket was composed from an earlier one.",
			args: args{objs: []client.Object{parentXR(synced("True", 4)), parentClaim()},
				req: update(asCrossplane, bucket(t, annotate(v1alpha1.AnnotationComposedGeneration, "3")), carry(openedU))},
			want: result{Allowed: true, Object: carry(openedU).Object},
		},
		"WiderThanParentDenied": {
			reason: "A buggy step stamps an allowance for every verb that chains to the XR's Update allowance: it grants more than its parent and is denied.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU, allowances(func() allowance.Allowance { a := bucketAllowance(); a.Verbs = []string{"*"}; return a }())))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data grants more than the allowance of XDatabase orders-x1 it chains to (relation, target or verbs)"},
		},
		"OtherTargetDenied": {
			reason: "An allowance chaining to the XR's allowance for Buckets may not name another external kind.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU, allowances(func() allowance.Allowance {
					a := bucketAllowance()
					a.Target = v1alpha1.Target{External: map[string]string{"apiGroup": "recorder.kausality.io", "kind": "Database"}}
					return a
				}())))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data grants more than the allowance of XDatabase orders-x1 it chains to (relation, target or verbs)"},
		},
		"FarGenerationDenied": {
			reason: "An allowance for a generation the write cannot give the resource would never be consumed: denied.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU, allowances(func() allowance.Allowance { a := bucketAllowance(); a.Generation = 1000000000; return a }())))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data cannot be stamped: its generation 1000000000 is not one the object's next write (6) or an earlier one gives it"},
		},
		"FutureTimestampDenied": {
			reason: "An allowance stamped in the future would never expire: denied.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU, allowances(withTrace(claimHop(), xrHop(), at(bucketHop(), 24*time.Hour)))))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data cannot be stamped: it is stamped 2026-11-23T12:00:00Z, in the future"},
		},
		"ParentWithoutAllowanceDenied": {
			reason: "An XR that carries no allowance covers nothing.",
			args: args{objs: []client.Object{parentXR(unannotate(v1alpha1.AnnotationAllowances)), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data does not chain to an unconsumed allowance of XDatabase orders-x1"},
		},
		"OtherParentDenied": {
			reason: "An allowance whose trace names another composite than the controlling one is denied.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU, allowances(withTrace(claimHop(), func() allowance.Hop { h := xrHop(); h.Name = "orders-x2"; return h }(), bucketHop()))))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data: its trace names XDatabase orders-x2 as parent, not the controlling XDatabase orders-x1"},
		},
		"NoParentHopDenied": {
			reason: "An allowance Crossplane stamps must name where it comes from.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU, allowances(withTrace(bucketHop()))))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data has no parent hop in its trace"},
		},
		"NoControllingCompositeDenied": {
			reason: "A resource without a controlling composite has nothing to chain to.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, unset("metadata.ownerReferences")), carry(openedU, unset("metadata.ownerReferences")))},
			want: result{Code: http.StatusForbidden, Message: "allowance 0 on Bucket orders-data: the resource has no controlling composite to chain to"},
		},
		"StaleWriteCannotReopen": {
			reason: "A stale pipeline run re-sends an allowance the provider marked consumed, with the gate open: the stored observed generation consumes it again and the gate stays closed.",
			args: args{objs: []client.Object{parentXR(synced("True", 4)), parentClaim()},
				req: update(asCrossplane, applied(allowances(consumed(bucketAllowance())), policies(closed...)),
					applied(allowances(bucketAllowance()), policies(openedU...)))},
			want: result{Allowed: true, Object: applied(allowances(consumed(bucketAllowance())), policies(closed...)).Object},
		},
		"StaleWriteCannotReopenAfterFailedReconcile": {
			reason: "A consumed allowance is never reopened, even when the stored Synced condition is False.",
			args: args{objs: []client.Object{parentXR(synced("True", 4)), parentClaim()},
				req: update(asCrossplane, applied(synced("False", 6), allowances(consumed(bucketAllowance())), policies(closed...)),
					applied(synced("False", 6), allowances(bucketAllowance()), policies(openedU...)))},
			want: result{Allowed: true, Object: applied(synced("False", 6), allowances(consumed(bucketAllowance())), policies(closed...)).Object},
		},
		"StaleWriteCannotReopenDuringFreeze": {
			reason: "A stale write during a freeze must not turn a consumed allowance into a held one.",
			args: args{objs: []client.Object{parentXR(synced("True", 4), annotate(v1alpha1.AnnotationFreeze, frozenBy)), parentClaim()},
				req: update(asCrossplane, applied(allowances(consumed(bucketAllowance())), policies(closed...)),
					applied(allowances(bucketAllowance()), policies(openedU...)))},
			want: result{Allowed: true, Object: applied(allowances(consumed(bucketAllowance())), policies(closed...)).Object},
		},
		"StaleWriteKeepsDeleteGate": {
			reason: "The deletion stamped a Delete allowance and opened the gate; Crossplane's write composed from an older copy drops it: the allowance and the open gate are kept.",
			args: args{objs: []client.Object{parentXR(synced("True", 4)), parentClaim()},
				req: update(asCrossplane, applied(allowances(deleting), policies(gate.Observe, gate.Delete)),
					applied(policies(closed...)))},
			want: result{Allowed: true, Object: applied(allowances(deleting), policies(gate.Observe, gate.Delete)).Object},
		},
		"ForgedStatusConsumesNothing": {
			reason: "Consumption is read off the stored object: a write whose status claims the generation was observed does not close the gate.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(closed, synced("True", 6)))},
			want: result{Allowed: true, Object: carry(openedU, synced("True", 6)).Object},
		},
		"ClosedGateReadOffWrite": {
			reason: "The closed gate is the one the writer keeps the resource on: [Observe] stays [Observe], never [Observe, LateInitialize].",
			args: args{objs: []client.Object{parentXR(), parentClaim(), crossplanePod},
				req: update(fromPod(asCrossplane, crossplanePod.Name), bucket(t, policies(gate.Observe)), bucket(t, policies(gate.Observe), set("spec.forProvider.tags[1]", "team-a")))},
			want: result{Allowed: true, Object: bucket(t, policies(gate.Observe), set("spec.forProvider.tags[1]", "team-a"), annotate(v1alpha1.AnnotationControllerBuilds, crossplaneBuild)).Object},
		},
		"UnboundCrossplaneChangeDenied": {
			reason: "Crossplane writing with a token bound to no pod names no build: its change no allowance ships counts as a new build's and needs an UpgradeAllowance.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, policies(gate.Observe)), bucket(t, policies(gate.Observe), set("spec.forProvider.tags[1]", "team-a")))},
			want: result{Code: http.StatusForbidden, Message: "system:serviceaccount:crossplane-system:crossplane runs a new build (a token bound to no pod; controller system:serviceaccount:crossplane-system:crossplane build  → unbound) and its write changes spec.forProvider.tags[1] of Bucket orders-data, which no allowance covers; an UpgradeAllowance with serviceAccount system:serviceaccount:crossplane-system:crossplane whose policies cover that change lets the new build make it"},
		},
		"UnboundProviderLateInitDenied": {
			reason: "A provider's late initialization with a token bound to no pod is an unknown build's change.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asRecorder, bucket(t), bucket(t, set("spec.forProvider.region", "eu")))},
			want: result{Code: http.StatusForbidden, Message: "system:serviceaccount:crossplane-system:provider-recorder runs a new build (a token bound to no pod; controller system:serviceaccount:crossplane-system:provider-recorder build  → unbound) and its write changes spec.forProvider.region of Bucket orders-data, which no allowance covers; an UpgradeAllowance with serviceAccount system:serviceaccount:crossplane-system:provider-recorder whose policies cover that change lets the new build make it"},
		},
		"ClosedGateObserveOpens": {
			reason: "With [Observe] as the closed gate, an Update allowance opens [Observe, Update], not [Observe, Update, LateInitialize].",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, policies(gate.Observe)), carry([]string{gate.Observe}))},
			want: result{Allowed: true, Object: carry([]string{gate.Observe, gate.Update}).Object},
		},
		"BobHandEditDenied": {
			reason: "Bob's hand edit of a gated Bucket, which no policy permits, is denied: left in the spec it would reach the cloud with the next change that opens the gate.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t), bucket(t, set("spec.forProvider.size", "huge"), policies("*")))},
			want: result{Code: http.StatusForbidden, Message: handEdit, Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: handEdit}},
		},
		"BobRetargetsExternalNameDenied": {
			reason: "Bob pointing a gated Bucket at a victim's cloud resource (crossplane.io/external-name) is denied: the next gate that opens would act on it.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t, annotate("crossplane.io/external-name", "orders-data")), bucket(t, annotate("crossplane.io/external-name", "payments-data")))},
			want: result{Code: http.StatusForbidden, Message: `annotation crossplane.io/external-name (from "orders-data" to "payments-data") of Bucket orders-data: user "bob@example.com" may not change what a gated managed resource acts on or answers to; only its provider changes crossplane.io/external-name and only Crossplane its composition resource name and controller reference; to act on another cloud resource, create a managed resource for it`},
		},
		"BobRepointsControllerDenied": {
			reason: "Bob pointing a gated Bucket's controller reference away from its (frozen) composite is denied: the freeze, the allowances and the deletion above are read through it.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t), bucket(t, set("metadata.ownerReferences[0].name", "scratch-x1"), set("metadata.ownerReferences[0].uid", "00000000-0000-4000-8000-0000000000b1")))},
			want: result{Code: http.StatusForbidden, Message: `controller reference (from XDatabase orders-x1 to XDatabase scratch-x1) of Bucket orders-data: user "bob@example.com" may not change what a gated managed resource acts on or answers to; only its provider changes crossplane.io/external-name and only Crossplane its composition resource name and controller reference; to act on another cloud resource, create a managed resource for it`},
		},
		"ProviderRecordsExternalName": {
			reason: "The provider recording the name the cloud assigned is its bookkeeping.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asRecorder, bucket(t), bucket(t, annotate("crossplane.io/external-name", "orders-data-7f3a")))},
			want: result{Allowed: true, Object: bucket(t, annotate("crossplane.io/external-name", "orders-data-7f3a")).Object},
		},
		"ProviderLateInitializes": {
			reason: "The provider filling an unset spec field is its late initialization: admitted, no hand edit, the trace stays; its build is recorded.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), recorderPod},
				req: update(fromPod(asRecorder, recorderPod.Name), bucket(t, trace(claimHop(), xrHop(), bucketHop())), bucket(t, trace(claimHop(), xrHop(), bucketHop()), set("spec.forProvider.region", "eu")))},
			want: result{Allowed: true, Object: bucket(t, trace(claimHop(), xrHop(), bucketHop()), set("spec.forProvider.region", "eu"), annotate(v1alpha1.AnnotationControllerBuilds, recorderBuild)).Object},
			// The region it copied from the cloud ships nothing new.
			approved: approvalAt(bucket(t, set("spec.forProvider.region", "eu")), 5),
		},
		"ProviderWritingBackKeepsTheFreeze": {
			reason: "A provider's older copy of the annotations written back after a conflict would lift a freeze set meanwhile: the stored freeze stays.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asRecorder, bucket(t, annotate(v1alpha1.AnnotationFreeze, frozenBy)), bucket(t, annotate("crossplane.io/external-create-succeeded", "2026-11-22T11:00:00Z")))},
			want: result{Allowed: true, Object: bucket(t, annotate(v1alpha1.AnnotationFreeze, frozenBy), annotate("crossplane.io/external-create-succeeded", "2026-11-22T11:00:00Z")).Object},
		},
		"FreezeLiftedByCompositesInitiator": {
			reason: "A freeze on a Bucket holds its XDatabase's changes: Alice, whom the XDatabases' policy lets initiate them, may lift one Carol set, though no policy is for Buckets.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asAlice, bucket(t, annotate(v1alpha1.AnnotationFreeze, frozenBy)), bucket(t))},
			want: result{Allowed: true, Object: bucket(t).Object},
		},
		"FreezeLiftedByBobDenied": {
			reason: "Bob, whom no policy lets initiate changes of the Bucket or of its composite, may not lift Carol's freeze.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t, annotate(v1alpha1.AnnotationFreeze, frozenBy)), bucket(t))},
			want: result{Code: http.StatusForbidden, Message: "annotation kausality.io/freeze of Bucket orders-data was set by carol@example.com: only that user, or a subject an AllowancePolicy for Bucket or for its composite's kind lets initiate changes, may lift or replace it"},
		},
		"ProviderChangingSpecIsAHandEdit": {
			reason: "A provider changing a set field is checked like a hand edit.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asRecorder, bucket(t), bucket(t, set("spec.forProvider.size", "huge")))},
			want: result{Code: http.StatusForbidden, Message: handEdit, Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: handEdit}},
		},
		"BobOpensGateOnly": {
			reason: "A write of managementPolicies alone is no spec change, so no trace; only its read-only part is kept (here [Observe]), nothing opens, and Bob is warned.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t), bucket(t, policies(gate.Observe, gate.Create, gate.Update, gate.Delete)))},
			want: result{Allowed: true, Warnings: []string{kept("[Observe]")}, Object: bucket(t, policies(gate.Observe)).Object},
		},
		"AliceHandEditUnderPolicy": {
			reason: "A policy for the managed kind lets Alice initiate: her edit earns an External allowance traced to her, and the gate opens for it.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), buckets},
				req: update(asAlice, bucket(t), bucket(t, set("spec.forProvider.size", "huge")))},
			want: result{Allowed: true, Warnings: []string{kept("[Observe Update LateInitialize]")},
				Object: bucket(t, set("spec.forProvider.size", "huge"), trace(handHop(alice)), policies(openedU...),
					allowances(allowance.Allowance{Relation: v1alpha1.RelationExternal,
						Target: v1alpha1.Target{External: map[string]string{"apiGroup": "recorder.kausality.io", "kind": "Bucket"}},
						Verbs:  []string{v1alpha1.VerbUpdate}, Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
						Generation: 6, Initiator: alice, Trace: allowance.Trace{handHop(alice)},
						// Pinned to her value: a stale pipeline run writing the old
						// size back while the gate is open is not shipped under it.
						Values: map[string]string{"spec.forProvider.size": mutation.Record("spec.forProvider.size", "huge", nil)["spec.forProvider.size"]}})).Object},
			approved: approvalAt(bucket(t, set("spec.forProvider.size", "huge")), 6),
		},
		"BobDeniedUnderPolicy": {
			reason: "Under a policy for the managed kind Bob's hand edit is denied in Enforce mode, naming field and policy.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), buckets},
				req: update(asBob, bucket(t), bucket(t, set("spec.forProvider.size", "huge")))},
			want: result{Code: http.StatusForbidden, Audit: map[string]string{admit.AuditMode: "Enforce",
				admit.AuditViolations: `Bucket orders-data: change to spec.forProvider.size is not permitted by AllowancePolicy buckets: user "bob@example.com" is not a subject with mayInitiate`},
				Message: `Bucket orders-data: change to spec.forProvider.size is not permitted by AllowancePolicy buckets: user "bob@example.com" is not a subject with mayInitiate`},
		},
		"BobCreatesRestrictedKindGated": {
			reason: "Bob creates a Bucket, a kind the XDatabase policy restricts, adopting a production bucket with managementPolicies [*]: it is gated closed, with an origin trace naming him.",
			args:   args{objs: []client.Object{allowancePolicy(t, xdatabasesPolicy)}, req: create(asBob, adopter(policies("*")))},
			want: result{Allowed: true, Warnings: []string{gatedWarning, "spec.managementPolicies of Bucket bobs is kept at [Observe LateInitialize] by Kausality: it opens only for unconsumed allowances"},
				Object: adopter(policies(closed...), label(v1alpha1.LabelGated, "true"), trace(adopterHop)).Object},
		},
		"ExistingResourceGatedOnNextWrite": {
			reason: "A Bucket created before a policy restricted its kind is gated by its next write: Bob's managementPolicies [*] becomes the closed gate, and an origin trace names him.",
			args: args{objs: []client.Object{allowancePolicy(t, xdatabasesPolicy)},
				req: update(asBob, adopter(generation(3)), adopter(generation(3), policies("*")))},
			want: result{Allowed: true, Warnings: []string{
				"Bucket bobs is gated from now on: AllowancePolicies restrict its kind, so it reaches the cloud only as far as allowances open its gate",
				"spec.managementPolicies of Bucket bobs is kept at [Observe LateInitialize] by Kausality: it opens only for unconsumed allowances"},
				Object: adopter(generation(3), policies(closed...), label(v1alpha1.LabelGated, "true"), trace(at(allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "bobs", Generation: 3, User: bob}, 0))).Object},
			// Nothing was ever let through that Kausality knows of: the
			// stored spec counts as approved.
			approved: approvalAt(adopter(), 3),
		},
		"ExistingResourceOfBrokenPolicyKindPasses": {
			reason: "Only policies that compile gate an existing resource: a broken one must not gate every managed resource of every kind.",
			args: args{objs: []client.Object{allowancePolicy(t, xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) {
				p.Spec.Rules[0].Conditions = []string{"object.("}
			})}, req: update(asBob, adopter(generation(3)), adopter(generation(3), policies("*")))},
			want: result{Allowed: true, Object: adopter(generation(3), policies("*")).Object},
		},
		"BrokenPolicyGatesCreation": {
			reason: "A policy that does not compile might restrict any kind: creation is gated (fail closed), and the warning says why.",
			args: args{objs: []client.Object{allowancePolicy(t, xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) {
				p.Spec.Rules[0].Conditions = []string{"object.("}
			})}, req: create(asBob, adopter(policies("*")))},
			want:            result{Allowed: true, Object: adopter(policies(closed...), label(v1alpha1.LabelGated, "true"), trace(adopterHop)).Object},
			warningsContain: "an AllowancePolicy that does not compile might restrict its kind",
		},
		"BobSetsAnUnknownCrossplaneKey": {
			reason: "A key in Crossplane's domain nobody has shown harmless is not Bob's to add to a gated Bucket, even in a metadata-only write.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t), bucket(t, annotate("crossplane.io/widget", "on")))},
			want: result{Code: http.StatusForbidden,
				Audit:   map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: "Bucket orders-data: change to metadata.annotations[crossplane.io/widget] is not permitted: " + kpolicy.ReasonHandEdit},
				Message: "Bucket orders-data: change to metadata.annotations[crossplane.io/widget] is not permitted: " + kpolicy.ReasonHandEdit},
		},
		"BobPausesAGatedBucket": {
			reason: "crossplane.io/paused only stops the provider: anyone may set it.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asBob, bucket(t), bucket(t, annotate("crossplane.io/paused", "true")))},
			want: result{Allowed: true, Object: bucket(t, annotate("crossplane.io/paused", "true")).Object},
		},
		"AuditedCreationUntouched": {
			reason: "The only policy restricting Buckets says Audit: creating one by hand is reported by nobody and gated by nothing, as on a cluster without Kausality.",
			args: args{objs: []client.Object{allowancePolicy(t, xdatabasesPolicy, func(p *v1alpha1.AllowancePolicy) { p.Spec.Mode = v1alpha1.ModeAudit })},
				req: create(asBob, adopter(policies("*")))},
			want: result{Allowed: true, Object: adopter(policies("*")).Object},
		},
		"AuditNamespaceLetsTheGateGo": {
			reason: "A namespaced Bucket's Namespace says Audit: Crossplane applying the pipeline (the function gates nothing in Audit) drops the gated label and the gate, and admission keeps neither.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), namespace(v1alpha1.AnnotationMode, "Audit")},
				req: update(asCrossplane, bucket(t, inTeamA), bucket(t, inTeamA, unlabel(v1alpha1.LabelGated), policies("*")))},
			want: result{Allowed: true, Object: bucket(t, inTeamA, unlabel(v1alpha1.LabelGated), policies("*")).Object},
		},
		"ClusterScopedBucketAnswersToNoNamespace": {
			reason: "A cluster-scoped Bucket names its Claim's Namespace in a label whoever may write it could set: the Namespace's Audit does not reach it, and the gate stays.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), namespace(v1alpha1.AnnotationMode, "Audit")},
				req: update(asCrossplane, bucket(t), bucket(t, unlabel(v1alpha1.LabelGated), policies("*")))},
			want: result{Allowed: true, Object: bucket(t).Object},
		},
		"LogNamespaceKeepsTheGate": {
			reason: "Log mode is no Audit: the gated label is restored and the gate stays closed.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), namespace(v1alpha1.AnnotationMode, "Log")},
				req: update(asCrossplane, bucket(t), bucket(t, unlabel(v1alpha1.LabelGated), policies("*")))},
			want: result{Allowed: true, Object: bucket(t).Object},
		},
		"CreateOfUnrestrictedKindUntouched": {
			reason: "Without a policy restricting Buckets, creating one by hand is no business of Kausality.",
			args:   args{objs: []client.Object{allowancePolicy(t, claimsPolicy)}, req: create(asBob, adopter(policies("*")))},
			want:   result{Allowed: true, Object: adopter(policies("*")).Object},
		},
		"CrossplaneDroppingGatedLabelKeepsGate": {
			reason: "Crossplane applying a pipeline without the kausality step drops the gated label and sets managementPolicies [*]: the label is restored and the gate stays closed.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), bucket(t, unlabel(v1alpha1.LabelGated), policies("*")))},
			want: result{Allowed: true, Object: bucket(t).Object},
		},
		"NotGated": {
			reason: "A managed resource without the gated label passes untouched, whatever the write.",
			args: args{objs: []client.Object{parentXR(), parentClaim()}, bare: true,
				req: update(asBob, bucket(t, unlabel(v1alpha1.LabelGated)), bucket(t, unlabel(v1alpha1.LabelGated), set("spec.forProvider.size", "huge"), policies("*")))},
			want: result{Allowed: true, Object: bucket(t, unlabel(v1alpha1.LabelGated), set("spec.forProvider.size", "huge"), policies("*")).Object},
		},
		"PendingValuesAreKept": {
			reason: "A write that changes the values a pending allowance was issued for (a buggy step making it cover its own change) gets the stored values back.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t, allowances(pendingFor("abc"))), bucket(t, allowances(pendingFor("forged"))))},
			want: result{Allowed: true, Object: bucket(t, allowances(pendingFor("abc")), policies(closed...)).Object},
		},
		"FreezeOnXR": {
			reason: "A freeze on the composite keeps the gate closed for a chained allowance; the allowance is kept for when the freeze lifts.",
			args: args{objs: []client.Object{parentXR(annotate(v1alpha1.AnnotationFreeze, frozenBy)), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU))},
			want: result{Allowed: true, Object: carry(closed, allowances(heldBy(bucketAllowance()))).Object},
		},
		"FreezeOnClaim": {
			reason: "A freeze on the composite's Claim keeps the gate closed too.",
			args: args{objs: []client.Object{parentXR(), parentClaim(annotate(v1alpha1.AnnotationFreeze, frozenBy))},
				req: update(asCrossplane, bucket(t), carry(openedU))},
			want: result{Allowed: true, Object: carry(closed, allowances(heldBy(bucketAllowance()))).Object},
		},
		"FreezeHoldsAllowancePastGeneration": {
			reason: "While frozen, an unconsumed allowance for a generation the provider may observe without applying is moved past the stored generation, so the freeze does not consume it.",
			args: args{objs: []client.Object{parentXR(annotate(v1alpha1.AnnotationFreeze, frozenBy)), parentClaim()},
				req: update(asCrossplane, carry(closed, generation(6), synced("True", 5)), carry(closed, generation(6), synced("True", 5)))},
			want: func() result {
				a := heldBy(bucketAllowance())
				a.Generation = 7
				return result{Allowed: true, Object: carry(closed, generation(6), synced("True", 5), allowances(a)).Object}
			}(),
		},
		"ExpiredAllowance": {
			reason: "An allowance stamped longer ago than the gate may stay open opens nothing.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), carry(openedU, allowances(withTrace(claimHop(), xrHop(), at(bucketHop(), -2*time.Hour)))))},
			want: result{Allowed: true, Object: carry(closed, allowances(withTrace(claimHop(), xrHop(), at(bucketHop(), -2*time.Hour)))).Object},
		},
		"UnsupportedCombinationFailsClosed": {
			reason: "Allowances for Update and Delete ask for a gate crossplane-runtime does not support: it stays closed and the writer is told why.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asProvider, bucket(t), bucket(t, allowances(bucketAllowance(),
					allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbDelete, 6, allowance.Trace{claimHop(), xrHop(), bucketHop()}))))},
			want: result{Allowed: true,
				Warnings: []string{"the gate of Bucket orders-data stays closed: cannot open gate for verbs [Update, Delete]: managementPolicies [Observe, Update, Delete, LateInitialize] is not a combination crossplane-runtime supports; the gate stays closed"},
				Object: bucket(t, allowances(bucketAllowance(),
					allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbDelete, 6, allowance.Trace{claimHop(), xrHop(), bucketHop()}))).Object},
		},
		"CreationOpensCreateGate": {
			reason: "Creating a resource with a Create allowance traced to its composite opens the Create gate in the creating write.",
			args:   args{objs: []client.Object{parentXR(), parentClaim()}, req: create(asCrossplane, newBucket())},
			want:   result{Allowed: true, Object: newBucket(policies(gate.Observe, gate.Create, gate.LateInitialize)).Object},
		},
		"UpgradeAllowanceChain": {
			reason: "An allowance starting at an UpgradeAllowance that names the resource's composition revision chains, and opens the gate.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), ua},
				req: update(asCrossplane, bucket(t), carry(closed, allowances(upgraded), annotate(v1alpha1.AnnotationCompositionRevision, "xdatabases-buckets-2")))},
			want: result{Allowed: true, Object: carry(openedU, allowances(upgraded), annotate(v1alpha1.AnnotationCompositionRevision, "xdatabases-buckets-2")).Object},
		},
		"UpgradeAllowanceOtherRevisionDenied": {
			reason: "An UpgradeAllowance that does not name the resource's composition revision covers nothing.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), ua},
				req: update(asCrossplane, bucket(t), carry(closed, allowances(upgraded), annotate(v1alpha1.AnnotationCompositionRevision, "xdatabases-buckets-3")))},
			want: result{Code: http.StatusForbidden, Message: `allowance 0 on Bucket orders-data starts at UpgradeAllowance xdatabases-buckets-2, which does not name the logic change recorded on it: composition revision "xdatabases-buckets-3"`},
		},
		"FunctionUpgradeChain": {
			reason: "An allowance starting at an UpgradeAllowance that names the new package version of the Function whose record the write moves chains.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), ptUA},
				req: update(asCrossplane, bucket(t, builtBy("v0.10.7")), carry(closed, allowances(ptUpgraded), builtBy("v0.10.8")))},
			want: result{Allowed: true, Object: carry(openedU, allowances(ptUpgraded), builtBy("v0.10.8")).Object},
		},
		"FunctionUpgradeOtherMinorDenied": {
			reason: "v0.10.* does not name v0.11.0: the allowance it roots covers nothing.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), ptUA},
				req: update(asCrossplane, bucket(t, builtBy("v0.10.7")), carry(closed, allowances(ptUpgraded), builtBy("v0.11.0")))},
			want: result{Code: http.StatusForbidden, Message: `allowance 0 on Bucket orders-data starts at UpgradeAllowance pt-0-10, which does not name the logic change recorded on it: composition revision "xdatabases-buckets-1", function versions {"function-patch-and-transform":"xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.11.0"}`},
		},
		"FunctionUpgradeWithoutAChangeDenied": {
			reason: "A write that records the same Function version made no upgrade: an UpgradeAllowance roots nothing then.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), ptUA},
				req: update(asCrossplane, bucket(t, builtBy("v0.10.8")), carry(closed, allowances(ptUpgraded), builtBy("v0.10.8")))},
			want: result{Code: http.StatusForbidden, Message: `allowance 0 on Bucket orders-data starts at UpgradeAllowance pt-0-10, which does not name the logic change recorded on it: composition revision "xdatabases-buckets-1", function versions {"function-patch-and-transform":"xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8"}`},
		},
		"MalformedAllowancesDenied": {
			reason: "An allowances annotation that does not parse is denied naming it.",
			args: args{objs: []client.Object{parentXR(), parentClaim()},
				req: update(asCrossplane, bucket(t), bucket(t, annotate(v1alpha1.AnnotationAllowances, "[")))},
			want: result{Code: http.StatusForbidden, Message: "cannot parse annotation kausality.io/allowances on Bucket orders-data: invalid JSON: unexpected EOF"},
		},
		"ControllerBuildRecorded": {
			reason: "A controller writing from a pod has its build recorded, per service account; a first record is no upgrade.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), xpPod},
				req: update(asNewCrossplane, bucket(t, builds(recorder, recOld)), carry(closed))},
			want: result{Allowed: true, Object: carry(openedU, builds(recorder, recOld, crossplane, xpNew)).Object},
		},
		"NewBuildCausedChange": {
			reason: "A new Crossplane build carrying a change an allowance ships follows the normal rules, and its build is recorded.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), xpPod},
				req: update(asNewCrossplane, bucket(t, builds(crossplane, xpOld)), carry(closed))},
			want: result{Allowed: true, Object: carry(openedU, builds(crossplane, xpNew)).Object},
		},
		"NewBuildUncausedChangeDenied": {
			reason: "A new Crossplane build changing a field no allowance ships is an upgrade: without an UpgradeAllowance for its service account it is denied, naming the build and the field.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), xpPod, ua},
				req: update(asNewCrossplane, bucket(t, builds(crossplane, xpOld)), bucket(t, builds(crossplane, xpOld), set("spec.forProvider.size", "large")))},
			want: result{Code: http.StatusForbidden, Message: newBuild(crossplane, xpNew, xpHashes, "spec.forProvider.size")},
		},
		"SameBuildUncausedChangeHeld": {
			reason: "The recorded build changing a field no allowance ships is no upgrade: admitted, and the gate holds it as before.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), xpPod},
				req: update(asNewCrossplane, bucket(t, builds(crossplane, xpNew)), bucket(t, builds(crossplane, xpNew), set("spec.forProvider.size", "large")))},
			want: result{Allowed: true, Object: bucket(t, builds(crossplane, xpNew), set("spec.forProvider.size", "large"), policies(closed...)).Object},
		},
		"NewBuildUnderUpgradeAllowance": {
			reason: "An UpgradeAllowance for Crossplane's service account covering the change admits it, with an External allowance traced to it that opens the gate once; the build is recorded.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), xpPod, xpUA},
				req: update(asNewCrossplane, bucket(t, builds(crossplane, xpOld)), bucket(t, builds(crossplane, xpOld), set("spec.forProvider.size", "large")))},
			want: result{Allowed: true, Object: bucket(t, builds(crossplane, xpNew), set("spec.forProvider.size", "large"), policies(openedU...),
				allowances(xpUpgraded), trace(xpTrace...)).Object},
			approved: approvalAt(bucket(t, set("spec.forProvider.size", "large")), 6),
		},
		"NewBuildBeyondUpgradeAllowanceDenied": {
			reason: "An UpgradeAllowance for Crossplane covers only its policies' fields.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), xpPod, xpUA},
				req: update(asNewCrossplane, bucket(t, builds(crossplane, xpOld)), bucket(t, builds(crossplane, xpOld), set("spec.forProvider.region", "us")))},
			want: result{Code: http.StatusForbidden, Message: newBuild(crossplane, xpNew, xpHashes, "spec.forProvider.region")},
		},
		"NewProviderBuildLateInitDenied": {
			reason: "A provider's new build late-initializing a field is an upgrade too: denied without an UpgradeAllowance for its service account.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), recPod, xpUA},
				req: update(asNewRecorder, bucket(t, builds(recorder, recOld)), bucket(t, builds(recorder, recOld), set("spec.forProvider.region", "eu")))},
			want: result{Code: http.StatusForbidden, Message: newBuild(recorder, recNew, recHashes, "spec.forProvider.region")},
		},
		"NewProviderBuildLateInitUnderUpgradeAllowance": {
			reason: "Covered by an UpgradeAllowance for the provider's service account, the new build's late initialization is approved as before and its build recorded.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), recPod, recUA},
				req: update(asNewRecorder, bucket(t, builds(recorder, recOld)), bucket(t, builds(recorder, recOld), set("spec.forProvider.region", "eu")))},
			want:     result{Allowed: true, Object: bucket(t, builds(recorder, recNew), set("spec.forProvider.region", "eu")).Object},
			approved: approvalAt(bucket(t, set("spec.forProvider.region", "eu")), 5),
		},
		"NewProviderBuildBookkeeping": {
			reason: "A new build's write that changes no spec field (its bookkeeping annotations) is no upgrade to approve: admitted, build recorded.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), recPod},
				req: update(asNewRecorder, bucket(t, builds(recorder, recOld)), bucket(t, builds(recorder, recOld), annotate("crossplane.io/external-name", "orders-data")))},
			want: result{Allowed: true, Object: bucket(t, builds(recorder, recNew), annotate("crossplane.io/external-name", "orders-data")).Object},
		},
		"CrossplaneCannotForgeTheRecord": {
			reason: "Whatever record a writer sends, admission writes the one it knows: Crossplane's apply without it, or with another, keeps the stored record plus its own build.",
			args: args{objs: []client.Object{parentXR(), parentClaim(), xpPod},
				req: update(asNewCrossplane, bucket(t, builds(recorder, recOld, crossplane, xpNew)), bucket(t, builds(crossplane, "forged")))},
			want: result{Allowed: true, Object: bucket(t, builds(recorder, recOld, crossplane, xpNew)).Object},
		},
		"Delete": {
			reason: "Deleting a managed resource is not this webhook's business.",
			args:   args{objs: []client.Object{parentXR()}, req: remove(asBob, bucket(t))},
			want:   result{Allowed: true},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			objs := tc.args.objs
			if !tc.args.bare {
				objs = withComposites(t, objs)
			}
			k := kube(t, objs...)
			h := &Managed{Reader: k, Policies: k, Cache: kpolicy.NewCache(), Trusted: trusted, Now: now}
			got := admitted(t, tc.args.req, h.Handle(context.Background(), tc.args.req))
			// The approval is asserted where a case names one.
			if approval := approvalOf(t, got.Object); tc.approved != nil {
				// What came before is asserted where a case names it.
				var opts []cmp.Option
				if tc.approved.Before == nil {
					opts = append(opts, cmpopts.IgnoreFields(gate.Approval{}, "Before"))
				}
				if diff := cmp.Diff(tc.approved, approval, opts...); diff != "" {
					t.Errorf("\n%s\nHandle(...): approval -want, +got:\n%s", tc.reason, diff)
				}
			}
			if tc.warningsContain != "" {
				if !strings.Contains(strings.Join(got.Warnings, "\n"), tc.warningsContain) {
					t.Errorf("\n%s\nHandle(...): warnings %q do not contain %q", tc.reason, got.Warnings, tc.warningsContain)
				}
				got.Warnings = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestManagedReadsParentsWhenAFreezeMatters: a write whose allowances are
// all used up is decided without reading the parents a freeze may be set
// on (no freeze changes that decision, gate.FreezeMatters), so such a
// write, the gate controller's closing one among them, passes while the
// composite cannot be read; a write with a live allowance still needs the
// parents and fails closed without them.
func TestManagedReadsParentsWhenAFreezeMatters(t *testing.T) {
	errParent := errors.New("etcd is away")
	unreadable := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if obj.GetObjectKind().GroupVersionKind().Kind == "XDatabase" {
			return errParent
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	consumed := bucketAllowance()
	consumed.Consumed = true
	cases := map[string]struct {
		stored *unstructured.Unstructured
		want   bool
	}{
		"UsedUpAllowancesPass":     {stored: bucket(t, allowances(consumed)), want: true},
		"LiveAllowanceFailsClosed": {stored: bucket(t, allowances(bucketAllowance())), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k := interceptor.NewClient(kube(t).(client.WithWatch), unreadable)
			h := &Managed{Reader: k, Policies: k, Cache: kpolicy.NewCache(), Trusted: trusted, Now: now}
			req := update(asRecorder, tc.stored, tc.stored.DeepCopy())
			rsp := h.Handle(context.Background(), req)
			if rsp.Allowed != tc.want {
				t.Fatalf("Handle(...) allowed %v, want %v: %v", rsp.Allowed, tc.want, rsp.Result)
			}
			if !tc.want && !strings.Contains(rsp.Result.Message, errParent.Error()) {
				t.Errorf("Handle(...) message %q does not name the unreadable composite", rsp.Result.Message)
			}
		})
	}
}

// withComposites is objs with the scenario suite's policies for the
// composite kinds of the objs' parents, unless objs names its own: the
// chain trusts a composite's allowances only when a policy is for its
// kind, as admission wrote them then.
func withComposites(t *testing.T, objs []client.Object) []client.Object {
	t.Helper()
	out := slices.Clone(objs)
	for _, o := range objs {
		if _, ok := o.(*v1alpha1.AllowancePolicy); ok {
			return out
		}
	}
	return append(out, allowancePolicy(t, xdatabasesPolicy), allowancePolicy(t, claimsPolicy))
}
