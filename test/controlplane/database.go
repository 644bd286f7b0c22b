package controlplane

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstallDatabase installs the chain the scenarios and the demo walk: the
// database example's XRD (DatabaseClaim → XDatabase), once Crossplane has
// established its CRDs the AllowancePolicies in the file policies, and
// waits until the provider's webhooks cover Claims, XRs and Buckets.
func (c *ControlPlane) InstallDatabase(ctx context.Context, policies string) error {
	if err := c.ApplyFile(ctx, filepath.Join(c.Root, "examples", "database", "xrd.yaml")); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, crd := range []string{"databaseclaims.example.com", "xdatabases.example.com"} {
		for {
			o := &apiextensionsv1.CustomResourceDefinition{}
			err := c.admin.Get(ctx, client.ObjectKey{Name: crd}, o)
			if err == nil && slices.ContainsFunc(o.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				break
			}
			if time.Now().After(deadline) {
				return errors.Wrapf(err, "crossplane did not establish %s", crd)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := c.ApplyFile(ctx, policies); err != nil {
		return err
	}
	return WaitForRules(ctx, c.admin, "databaseclaims", "xdatabases", "buckets")
}
