package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/internal/logic"
)

func TestBuildOf(t *testing.T) {
	sidecar := pod("crossplane-7f9c", "xpkg.crossplane.io/crossplane/crossplane:v2.1.1")
	sidecar.Spec.Containers = append(sidecar.Spec.Containers, corev1.Container{Name: "proxy", Image: "proxy:v1"})
	cases := map[string]struct {
		reason  string
		objs    []client.Object
		user    authenticationv1.UserInfo
		want    *Build
		wantErr bool
	}{
		"User": {
			reason: "A user's request names no build.",
			user:   asBob,
		},
		"TokenNotBoundToAPod": {
			reason: "A service account token without a pod (a long-lived token, an impersonation without extra) names no build.",
			user:   asCrossplane,
		},
		"Pod": {
			reason: "A pod-bound token's build is its pod's images, hashed.",
			objs:   []client.Object{sidecar},
			user:   fromPod(asCrossplane, "crossplane-7f9c"),
			want: &Build{Images: []string{"xpkg.crossplane.io/crossplane/crossplane:v2.1.1", "proxy:v1"},
				Hash: logic.BuildHash([]string{"proxy:v1", "xpkg.crossplane.io/crossplane/crossplane:v2.1.1"})},
		},
		"PodGone": {
			reason:  "A pod that cannot be read fails the request: its build would be unknown.",
			user:    fromPod(asCrossplane, "crossplane-7f9c"),
			wantErr: true,
		},
		"PodReplaced": {
			reason:  "A pod of the same name but another UID is not the pod the token names.",
			objs:    []client.Object{pod("crossplane-7f9c", "x:v1")},
			user:    fromPod(asCrossplane, "crossplane-7f9c"),
			wantErr: true,
		},
	}
	cases["PodReplaced"].objs[0].SetUID("another-uid")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := buildOf(context.Background(), kube(t, tc.objs...), tc.user)
			if (err != nil) != tc.wantErr {
				t.Fatalf("\n%s\nbuildOf(...): error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nbuildOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
