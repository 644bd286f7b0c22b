package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// accessKeysDir is the connection-details guide's UserAccessKey: an IAM
// User, two AccessKeys and the Secret gathering the keys' credentials.
var accessKeysDir = filepath.Join("..", "..", "examples", "corpus", "access-keys")

var accessKeyGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "UserAccessKey"}

// accessKeyKinds are the managed kinds the UserAccessKey composes.
var accessKeyKinds = []schema.GroupVersionKind{
	{Group: "iam.aws.m.upbound.io", Version: "v1beta1", Kind: "User"},
	{Group: "iam.aws.m.upbound.io", Version: "v1beta1", Kind: "AccessKey"},
}

// installAccessKeys installs the UserAccessKey's XRD and the policy
// `policy derive` wrote for it, and waits until the provider resolved the
// policy's targets as managed kinds and its webhooks cover the XR.
func installAccessKeys(t *testing.T) {
	t.Helper()
	installExample(t, accessKeysDir, "useraccesskeys.example.org", "useraccesskeys", []string{"useraccesskeys", "users", "accesskeys"}, policy.ClassManaged, accessKeyKinds...)
}

// TestV2ConnectionDetails: the UserAccessKey of Crossplane v2's
// connection-details guide under Kausality on real core, through the
// guide's patch-and-transform and go-templating Compositions. The User
// and both AccessKeys are created in the cloud once each, traced to
// Alice; the connection Secret is composed and carries both keys'
// credentials, which the keys publish only once they exist, after the
// XR's first reconcile; and the XR says every managed kind it composes is
// restricted.
func TestV2ConnectionDetails(t *testing.T) {
	t.Parallel()
	installAccessKeys(t)
	ns := "v2-access-keys"
	namespace(t, ns)
	pt, gt := filepath.Join(accessKeysDir, "composition.yaml"), filepath.Join(accessKeysDir, "cases", "2-create-go-templating", "composition.yaml")
	for _, tc := range []struct {
		name, file string
		// secrets adds the policy derived from the go-templating
		// Composition, which names Secrets.
		secrets bool
	}{
		{name: "PatchAndTransform", file: pt},
		{name: "GoTemplating", file: gt},
		{name: "PatchAndTransformSecretsNamed", file: pt, secrets: true},
		{name: "GoTemplatingSecretsNamed", file: gt, secrets: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.secrets {
				if err := cp.ApplyFile(context.Background(), filepath.Join("testdata", "useraccesskeys-secrets.yaml")); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			comp := compositionFrom(t, tc.file)
			x := &unstructured.Unstructured{Object: map[string]any{}}
			x.SetGroupVersionKind(accessKeyGVK)
			x.SetNamespace(ns)
			x.SetName("keys-" + strings.ToLower(tc.name))
			secretName := x.GetName() + "-connection-details"
			_ = unstructured.SetNestedField(x.Object, secretName, "spec", "writeConnectionSecretToRef", "name")
			_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
			if err := alice(t).Create(ctx, x); err != nil {
				t.Fatalf("alice creates UserAccessKey %s/%s: %v", ns, x.GetName(), err)
			}
			key := client.ObjectKeyFromObject(x)

			var mrs map[string]*unstructured.Unstructured
			fixture.Eventually(t, settleTimeout, "the User, both AccessKeys and the connection Secret", func() (bool, string) {
				mrs = composedOf(t, key, accessKeyKinds...)
				s := &corev1.Secret{}
				err := cp.AdminClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: secretName}, s)
				var keys []string
				for k, v := range s.Data {
					if len(v) > 0 {
						keys = append(keys, k)
					}
				}
				sort.Strings(keys)
				want := []string{"password-0", "password-1", "user-0", "user-1"}
				return len(mrs) == 3 && err == nil && slices.Equal(keys, want), fmt.Sprintf("composed %v; Secret %s: %v, keys %v, want %v — %s", slices.Sorted(maps.Keys(mrs)), secretName, err, keys, want, describeXR(ctx, accessKeyGVK, key))
			})
			for res, mr := range mrs {
				if got := cp.Cloud.CountObject(recorder.VerbCreate, mr.GetKind(), mr.GetName()); got != 1 {
					t.Errorf("%s %s: %d cloud Creates, want 1", res, mr.GetName(), got)
				}
				if tr := mr.GetAnnotations()[v1alpha1.AnnotationTrace]; !strings.Contains(tr, controlplane.Alice) {
					t.Errorf("%s trace %q does not name %s", res, tr, controlplane.Alice)
				}
			}
			fixture.Eventually(t, settleTimeout, "the XR to be Ready, created, and every managed kind restricted", func() (bool, string) {
				o, err := cp.Object(ctx, accessKeyGVK, key)
				if err != nil || o == nil {
					return false, fmt.Sprint(err)
				}
				return policy.Ready(o.Object) && policy.ConditionTrue(o.Object, v1alpha1.ConditionCreated) &&
					policy.ConditionTrue(o.Object, v1alpha1.ConditionRestricted) && policy.ConditionTrue(o.Object, v1alpha1.ConditionAllowed), describeXR(ctx, accessKeyGVK, key)
			})
		})
	}
}
