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

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/played"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// walk plays S1, S2 and S4 on the embedded control plane.
func walk(w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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
	fmt.Fprintln(w, "Starting kube-apiserver, etcd, provider-kausality, function-kausality, function-patch-and-transform and the recording provider ...")
	cp, err := played.Start(ctx, root, dir)
	if err != nil {
		return err
	}
	defer cp.Stop()
	data := filepath.Join(root, "test", "e2e", "testdata")
	admin, err := cp.As("admin")
	if err != nil {
		return err
	}
	if err := create(ctx, admin, filepath.Join(data, "policies.yaml")); err != nil {
		return err
	}
	if err := controlplane.WaitForRules(ctx, admin, "databaseclaims", "xdatabases", "buckets"); err != nil {
		return err
	}
	alice, err := cp.As(played.Alice, "platform-team")
	if err != nil {
		return err
	}
	x1, err := cp.Crossplane(filepath.Join(data, "composition-1.yaml"), "xdatabases-buckets-1")
	if err != nil {
		return err
	}
	d := &demo{w: w, cp: cp, admin: admin, key: client.ObjectKey{Namespace: "team-a", Name: "orders"}}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		return err
	}

	claim := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "small"}}}
	claim.SetGroupVersionKind(played.ClaimGVK)
	claim.SetNamespace("team-a")
	claim.SetName("orders")
	claim.SetAnnotations(map[string]string{"jira": "INFRA-1"})
	if err := d.step(ctx, "S1: alice (platform-team) creates DatabaseClaim team-a/orders, size small", x1, func() error {
		return alice.Create(ctx, claim)
	}); err != nil {
		return err
	}
	if err := d.step(ctx, "S2: alice changes size to large, jira INFRA-1 on the Claim", x1, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := alice.Get(ctx, d.key, claim); err != nil {
				return err
			}
			_ = unstructured.SetNestedField(claim.Object, "large", "spec", "size")
			return alice.Update(ctx, claim)
		})
	}); err != nil {
		return err
	}
	x2, err := cp.Crossplane(filepath.Join(data, "composition-2.yaml"), "xdatabases-buckets-2")
	if err != nil {
		return err
	}
	if err := d.step(ctx, "S4: Composition revision 2 changes the data bucket's tier and drops the logs bucket; no Claim field changed", x2, func() error { return nil }); err != nil {
		return err
	}
	return d.step(ctx, "S4: an UpgradeAllowance for revision 2 lets the tier change through", x2, func() error {
		return create(ctx, admin, filepath.Join(data, "upgrade.yaml"))
	})
}

type demo struct {
	w     io.Writer
	cp    *played.ControlPlane
	admin client.Client
	key   client.ObjectKey
}

// step does one user action, lets Crossplane settle, and prints the
// buckets, their traces, the XR's verdict and the gate timeline.
func (d *demo) step(ctx context.Context, title string, x *played.Crossplane, act func() error) error {
	start := time.Now()
	fmt.Fprintf(d.w, "\n== %s\n", title)
	// Watch the gates while the step runs: admission opens a gate in the
	// same write that stamps its allowance, the gate controller closes it.
	wctx, stop := context.WithCancel(ctx)
	seen := make(chan []gateChange, 1)
	go func() { seen <- d.watchGates(wctx) }()
	err := act()
	if err == nil {
		_, err = x.Settle(ctx, d.key)
	}
	stop()
	changes := <-seen
	if err != nil {
		return err
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(played.BucketGVK.GroupVersion().WithKind("BucketList"))
	if err := d.admin.List(ctx, l, client.MatchingLabels{"crossplane.io/composite": played.XRName(d.key)}); err != nil {
		return err
	}
	names := map[string]string{}
	tw := tabwriter.NewWriter(d.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tGATE NOW\tCLOUD SAW (Create/Update/Delete)\tSIZE/TIER IN CLOUD\tTRACE")
	for _, b := range l.Items {
		res := b.GetAnnotations()["crossplane.io/composition-resource-name"]
		names[b.GetName()] = res
		g, _ := fieldpath.Pave(b.Object).GetStringArray("spec.managementPolicies")
		s, _ := d.cp.Cloud.Get(b.GetName())
		fmt.Fprintf(tw, "%s\t[%s]\t%d/%d/%d\t%d/%s\t%s\n", res, strings.Join(g, ", "),
			d.cp.Cloud.Count(recorder.VerbCreate, b.GetName()), d.cp.Cloud.Count(recorder.VerbUpdate, b.GetName()), d.cp.Cloud.Count(recorder.VerbDelete, b.GetName()),
			s.Size, s.Tags["tier"], trace(b.GetAnnotations()[v1alpha1.AnnotationTrace]))
	}
	_ = tw.Flush()

	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(played.XRGVK)
	if err := d.admin.Get(ctx, client.ObjectKey{Name: played.XRName(d.key)}, xr); err == nil {
		conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "KausalityAllowed" && m["status"] == "False" {
				fmt.Fprintf(d.w, "   XR says: %v\n", m["message"])
			}
		}
	}

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
	fmt.Fprintln(d.w, "   gate timeline:")
	tw = tabwriter.NewWriter(d.w, 0, 4, 2, ' ', 0)
	for _, c := range changes {
		fmt.Fprintf(tw, "   %s\t%s\t%s\n", c.at.Format("15:04:05.000"), names[c.bucket], c.what)
	}
	if len(changes) == 0 {
		fmt.Fprintln(tw, "   (no gate moved)")
	}
	return tw.Flush()
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
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(played.BucketGVK.GroupVersion().WithKind("BucketList"))
		if err := d.admin.List(context.Background(), l, client.MatchingLabels{"crossplane.io/composite": played.XRName(d.key)}); err == nil {
			for _, b := range l.Items {
				g, _ := fieldpath.Pave(b.Object).GetStringArray("spec.managementPolicies")
				now := "[" + strings.Join(g, ", ") + "]"
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
