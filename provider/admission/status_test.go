package admission

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestStatus(t *testing.T) {
	// onStatus is the request r made through the status subresource.
	onStatus := func(r admission.Request) admission.Request {
		r.SubResource = "status"
		return r
	}
	admin := authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters", "system:authenticated"}}
	cases := map[string]struct {
		reason string
		req    admission.Request
		want   result
	}{
		"BobForgesObservedGeneration": {
			reason: "Bob (crossplane-edit grants /status) writing a gated Bucket's Synced observedGeneration would count an allowance consumed and start the next propagation batch: denied.",
			req:    onStatus(update(asBob, bucket(t), bucket(t, synced("True", 9)))),
			want: result{Code: http.StatusForbidden,
				Message: `status of Bucket orders-data: user "bob@example.com" may not write it; Kausality decides what has happened (observed generations, conditions, readiness) from status, so only Crossplane and the providers write the status of gated managed resources and of the Claims and composites AllowancePolicies name`},
		},
		"BobClearsXRConditions": {
			reason: "Bob clearing an XR's conditions would make it look initializing again: denied.",
			req:    onStatus(update(asBob, xr(t), xr(t, unset("status.conditions")))),
			want: result{Code: http.StatusForbidden,
				Message: `status of XDatabase orders-x1: user "bob@example.com" may not write it; Kausality decides what has happened (observed generations, conditions, readiness) from status, so only Crossplane and the providers write the status of gated managed resources and of the Claims and composites AllowancePolicies name`},
		},
		"CrossplaneWritesXR": {
			reason: "Crossplane writes its composites' status.",
			req:    onStatus(update(asCrossplane, xr(t), xr(t, unset("status.conditions")))),
			want:   result{Allowed: true},
		},
		"ProviderWritesBucket": {
			reason: "A provider writes its managed resources' status.",
			req:    onStatus(update(asRecorder, bucket(t), bucket(t, synced("True", 6)))),
			want:   result{Allowed: true},
		},
		"Administrator": {
			reason: "Cluster administrators are outside the threat model.",
			req:    onStatus(update(admin, bucket(t), bucket(t, synced("True", 6)))),
			want:   result{Allowed: true},
		},
		"MainResource": {
			reason: "Writes of the resource itself are the other webhooks' business.",
			req:    update(asBob, bucket(t), bucket(t, synced("True", 9))),
			want:   result{Allowed: true},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			h := &Status{Trusted: trusted}
			got := outcome(t, tc.req, h.Handle(context.Background(), tc.req))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
