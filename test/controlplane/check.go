package controlplane

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
)

// Environment is the envtest environment every suite runs: the provider's
// and the recording provider's CRDs, the Claim and composite CRDs of
// test/crds, and the package's webhook configuration, registered through
// the API server.
func Environment(root string) *envtest.Environment {
	return &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join(root, "package", "provider", "crds"),
			filepath.Join(root, "test", "recorder", "package", "crds"),
			filepath.Join(root, "test", "crds"),
		},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "package", "provider", "webhookconfigurations")}},
	}
}

// Update reads obj fresh as c and writes it back after fn changed it,
// retrying on conflicts (the provider and Crossplane write the same
// objects).
func Update(c client.Client, obj client.Object, fn func()) error {
	return retry.RetryOnConflict(conflictBackoff, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		fn()
		return c.Update(context.Background(), obj)
	})
}

// UpdateStatus is Update through the status subresource.
func UpdateStatus(c client.Client, obj client.Object, fn func()) error {
	return retry.RetryOnConflict(conflictBackoff, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		fn()
		return c.Status().Update(context.Background(), obj)
	})
}

// conflictBackoff retries a write that lost a race for about five seconds:
// a resource whose gate opens and closes sees several writes by the
// provider and Crossplane within a second, longer than client-go's
// DefaultRetry (five tries within 50 ms) waits.
var conflictBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1}

// WaitForRules waits until the provider's own webhook configuration covers
// every resource named: the provider writes its rules after it sees the
// AllowancePolicies, and a write before that is not evaluated at all.
func WaitForRules(ctx context.Context, c client.Client, resources ...string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		err := c.Get(ctx, client.ObjectKey{Name: policycontroller.DynamicName}, m)
		missing := slices.Clone(resources)
		if err == nil {
			for _, h := range m.Webhooks {
				for _, r := range h.Rules {
					missing = slices.DeleteFunc(missing, func(res string) bool { return slices.Contains(r.Resources, res) })
				}
			}
			if len(missing) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.Errorf("the provider's webhooks do not cover %v after a minute (%v)", missing, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
