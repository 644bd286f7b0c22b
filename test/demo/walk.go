package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// composition is the name of the demo's Composition; editing it makes
// revision 2, which upgrade.yaml names.
const composition = "xdatabases-buckets"

// stepTimeout bounds how long one step waits for Crossplane, Kausality and
// the provider to settle.
const stepTimeout = 3 * time.Minute

// walk plays S1, S2 and S4, a batched roll-out and an upgrade rolled out
// across XRs on real Crossplane.
func walk(w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := render.Root()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kausality-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir) //nolint:errcheck // best effort
	fmt.Fprintln(w, "Starting kube-apiserver, etcd, kube-controller-manager, Crossplane core and its RBAC manager, and a package registry;")
	fmt.Fprintln(w, "installing function-kausality, function-patch-and-transform, provider-kausality and the recording provider from it ...")
	cp, err := controlplane.Start(ctx, root, dir)
	if err != nil {
		return err
	}
	defer cp.Stop()
	data := filepath.Join(root, "test", "e2e", "testdata")
	if err := cp.InstallDatabase(ctx, filepath.Join(data, "policies.yaml")); err != nil {
		return err
	}
	admin, err := cp.As("admin")
	if err != nil {
		return err
	}
	alice, err := cp.As(controlplane.Alice, "platform-team")
	if err != nil {
		return err
	}
	if err := cp.Namespace(ctx, "team-a"); err != nil {
		return err
	}
	if err := cp.Composition(ctx, filepath.Join(data, "composition-1.yaml"), composition); err != nil {
		return err
	}
	d := &demo{w: w, cp: cp, admin: admin, key: client.ObjectKey{Namespace: "team-a", Name: "orders"}}

	claim := newClaim(d.key, composition, "INFRA-1")
	if err := d.step(ctx, "S1: alice (platform-team) creates DatabaseClaim team-a/orders, size small", func() error {
		return alice.Create(ctx, claim)
	}, nil); err != nil {
		return err
	}
	if err := d.step(ctx, "S2: alice changes size to large, jira INFRA-1 on the Claim", func() error {
		return resize(ctx, alice, claim, "large")
	}, d.updated("data", 1)); err != nil {
		return err
	}
	if err := d.step(ctx, "S4: Composition revision 2 changes the data bucket's tier and drops the logs bucket; no Claim field changed", func() error {
		return cp.Composition(ctx, filepath.Join(data, "composition-2.yaml"), composition)
	}, d.withheld("spec.forProvider.tags.tier")); err != nil {
		return err
	}
	if err := d.step(ctx, "S4: an UpgradeAllowance for revision 2 of "+composition+" lets the tier change through", func() error {
		return create(ctx, admin, filepath.Join(data, "upgrade.yaml"))
	}, d.updated("data", 2)); err != nil {
		return err
	}
	if err := rollOut(ctx, cp, admin, alice, data, w); err != nil {
		return err
	}
	return fleet(ctx, cp, admin, alice, data, w)
}

// rollOut walks propagation control: a Claim whose six pool buckets form
// a collection takes its creation and alice's resize in batches.
func rollOut(ctx context.Context, cp *controlplane.ControlPlane, admin, alice client.Client, data string, w io.Writer) error {
	const pools = "xdatabases-pools"
	if err := cp.Namespace(ctx, "rollout"); err != nil {
		return err
	}
	if err := cp.Composition(ctx, filepath.Join(data, "composition-pools.yaml"), pools); err != nil {
		return err
	}
	d := &demo{w: w, cp: cp, admin: admin, key: client.ObjectKey{Namespace: "rollout", Name: "pools"}}
	claim := newClaim(d.key, pools, "INFRA-2")
	if err := d.step(ctx, "P1: alice creates DatabaseClaim rollout/pools: six pool buckets in one collection, created in batches of 1, 1, 2, 2", func() error {
		return alice.Create(ctx, claim)
	}, d.all(recorder.VerbCreate)); err != nil {
		return err
	}
	return d.step(ctx, "P2: alice resizes rollout/pools to large: each batch starts once the pools before it applied it and are Ready", func() error {
		return resize(ctx, alice, claim, "large")
	}, d.all(recorder.VerbUpdate))
}

// newClaim is a DatabaseClaim at key, size small, composed by composition
// and carrying a jira ticket.
func newClaim(key client.ObjectKey, composition, jira string) *unstructured.Unstructured {
	claim := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "small", "compositionRef": map[string]any{"name": composition}}}}
	claim.SetGroupVersionKind(controlplane.ClaimGVK)
	claim.SetNamespace(key.Namespace)
	claim.SetName(key.Name)
	claim.SetAnnotations(map[string]string{"jira": jira})
	return claim
}

// resize sets the Claim's size as c, retrying on conflicts.
func resize(ctx context.Context, c client.Client, claim *unstructured.Unstructured, size string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		_ = unstructured.SetNestedField(claim.Object, size, "spec", "size")
		return c.Update(ctx, claim)
	})
}

// all waits for the cloud to see verb once for every bucket of six.
func (d *demo) all(verb string) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		bs, err := d.cp.Buckets(ctx, d.key)
		if err != nil || len(bs) != 6 {
			return false, fmt.Sprintf("%d buckets", len(bs)), err
		}
		n := 0
		for _, b := range bs {
			if d.cp.Cloud.Count(verb, b.GetName()) > 0 {
				n++
			}
		}
		return n == 6, fmt.Sprintf("%d of 6 buckets saw %s", n, verb), nil
	}
}

type demo struct {
	w     io.Writer
	cp    *controlplane.ControlPlane
	admin client.Client
	key   client.ObjectKey
}

// withheld waits for the XR to say a change of field was withheld.
func (d *demo) withheld(field string) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		xr, err := d.cp.XR(ctx, d.key)
		if err != nil || xr == nil {
			return false, "no XR", err
		}
		c := controlplane.Condition(xr, "KausalityAllowed")
		return c.Status == "False" && strings.Contains(c.Message, field), "XR KausalityAllowed: " + c.Message, nil
	}
}

// updated waits for the cloud to see n Updates of the bucket res.
func (d *demo) updated(res string, n int) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		bs, err := d.cp.Buckets(ctx, d.key)
		if err != nil || bs[res] == nil {
			return false, "no " + res + " bucket", err
		}
		got := d.cp.Cloud.Count(recorder.VerbUpdate, bs[res].GetName())
		return got >= n, fmt.Sprintf("%d of %d Updates of bucket %s", got, n, res), nil
	}
}

// step does one user action, waits until done (if any) and the chain has
// settled, and prints the buckets, their traces, the XR's verdict and the
// gate timeline.
func (d *demo) step(ctx context.Context, title string, act func() error, done func(context.Context) (bool, string, error)) error {
	start := time.Now()
	fmt.Fprintf(d.w, "\n== %s\n", title)
	// Watch the gates while the step runs: admission opens a gate in the
	// same write that stamps its allowance, the gate controller closes it.
	wctx, stop := context.WithCancel(ctx)
	seen := make(chan []gateChange, 1)
	go func() { seen <- d.watchGates(wctx) }()
	propagated := make(chan []gateChange, 1)
	go func() { propagated <- d.watchPropagated(wctx) }()
	err := act()
	if err == nil {
		err = d.settle(ctx, done)
	}
	stop()
	changes := <-seen
	changes = append(changes, <-propagated...)
	if err != nil {
		return err
	}
	xr, err := d.cp.XR(ctx, d.key)
	if err != nil || xr == nil {
		return fmt.Errorf("no XR for Claim %s: %w", d.key, err)
	}
	bs, err := d.cp.Buckets(ctx, d.key)
	if err != nil {
		return err
	}
	res := make([]string, 0, len(bs))
	for r := range bs {
		res = append(res, r)
	}
	sort.Strings(res)
	fmt.Fprintf(d.w, "   Claim %s -> XR %s (Crossplane generated its name and its buckets')\n", d.key, xr.GetName())
	// What Kausality decided, as a platform engineer sees it: the legacy
	// XR and Buckets are cluster-scoped, which Alice's namespace rights
	// do not let her read.
	args := []string{"trace", "databaseclaims/" + d.key.Name, "-n", d.key.Namespace, "-o", "wide"}
	out, err := d.cp.Kausality(ctx, "admin", nil, args...)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "   $ kubectl kausality %s\n%s", strings.Join(args, " "), indent(out))
	// What reached the cloud, which only the recording provider knows.
	names := map[string]string{}
	tw := tabwriter.NewWriter(d.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   BUCKET\tNAME\tCLOUD SAW (Create/Update/Delete)\tSIZE/TIER IN CLOUD")
	for _, r := range res {
		b := bs[r]
		names[b.GetName()] = r
		s, _ := d.cp.Cloud.Get(b.GetName())
		fmt.Fprintf(tw, "   %s\t%s\t%d/%d/%d\t%d/%s\n", r, b.GetName(),
			d.cp.Cloud.Count(recorder.VerbCreate, b.GetName()), d.cp.Cloud.Count(recorder.VerbUpdate, b.GetName()), d.cp.Cloud.Count(recorder.VerbDelete, b.GetName()),
			s.Size, s.Tags["tier"])
	}
	_ = tw.Flush()

	evs := &eventsv1.EventList{}
	if err := d.admin.List(ctx, evs); err != nil {
		return err
	}
	for _, e := range evs.Items {
		if _, ok := names[e.Regarding.Name]; ok && !e.EventTime.Time.Before(start) && e.Action == "Gate" {
			changes = append(changes, gateChange{at: e.EventTime.Time, bucket: e.Regarding.Name, what: "event " + e.Reason + ": " + e.Note})
		}
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].at.Before(changes[j].at) })
	fmt.Fprintf(d.w, "   gate timeline (step took %s):\n", time.Since(start).Round(time.Second))
	tw = tabwriter.NewWriter(d.w, 0, 4, 2, ' ', 0)
	for _, c := range changes {
		fmt.Fprintf(tw, "   %s\t%s\t%s\n", c.at.Format("15:04:05.000"), names[c.bucket], c.what)
	}
	if len(changes) == 0 {
		fmt.Fprintln(tw, "   (no gate moved)")
	}
	return tw.Flush()
}

// settle waits until done (when given) holds and the chain has settled
// (controlplane.Settled).
func (d *demo) settle(ctx context.Context, done func(context.Context) (bool, string, error)) error {
	deadline := time.Now().Add(stepTimeout)
	for {
		ok, why, err := true, "", error(nil)
		if done != nil {
			ok, why, err = done(ctx)
		}
		if err == nil && ok {
			ok, why, err = d.cp.Settled(ctx, d.key)
		}
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the chain of %s did not settle in %s: %s — %s", d.key, stepTimeout, why, d.cp.Describe(ctx, d.key))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type gateChange struct {
	at     time.Time
	bucket string
	what   string
}

// watchGates records every change of a bucket's managementPolicies until
// ctx ends.
func (d *demo) watchGates(ctx context.Context) []gateChange {
	last := map[string]string{}
	first := true
	var out []gateChange
	for {
		if bs, err := d.cp.Buckets(context.Background(), d.key); err == nil {
			for _, b := range bs {
				now := "[" + strings.Join(controlplane.Gate(b), ", ") + "]"
				if prev, ok := last[b.GetName()]; (ok || !first) && prev != now {
					out = append(out, gateChange{at: time.Now(), bucket: b.GetName(), what: "gate " + now})
				}
				last[b.GetName()] = now
			}
			first = false
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// watchPropagated records every change of the XR's Propagated condition
// until ctx ends, as which resources it holds.
func (d *demo) watchPropagated(ctx context.Context) []gateChange {
	last := ""
	var out []gateChange
	for {
		if xr, err := d.cp.XR(context.Background(), d.key); err == nil && xr != nil {
			c := controlplane.Condition(xr, "Propagated")
			now := ""
			if c.Reason != "" {
				now = fmt.Sprintf("XR Propagated=%s %s", c.Status, c.Reason)
				if held := heldIn(c.Message); held != "" {
					now += ": holds " + held
				}
			}
			if now != last && now != "" {
				out = append(out, gateChange{at: time.Now(), what: now})
			}
			last = now
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// heldIn lists the resources a Propagated message names as held.
func heldIn(msg string) string {
	var held []string
	for _, part := range strings.Split(msg, "; ") {
		if r, ok := strings.CutPrefix(part, "resource "); ok && strings.Contains(part, "held:") {
			held = append(held, strings.Fields(r)[0])
		}
	}
	return strings.Join(held, ", ")
}

// create creates every object in a YAML file, retrying while the
// provider's webhooks come up.
func create(ctx context.Context, c client.Client, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		deadline := time.Now().Add(60 * time.Second)
		for err := c.Create(ctx, u.DeepCopy()); err != nil; err = c.Create(ctx, u.DeepCopy()) {
			if time.Now().After(deadline) {
				return fmt.Errorf("cannot create %s %s: %w", u.GetKind(), u.GetName(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}
