package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
)

// fleet walks an upgrade rolled out across XRs: four Claims of one
// Composition, whose revision 2 changes every data bucket's tier; an
// UpgradeAllowance with a rollout lets it through one XR, then one more,
// then two.
func fleet(ctx context.Context, cp *controlplane.ControlPlane, admin, alice client.Client, data string, w io.Writer) error {
	const comp, ns = "xdatabases-fleet", "fleet"
	if err := cp.Namespace(ctx, ns); err != nil {
		return err
	}
	if err := cp.Composition(ctx, filepath.Join(data, "composition-1.yaml"), comp); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== U1: alice creates four DatabaseClaims in %s, composed by %s\n", ns, comp)
	ds := make([]*demo, 4)
	for i := range ds {
		ds[i] = &demo{w: w, cp: cp, admin: admin, key: client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("orders-%d", i)}}
		if err := alice.Create(ctx, newClaim(ds[i].key, comp, "INFRA-3")); err != nil {
			return err
		}
	}
	xrs := map[*demo]string{}
	for _, d := range ds {
		if err := d.settle(ctx, nil); err != nil {
			return err
		}
		x, err := cp.XR(ctx, d.key)
		if err != nil || x == nil {
			return fmt.Errorf("no XR for Claim %s: %w", d.key, err)
		}
		xrs[d] = x.GetName()
	}
	// The roll-out's order: XR names.
	slices.SortFunc(ds, func(a, b *demo) int { return strings.Compare(xrs[a], xrs[b]) })

	fmt.Fprintf(w, "\n== U2: Composition revision 2 of %s changes the data bucket's tier of all four; no Claim field changed\n", comp)
	if err := cp.Composition(ctx, filepath.Join(data, "composition-2.yaml"), comp); err != nil {
		return err
	}
	for _, d := range ds {
		if err := d.settle(ctx, d.withheld("spec.forProvider.tags.tier")); err != nil {
			return err
		}
		fmt.Fprintf(w, "   XR %s: tier withheld, 0 Updates in the cloud\n", xrs[d])
	}
	args := []string{"status", "-n", ns}
	out, err := cp.Kausality(ctx, "admin", nil, args...)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   $ kubectl kausality %s\n%s", strings.Join(args, " "), indent(out))

	fmt.Fprintf(w, "\n== U3: an UpgradeAllowance for revision 2 with rollout: {} (exponentiallyUpdated(xr, xrs)): one XR, then one more, then two, each batch once the one before applied it and is Ready\n")
	start := time.Now()
	if err := create(ctx, admin, filepath.Join(data, "upgrade-fleet.yaml")); err != nil {
		return err
	}
	at, err := updatedAfter(ctx, ds, start)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   XR (roll-out order)\tDATA BUCKET UPDATED IN THE CLOUD AFTER")
	for i, d := range ds {
		fmt.Fprintf(tw, "   %s\t%s\n", xrs[d], at[i].Round(time.Second))
	}
	return tw.Flush()
}

// updatedAfter waits until each XR's data bucket is updated in the cloud,
// and says how long after start each was.
func updatedAfter(ctx context.Context, ds []*demo, start time.Time) ([]time.Duration, error) {
	at := make([]time.Duration, len(ds))
	deadline := start.Add(2 * stepTimeout)
	for slices.Contains(at, 0) {
		for i, d := range ds {
			if at[i] != 0 {
				continue
			}
			ok, _, err := d.updated("data", 1)(ctx)
			if err != nil {
				return nil, err
			}
			if ok {
				at[i] = time.Since(start)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the upgrade did not reach every XR in %s: updated after %v", 2*stepTimeout, at)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return at, nil
}

// indent prefixes every line of s with three spaces, as the demo's steps
// print their details.
func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("   " + l)
		}
	}
	return b.String()
}
