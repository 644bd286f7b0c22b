package admission

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	kpolicy "github.com/kausality-io/kausality-crossplane/internal/policy"
)

func TestComposites(t *testing.T) {
	type args struct {
		// objs are what the API server holds: policies, parents.
		objs []client.Object
		req  admission.Request
	}
	claims, xdatabases := allowancePolicy(t, claimsPolicy), allowancePolicy(t, xdatabasesPolicy)
	logMode := allowancePolicy(t, claimsPolicy, func(p *v1alpha1.AllowancePolicy) { p.Spec.Mode = v1alpha1.ModeLog })
	brokenClaims := allowancePolicy(t, claimsPolicy, func(p *v1alpha1.AllowancePolicy) { p.Spec.Rules[0].Conditions = []string{"object.("} })

	// Alice created the Claim: its trace is her creation.
	created := at(allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 1, User: alice}, -30*time.Minute)
	stored := claim(t, trace(created))
	resized := claim(t, trace(created), set("spec.size", "large"))

	// Alice's resize at the fixed time: the Claim's hop for it.
	aliceHop := at(claimHop(), 0)
	// The Claim as stored after Alice's resize (at claimHop's time), not
	// yet reconciled.
	resizedClaim := func(mods ...mod) *unstructured.Unstructured {
		return claim(t, append([]mod{generation(2), set("spec.size", "large"), allowances(claimAllowance()), trace(claimHop())}, mods...)...)
	}
	// Crossplane created the XR for the Claim; it carries the resize at the
	// fixed time.
	xrCreated := at(allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 1, User: crossplane}, -29*time.Minute)
	carried := at(xrHop(), 0)
	storedXR := xr(t, trace(created, xrCreated))
	resizedXR := func(mods ...mod) *unstructured.Unstructured {
		return xr(t, append([]mod{set("spec.size", "large"), trace(created, xrCreated)}, mods...)...)
	}
	moreRefs := set("spec.resourceRefs[1]", map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": "orders-logs"})

	bobDenied := `DatabaseClaim team-a/orders: change to spec.size is not permitted by AllowancePolicy claims: user "bob@example.com" is not a subject with mayInitiate`
	noJira := `DatabaseClaim team-a/orders: change to spec.size is not permitted by AllowancePolicy claims: condition "has(object.metadata.annotations) && 'jira' in object.metadata.annotations" is false`
	uncovered := `XDatabase orders-x1: change to spec.size is not permitted by AllowancePolicy xdatabases: user "system:serviceaccount:crossplane-system:crossplane" is not a subject with mayInitiate (no unconsumed allowance on DatabaseClaim team-a/orders covers spec.size)`

	bobsFreeze := `{"user":"bob@example.com","message":"incident 42","at":"` + ts(0) + `"}`
	switched := "DatabaseClaim team-a/orders: change to spec.compositionRef is not permitted by AllowancePolicy claims: it chooses what composes the object, and no rule's trigger permits changing it"

	cases := map[string]struct {
		reason string
		args   args
		want   result
	}{
		"AlicePermittedChange": {
			reason: "Alice (platform team, jira annotation) may resize: the Claim gets the rule's allowance and a trace hop naming her, with the jira attestation, for the generation the write creates.",
			args:   args{objs: []client.Object{claims, xdatabases}, req: update(asAlice, stored, resized)},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce", AuditInitiator: alice},
				Object: claim(t, set("spec.size", "large"), allowances(claimAllowanceFor(aliceHop)), trace(aliceHop)).Object},
		},
		"TraceLabels": {
			reason: "The object's kausality.io/trace-* annotations become labels of its own hop, in the trace and in the allowances.",
			args: args{objs: []client.Object{claims}, req: update(asAlice, stored,
				claim(t, trace(created), set("spec.size", "large"), annotate("kausality.io/trace-ticket", "CHG-7")))},
			want: func() result {
				h := aliceHop
				h.Labels = map[string]string{"ticket": "CHG-7"}
				return result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce", AuditInitiator: alice},
					Object: claim(t, set("spec.size", "large"), annotate("kausality.io/trace-ticket", "CHG-7"), allowances(claimAllowanceFor(h)), trace(h)).Object}
			}(),
		},
		"BobDeniedInEnforce": {
			reason: "Bob is no subject with mayInitiate: in Enforce mode his change is denied naming field, policy and reason.",
			args:   args{objs: []client.Object{claims, xdatabases}, req: update(asBob, stored, resized)},
			want: result{Code: http.StatusForbidden, Message: bobDenied,
				Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: bobDenied}},
		},
		"ConditionFalseDenied": {
			reason: "Alice without the jira annotation fails the rule's condition, which the denial names.",
			args: args{objs: []client.Object{claims}, req: update(asAlice, claim(t, unannotate("jira"), trace(created)),
				claim(t, unannotate("jira"), trace(created), set("spec.size", "large")))},
			want: result{Code: http.StatusForbidden, Message: noJira,
				Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: noJira}},
		},
		"LogModeWarns": {
			reason: "In Log mode Bob's change is admitted with a warning naming field and policy, and earns nothing; the stored trace stays.",
			args:   args{objs: []client.Object{logMode}, req: update(asBob, stored, resized)},
			want: result{Allowed: true, Warnings: []string{"Log mode, would be denied: " + bobDenied},
				Audit:  map[string]string{admit.AuditMode: "Log", admit.AuditViolations: bobDenied},
				Object: resized.Object},
		},
		"NamespaceLogModeWarns": {
			reason: "The Namespace's kausality.io/mode: Log overrides an Enforce policy: Bob's change is admitted with a warning.",
			args:   args{objs: []client.Object{claims, namespace(v1alpha1.AnnotationMode, "Log")}, req: update(asBob, stored, resized)},
			want: result{Allowed: true, Warnings: []string{"Log mode, would be denied: " + bobDenied},
				Audit:  map[string]string{admit.AuditMode: "Log", admit.AuditViolations: bobDenied},
				Object: resized.Object},
		},
		"ModeOnClaimIgnored": {
			reason: "kausality.io/mode: Log on the Claim does not switch off enforcement of Bob's own change: denied, with a warning naming the annotation.",
			args: args{objs: []client.Object{claims}, req: update(asBob, stored,
				claim(t, trace(created), set("spec.size", "large"), annotate(v1alpha1.AnnotationMode, "Log")))},
			want: result{Code: http.StatusForbidden, Message: bobDenied,
				Warnings: []string{`annotation kausality.io/mode="Log" on DatabaseClaim team-a/orders is ignored: only a Namespace may set the mode (kubectl annotate namespace <name> kausality.io/mode=Log, as an administrator)`},
				Audit:    map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: bobDenied}},
		},
		"BrokenPolicyRefusesSpecChange": {
			reason: "While a policy for the kind does not compile, what it permits is unknown: Alice's resize is refused, naming the policy (fail closed).",
			args:   args{objs: []client.Object{brokenClaims}, req: update(asAlice, stored, resized)},
			want: result{Code: http.StatusForbidden,
				Message: `DatabaseClaim team-a/orders: its spec cannot change while an AllowancePolicy for DatabaseClaim does not compile: AllowancePolicy claims is invalid: spec.rules[0].conditions[0] "object.(": ERROR: <input>:1:8: Syntax error: no viable alternative at input '.('` + "\n | object.(\n | .......^"},
		},
		"BrokenPolicyLetsMetadataThrough": {
			reason: "A write that leaves the spec alone (a finalizer removed) passes, so no deletion gets stuck behind a broken policy.",
			args:   args{objs: []client.Object{brokenClaims}, req: update(asCrossplane, claim(t, trace(created), set("metadata.finalizers", []any{"finalizer.apiextensions.crossplane.io"})), stored)},
			want:   result{Allowed: true, Object: stored.Object},
		},
		"FreezeRecordsWhoSetIt": {
			reason: "Anyone may freeze: admission records who and when, whatever the value claims.",
			args: args{objs: []client.Object{claims}, req: update(asBob, stored,
				claim(t, trace(created), annotate(v1alpha1.AnnotationFreeze, `{"user":"alice@example.com","message":"incident 42"}`)))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: claim(t, trace(created), annotate(v1alpha1.AnnotationFreeze, bobsFreeze)).Object},
		},
		"FreezePlainText": {
			reason: "A freeze written as plain text becomes its message.",
			args:   args{objs: []client.Object{claims}, req: update(asBob, stored, claim(t, trace(created), annotate(v1alpha1.AnnotationFreeze, "incident 42")))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: claim(t, trace(created), annotate(v1alpha1.AnnotationFreeze, bobsFreeze)).Object},
		},
		"FreezeLiftedBySetter": {
			reason: "The user who set a freeze may lift it.",
			args:   args{objs: []client.Object{claims}, req: update(asBob, claim(t, trace(created), annotate(v1alpha1.AnnotationFreeze, bobsFreeze)), stored)},
			want:   result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"}, Object: stored.Object},
		},
		"FreezeLiftedBySubject": {
			reason: "A user a policy for the kind lets initiate changes may lift anyone's freeze.",
			args:   args{objs: []client.Object{claims}, req: update(asAlice, claim(t, trace(created), annotate(v1alpha1.AnnotationFreeze, bobsFreeze)), stored)},
			want:   result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"}, Object: stored.Object},
		},
		"FreezeLiftByOtherDenied": {
			reason: "Bob may not lift the freeze Carol set.",
			args: args{objs: []client.Object{claims}, req: update(asBob,
				claim(t, trace(created), annotate(v1alpha1.AnnotationFreeze, `{"user":"carol@example.com","message":"incident 42","at":"2026-11-22T11:00:00Z"}`)), stored)},
			want: result{Code: http.StatusForbidden, Message: "annotation kausality.io/freeze of DatabaseClaim team-a/orders was set by carol@example.com: only that user, or a subject an AllowancePolicy for DatabaseClaim lets initiate changes, may lift or replace it"},
		},
		"CompositionSwitchDenied": {
			reason: "Pointing the Claim at another Composition (one without the kausality step would un-gate its resources) is a watched change no rule permits: denied, even for Alice.",
			args:   args{objs: []client.Object{claims}, req: update(asAlice, stored, claim(t, trace(created), set("spec.compositionRef.name", "ungated")))},
			want: result{Code: http.StatusForbidden, Message: switched,
				Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: switched}},
		},
		"StrippedStatusDenied": {
			reason: "Bob sends his resize without status, which would make the Claim look initializing; the phase reads the stored status, so it is denied.",
			args:   args{objs: []client.Object{claims}, req: update(asBob, stored, claim(t, trace(created), set("spec.size", "large"), unset("status")))},
			want: result{Code: http.StatusForbidden, Message: bobDenied,
				Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: bobDenied}},
		},
		"CreateStampsOriginTrace": {
			reason: "Creating a Claim stamps a trace whose one hop names the authenticated creator at generation 1; creation earns no allowance.",
			args: args{objs: []client.Object{claims}, req: create(asAlice,
				claim(t, unset("metadata.generation"), unset("metadata.uid"), unset("status"), unset("spec.resourceRef")))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: claim(t, unset("metadata.generation"), unset("metadata.uid"), unset("status"), unset("spec.resourceRef"),
					trace(allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 1, User: alice, Timestamp: ts(0)})).Object},
		},
		"CrossplaneContinuesClaimsTrace": {
			reason: "Crossplane writing the XR under an unconsumed Claim allowance that covers the change: the XR's allowances continue the Claim's trace and keep Alice as initiator; Crossplane need not be allowed to initiate.",
			args: args{objs: []client.Object{claims, xdatabases, resizedClaim()},
				req: update(asCrossplane, storedXR, resizedXR())},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce", AuditInitiator: alice},
				Object: xr(t, set("spec.size", "large"), allowances(xrAllowancesFor(allowance.Trace{claimHop(), carried})...),
					trace(claimHop(), carried)).Object},
		},
		"CrossplaneCopyOfClaimAnnotationsReplaced": {
			reason: "The claim controller copies the Claim's kausality annotations onto the XR; the XR keeps its own, computed from the stored XR.",
			args: args{objs: []client.Object{claims, xdatabases, resizedClaim()},
				req: update(asCrossplane, storedXR, resizedXR(allowances(claimAllowance()), trace(claimHop())))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce", AuditInitiator: alice},
				Object: xr(t, set("spec.size", "large"), allowances(xrAllowancesFor(allowance.Trace{claimHop(), carried})...),
					trace(claimHop(), carried)).Object},
		},
		"ForgedAllowanceOnAnUnguardedClaimKind": {
			reason: "With no policy for the Claim's kind, no webhook guards its allowances annotation, so whatever it holds (Bob's forgery) carries nothing: Crossplane's write is judged as if the Claim held none.",
			args: args{objs: []client.Object{xdatabases, resizedClaim()},
				req: update(asCrossplane, storedXR, resizedXR())},
			want: result{Code: http.StatusForbidden, Message: uncovered,
				Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: uncovered}},
		},
		"CrossplaneWithoutClaimAllowanceDenied": {
			reason: "Without an allowance on the Claim Crossplane may not change a watched XR field: the denial says no Claim allowance covers it.",
			args:   args{objs: []client.Object{claims, xdatabases, stored}, req: update(asCrossplane, storedXR, resizedXR())},
			want: result{Code: http.StatusForbidden, Message: uncovered,
				Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: uncovered}},
		},
		"CrossplaneWithConsumedClaimAllowanceDenied": {
			reason: "A Claim allowance consumed by the Claim's observed generation covers nothing.",
			args: args{objs: []client.Object{claims, xdatabases, resizedClaim(observed(2))},
				req: update(asCrossplane, storedXR, resizedXR())},
			want: result{Code: http.StatusForbidden, Message: uncovered,
				Audit: map[string]string{admit.AuditMode: "Enforce", admit.AuditViolations: uncovered}},
		},
		"CrossplaneOwnFieldsNeedNoAllowance": {
			reason: "Fields Crossplane manages (spec.resourceRefs) need no Claim allowance; the write earns nothing and keeps the stored trace.",
			args: args{objs: []client.Object{claims, xdatabases, stored},
				req: update(asCrossplane, storedXR, xr(t, trace(created, xrCreated), moreRefs))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: xr(t, trace(created, xrCreated), moreRefs).Object},
		},
		"CrossplaneCreatesXR": {
			reason: "Creating the XR for a Claim continues the Claim's trace with the XR's hop by Crossplane at generation 1.",
			args: args{objs: []client.Object{claims, xdatabases, stored}, req: create(asCrossplane,
				xr(t, unset("metadata.generation"), unset("metadata.uid"), unset("status")))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: xr(t, unset("metadata.generation"), unset("metadata.uid"), unset("status"),
					trace(created, allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 1, User: crossplane, Timestamp: ts(0)})).Object},
		},
		"MalformedClaimAllowancesDenied": {
			reason: "A Claim whose allowances annotation does not parse covers nothing; Crossplane's write is denied naming the annotation and the Claim.",
			args: args{objs: []client.Object{claims, xdatabases, claim(t, annotate(v1alpha1.AnnotationAllowances, `[{"relation":"ControllerChild"`))},
				req: update(asCrossplane, storedXR, resizedXR())},
			want: result{Code: http.StatusForbidden,
				Message: "cannot parse annotation kausality.io/allowances on DatabaseClaim team-a/orders: invalid JSON: unexpected EOF"},
		},
		"ConsumedAllowancesPruned": {
			reason: "An allowance of a generation the stored object has observed a later one than is pruned on the next write.",
			args: args{objs: []client.Object{claims}, req: update(asAlice, resizedClaim(generation(3), observed(3)),
				resizedClaim(generation(3), observed(3), annotate("jira", "INFRA-24000")))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: resizedClaim(generation(3), observed(3), annotate("jira", "INFRA-24000"), unannotate(v1alpha1.AnnotationAllowances)).Object},
		},
		"MovedPastButNotObservedKept": {
			reason: "An allowance of a generation the stored object has moved past but not observed past is kept: Crossplane records a composite's resource references, raising its generation, before it creates what it composed from the allowance.",
			args: args{objs: []client.Object{claims}, req: update(asAlice, resizedClaim(generation(3), observed(2)),
				resizedClaim(generation(3), observed(2), annotate("jira", "INFRA-24000")))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: resizedClaim(generation(3), observed(2), annotate("jira", "INFRA-24000")).Object},
		},
		"ObservedAtItsGenerationKept": {
			reason: "An allowance of the stored object's current generation is kept although that generation is observed: Crossplane marks a composite observed at a generation a concurrent write raised before it composed it.",
			args: args{objs: []client.Object{claims}, req: update(asAlice, resizedClaim(observed(2)),
				resizedClaim(observed(2), annotate("jira", "INFRA-24000")))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: resizedClaim(observed(2), annotate("jira", "INFRA-24000")).Object},
		},
		"ForgedStatusPrunesNothing": {
			reason: "Consumption is decided on the stored status: a write that forges status.observedGeneration cannot prune an unconsumed allowance.",
			args: args{objs: []client.Object{claims}, req: update(asAlice, resizedClaim(),
				resizedClaim(observed(2), annotate("jira", "INFRA-24000")))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: resizedClaim(observed(2), annotate("jira", "INFRA-24000")).Object},
		},
		"MalformedStoredAllowancesDenied": {
			reason: "A stored allowances annotation that does not parse is kept, and writes that change the spec are denied naming it until it is removed.",
			args: args{objs: []client.Object{claims}, req: update(asAlice,
				claim(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created)),
				claim(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created), set("spec.size", "large")))},
			want: result{Code: http.StatusForbidden,
				Message: "cannot parse annotation kausality.io/allowances on DatabaseClaim team-a/orders; it is kept as it is and writes that change the spec are denied until it is removed (an unreadable annotation counts as no allowances): invalid JSON: invalid character 'o' in literal null (expecting 'u')"},
		},
		"MalformedStoredAllowancesLetMetadataThrough": {
			reason: "A write that changes no spec (Crossplane removing its finalizer) passes a malformed stored annotation, which stays as it is.",
			args: args{objs: []client.Object{claims}, req: update(asCrossplane,
				claim(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created), set("metadata.finalizers", []any{"finalizer.apiextensions.crossplane.io"})),
				claim(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created)))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: claim(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created)).Object},
		},
		"MalformedStoredAllowancesNotReplacedByACopy": {
			reason: "Crossplane's metadata-only write of the XR carries the Claim's allowances and trace: with the XR's stored annotation malformed they still do not land on the XR; its stored annotations stay.",
			args: args{objs: []client.Object{claims, xdatabases, resizedClaim()}, req: update(asCrossplane,
				xr(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created, xrCreated)),
				xr(t, allowances(claimAllowance()), trace(claimHop())))},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"},
				Object: xr(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created, xrCreated)).Object},
		},
		"MalformedStoredAllowancesRemoved": {
			reason: "Anyone may remove an unreadable allowances annotation: it counts as none, so nothing is lost, and the object is writable again.",
			args: args{objs: []client.Object{claims}, req: update(asBob,
				claim(t, annotate(v1alpha1.AnnotationAllowances, "not json"), trace(created)), stored)},
			want: result{Allowed: true, Audit: map[string]string{admit.AuditMode: "Enforce"}, Object: stored.Object},
		},
		"ProtectedAnnotationDenied": {
			reason: "Annotation protection applies: Bob may not write the allowances annotation.",
			args: args{objs: []client.Object{claims}, req: update(asBob, stored,
				claim(t, trace(created), allowances(claimAllowanceFor(at(claimHop(), 0)))))},
			want: result{Code: http.StatusForbidden, Message: refusal(bob, "DatabaseClaim team-a/orders", "annotation kausality.io/allowances").Message},
		},
		"UnrestrictedKind": {
			reason: "A kind no policy names passes untouched.",
			args:   args{objs: []client.Object{xdatabases}, req: update(asBob, stored, resized)},
			want:   result{Allowed: true, Object: resized.Object},
		},
		"Delete": {
			reason: "Deletions are the deletion webhook's.",
			args:   args{objs: []client.Object{claims}, req: remove(asBob, stored)},
			want:   result{Allowed: true},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			k := kube(t, tc.args.objs...)
			h := &Composites{Policies: k, Reader: k, Cache: kpolicy.NewCache(), Trusted: trusted, Now: now}
			got := admitted(t, tc.args.req, h.Handle(context.Background(), tc.args.req))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
