package controlplane

import (
	"context"
	"path/filepath"
	"time"
)

// InstallDatabase installs the chain the scenarios and the demo walk: the
// database example's XRD (DatabaseClaim → XDatabase), once Crossplane has
// established its CRDs the AllowancePolicies in the file policies, and
// waits until the provider's webhooks cover Claims, XRs and Buckets.
func (c *ControlPlane) InstallDatabase(ctx context.Context, policies string) error {
	if err := c.ApplyFile(ctx, filepath.Join(c.Root, "examples", "database", "xrd.yaml")); err != nil {
		return err
	}
	if err := c.Established(ctx, 60*time.Second, "databaseclaims.example.com", "xdatabases.example.com"); err != nil {
		return err
	}
	if err := c.ApplyFile(ctx, policies); err != nil {
		return err
	}
	return WaitForRules(ctx, c.admin, "databaseclaims", "xdatabases", "buckets")
}
