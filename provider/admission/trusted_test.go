package admission

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
)

// refusal is the message protect gives user for changing what (e.g.
// "annotation kausality.io/trace") of object.
func refusal(user, object string, what ...string) admit.Verdict {
	return admit.Deny(metrics.ReasonProtected, "%s of %s: only Kausality and Crossplane may change %s; user %q may set kausality.io/freeze, kausality.io/allow-delete and kausality.io/trace-* annotations",
		strings.Join(what, " and "), object, strings.Join(what, ", "), user)
}

func TestTrustedProtect(t *testing.T) {
	type args struct {
		trusted admit.Writers
		user    authenticationv1.UserInfo
		old     *unstructured.Unstructured
		obj     *unstructured.Unstructured
	}
	stored := claim(t, allowances(claimAllowance()), trace(claimHop()))
	storedMR := bucket(t, allowances(bucketAllowance()), trace(claimHop(), xrHop(), bucketHop()), annotate(v1alpha1.AnnotationApplied, `{"spec.forProvider.size":"small"}`),
		annotate(v1alpha1.AnnotationControllerBuilds, "a1b2c3"))
	cases := map[string]struct {
		reason string
		args   args
		want   admit.Verdict
	}{
		"UserChangesAllowances": {
			reason: "A user may not rewrite the allowances annotation: it would forge permission for a change.",
			args: args{trusted: trusted, user: asAlice, old: stored,
				obj: claim(t, allowances(consumed(claimAllowance())), trace(claimHop()))},
			want: admit.Deny(metrics.ReasonProtected, "%s", `annotation kausality.io/allowances of DatabaseClaim team-a/orders: only Kausality and Crossplane may change annotation kausality.io/allowances; user "alice@example.com" may set kausality.io/freeze, kausality.io/allow-delete and kausality.io/trace-* annotations`),
		},
		"UserRemovesTrace": {
			reason: "Removing the trace erases another change's cause.",
			args:   args{trusted: trusted, user: asBob, old: stored, obj: claim(t, allowances(claimAllowance()))},
			want:   refusal(bob, "DatabaseClaim team-a/orders", "annotation kausality.io/trace"),
		},
		"UserEmptiesAllowances": {
			reason: "An annotation set to the empty string is a change from a present value.",
			args: args{trusted: trusted, user: asBob, old: stored,
				obj: claim(t, annotate(v1alpha1.AnnotationAllowances, ""), trace(claimHop()))},
			want: refusal(bob, "DatabaseClaim team-a/orders", "annotation kausality.io/allowances"),
		},
		"UserForgesAllowancesOnCreate": {
			reason: "A create carrying allowances is a forgery too: there is no stored object to compare with.",
			args:   args{trusted: trusted, user: asBob, obj: claim(t, allowances(claimAllowance()))},
			want:   refusal(bob, "DatabaseClaim team-a/orders", "annotation kausality.io/allowances"),
		},
		"UserChangesApplied": {
			reason: "The applied record tells drift from propagation; a user changing it would disguise drift.",
			args: args{trusted: trusted, user: asBob, old: storedMR,
				obj: bucket(t, allowances(bucketAllowance()), trace(claimHop(), xrHop(), bucketHop()), annotate(v1alpha1.AnnotationApplied, `{"spec.forProvider.size":"large"}`), annotate(v1alpha1.AnnotationControllerBuilds, "a1b2c3"))},
			want: refusal(bob, "Bucket orders-data", "annotation kausality.io/applied"),
		},
		"UserChangesCompositionRevision": {
			reason: "The composition revision stamp decides which UpgradeAllowance covers a resource.",
			args: args{trusted: trusted, user: asBob, old: storedMR,
				obj: bucket(t, allowances(bucketAllowance()), trace(claimHop(), xrHop(), bucketHop()), annotate(v1alpha1.AnnotationApplied, `{"spec.forProvider.size":"small"}`),
					annotate(v1alpha1.AnnotationControllerBuilds, "a1b2c3"), annotate(v1alpha1.AnnotationCompositionRevision, "xdatabases-buckets-2"))},
			want: refusal(bob, "Bucket orders-data", "annotation kausality.io/composition-revision"),
		},
		"UserRemovesControllerUAHash": {
			reason: "The controller User-Agent hash detects controller upgrades.",
			args: args{trusted: trusted, user: asBob, old: storedMR,
				obj: bucket(t, allowances(bucketAllowance()), trace(claimHop(), xrHop(), bucketHop()), annotate(v1alpha1.AnnotationApplied, `{"spec.forProvider.size":"small"}`))},
			want: refusal(bob, "Bucket orders-data", "annotation kausality.io/controller-builds"),
		},
		"UserRemovesGatedLabel": {
			reason: "A gated managed resource stays gated: removing the label would hide it from the gate controller.",
			args:   args{trusted: trusted, user: asBob, old: bucket(t), obj: bucket(t, unlabel(v1alpha1.LabelGated))},
			want:   refusal(bob, "Bucket orders-data", "label kausality.io/gated"),
		},
		"UserAddsGatedLabel": {
			reason: "Only the function gates a resource.",
			args:   args{trusted: trusted, user: asBob, old: bucket(t, unlabel(v1alpha1.LabelGated)), obj: bucket(t)},
			want:   refusal(bob, "Bucket orders-data", "label kausality.io/gated"),
		},
		"SeveralProtectedChanges": {
			reason: "Every protected change is named, annotations in a fixed order, then the label.",
			args: args{trusted: trusted, user: asBob, old: storedMR,
				obj: bucket(t, unlabel(v1alpha1.LabelGated), unannotate(v1alpha1.AnnotationCompositionRevision), annotate(v1alpha1.AnnotationApplied, `{"spec.forProvider.size":"small"}`), annotate(v1alpha1.AnnotationControllerBuilds, "a1b2c3"))},
			want: refusal(bob, "Bucket orders-data", "annotation kausality.io/allowances", "annotation kausality.io/trace", "annotation kausality.io/composition-revision", "label kausality.io/gated"),
		},
		"UserSetsTheirAnnotations": {
			reason: "Users may set freeze, mode, allow-delete and trace-* labels, and change anything else.",
			args: args{trusted: trusted, user: asBob, old: stored,
				obj: claim(t, allowances(claimAllowance()), trace(claimHop()),
					annotate(v1alpha1.AnnotationFreeze, `{"user":"bob@example.com","message":"incident"}`),
					annotate(v1alpha1.AnnotationMode, "Log"), annotate(v1alpha1.AnnotationAllowDelete, "true"),
					annotate(v1alpha1.AnnotationTraceLabelPrefix+"ticket", "T-1"), annotate("jira", "INFRA-1"),
					set("spec.size", "large"))},
		},
		"UserLeavesProtectedAnnotationsAlone": {
			reason: "A write that keeps the protected annotations as stored is not refused.",
			args:   args{trusted: trusted, user: asBob, old: storedMR, obj: storedMR},
		},
		"CrossplaneChangesAllowances": {
			reason: "Crossplane writes the function's output and the claim controller's copy.",
			args: args{trusted: trusted, user: asCrossplane, old: storedMR,
				obj: bucket(t, allowances(consumed(bucketAllowance())), unlabel(v1alpha1.LabelGated))},
		},
		"ProviderChangesAllowances": {
			reason: "The provider marks allowances consumed.",
			args: args{trusted: trusted, user: asProvider, old: stored,
				obj: claim(t, allowances(consumed(claimAllowance())), trace(claimHop()))},
		},
		"EmptyUsernameNeverTrusted": {
			reason: "An unknown provider username (empty) must not make the empty username trusted.",
			args: args{trusted: admit.Writers{Crossplane: crossplane}, user: authenticationv1.UserInfo{}, old: stored,
				obj: claim(t, trace(claimHop()))},
			want: refusal("", "DatabaseClaim team-a/orders", "annotation kausality.io/allowances"),
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got := tc.args.trusted.Protect(tc.args.user.Username, tc.args.old, tc.args.obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nprotect(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTrustedWrite(t *testing.T) {
	type want struct {
		old, obj *unstructured.Unstructured
		// sent is the object as sent, before any restore: what the
		// handler's patch starts from.
		sent map[string]any
		done *result
	}
	stored := claim(t, allowances(claimAllowance()), trace(claimHop()))
	changed := claim(t, allowances(claimAllowance()), trace(claimHop()), set("spec.size", "large"))
	garbled := update(asAlice, stored, changed)
	garbled.Object = runtime.RawExtension{Raw: []byte(`{"apiVersion":`)}
	connect := update(asBob, stored, changed)
	connect.Operation = admissionv1.Connect
	storedMR := bucket(t)
	// What crossplane-runtime's critical annotation updater sends after a
	// conflict: the fresh resource with all annotations of its older copy
	// (here, allowances Kausality has since marked consumed, and no trace).
	staleMR := bucket(t, allowances(bucketAllowance()), unannotate(v1alpha1.AnnotationTrace), annotate("crossplane.io/external-create-succeeded", "2026-11-23T12:00:00Z"))
	storedConsumed := bucket(t, allowances(consumed(bucketAllowance())))
	restoredMR := bucket(t, allowances(consumed(bucketAllowance())), annotate("crossplane.io/external-create-succeeded", "2026-11-23T12:00:00Z"))
	asProviderAWS := authenticationv1.UserInfo{Username: "system:serviceaccount:crossplane-system:provider-aws"}
	cases := map[string]struct {
		reason  string
		req     admission.Request
		restore bool
		want    want
	}{
		"StaleWriteBackRestored": {
			reason:  "A provider recording a creation with its older copy of the annotations gets the stored protected annotations back, not a denial that would leave the creation unrecorded.",
			req:     update(asProviderAWS, storedConsumed, staleMR),
			restore: true,
			want:    want{old: storedConsumed, obj: restoredMR, sent: staleMR.Object},
		},
		"StaleWriteBackDeniedWhereNotRestored": {
			reason: "Claims and composites have no provider bookkeeping: the same write is denied.",
			req:    update(asProviderAWS, storedConsumed, staleMR),
			want: want{done: &result{Code: http.StatusForbidden,
				Message: refusal(asProviderAWS.Username, "Bucket orders-data", "annotation kausality.io/allowances").Message}},
		},
		"RemovingBookkeepingDeniedWhereRestored": {
			reason:  "Replacing all annotations removes crossplane-runtime's bookkeeping; that is no bookkeeping write, and the protected change is denied.",
			req:     update(asBob, bucket(t, annotate("crossplane.io/external-name", "orders-data")), bucket(t, allowances(consumed(bucketAllowance())))),
			restore: true,
			want: want{done: &result{Code: http.StatusForbidden,
				Message: refusal(bob, "Bucket orders-data", "annotation kausality.io/allowances").Message}},
		},
		"ProtectedOnlyDeniedWhereRestored": {
			reason:  "A write that changes protected annotations and no provider bookkeeping is denied, restore or not.",
			req:     update(asBob, storedMR, bucket(t, allowances(consumed(bucketAllowance())))),
			restore: true,
			want: want{done: &result{Code: http.StatusForbidden,
				Message: refusal(bob, "Bucket orders-data", "annotation kausality.io/allowances").Message}},
		},
		"Update": {
			reason: "An admitted update decodes both objects for the handler to decide.",
			req:    update(asAlice, stored, changed),
			want:   want{old: stored, obj: changed, sent: changed.Object},
		},
		"Create": {
			reason: "A create has no old object.",
			req:    create(asAlice, claim(t)),
			want:   want{obj: claim(t), sent: claim(t).Object},
		},
		"Delete": {
			reason: "Deletions are not writes: they pass, with nothing decoded.",
			req:    remove(asBob, stored),
			want:   want{done: &result{Allowed: true}},
		},
		"Connect": {
			reason: "Other operations pass.",
			req:    connect,
			want:   want{done: &result{Allowed: true}},
		},
		"Undecodable": {
			reason: "An object that does not decode is a bad request, not an admission.",
			req:    garbled,
			want: want{done: &result{Code: http.StatusBadRequest,
				Message: "cannot decode DatabaseClaim orders: unexpected end of JSON input"}},
		},
		"Protected": {
			reason: "A protected change is denied before any handler logic runs.",
			req:    update(asBob, stored, claim(t, trace(claimHop()))),
			want: want{done: &result{Code: http.StatusForbidden,
				Message: refusal(bob, "DatabaseClaim team-a/orders", "annotation kausality.io/allowances").Message}},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			old, obj, sent, done := write(trusted, tc.req, tc.restore)
			got := want{old: old, obj: obj, sent: sent}
			if done != nil {
				r := outcome(t, tc.req, *done)
				got.done = &r
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nwrite(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTrustedController(t *testing.T) {
	cases := map[string]struct {
		user string
		want bool
	}{
		"AProvider":          {user: "system:serviceaccount:crossplane-system:provider-aws-s3-7f2c", want: true},
		"Crossplane":         {user: crossplane},
		"Kausality":          {user: provider},
		"OtherNamespace":     {user: "system:serviceaccount:team-a:deployer"},
		"AUser":              {user: bob},
		"LooksLikeOne":       {user: "system:serviceaccount:crossplane-system"},
		"ColonInNameRefused": {user: "system:serviceaccount:crossplane-system:a:b"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := trusted.Controller(tc.user); got != tc.want {
				t.Errorf("Controller(%q) = %v, want %v: only service accounts in Crossplane's namespace, other than Crossplane and Kausality, are providers", tc.user, got, tc.want)
			}
		})
	}
}
