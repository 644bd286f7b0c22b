package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

var (
	bobSeed   = flag.Uint64("bob.seed", 0, "the seed of TestRandomizedBob (0: one from the clock, printed)")
	bobRounds = flag.Int("bob.rounds", 30, "how many rounds TestRandomizedBob plays (make soak-bob plays more)")
)

// bobGame is one game of TestRandomizedBob: Bob's random writes within his
// RBAC to Alice's XStore, its Buckets and a production XStore's, Alice's
// permitted changes in between, and what the oracle allows the cloud to
// see.
type bobGame struct {
	t        *testing.T
	shape    bobShape
	rng      *rand.Rand
	bob      client.Client
	shop     client.ObjectKey
	prod     client.ObjectKey
	buckets  map[string]*unstructured.Unstructured // shop's and prod's, by "shop/data" etc.
	victims  []string                              // external names of the production buckets
	composed map[string]bool                       // external names Crossplane composed: their Create is caused
	// sizes are the data bucket sizes Alice's changes caused, in order.
	sizes   []int64
	updates int // how many of Alice's changes reach the data bucket
	// deletedData: Bob's deletion of Alice's data bucket was admitted.
	deletedData bool
	// detached: a write of Bob's that parts the shop from its XR (a
	// repointed Claim) was admitted.
	detached bool
	log      []string
}

// bobShape is what differs between the shapes the game is played in:
// Crossplane v2's (an XStore in Alice's namespace composing namespaced
// Buckets) and the legacy one (a DatabaseClaim in her namespace, its
// cluster-scoped XDatabase composing cluster-scoped Buckets, which Bob's
// provider edit role reaches cluster-wide).
type bobShape struct {
	name      string
	rootGVK   schema.GroupVersionKind // what Alice and Bob write for the shop
	bucketGVK schema.GroupVersionKind
	// namespaced: the Buckets live in the root's namespace.
	namespaced bool
	create     func(t *testing.T, ns, name string) client.ObjectKey
	buckets    func(t *testing.T, key client.ObjectKey) map[string]*unstructured.Unstructured
	describe   func(ctx context.Context, key client.ObjectKey) string
	// xr is the composite Crossplane composes the shop's Buckets from.
	xr func(ctx context.Context, key client.ObjectKey) *unstructured.Unstructured
}

var (
	bobV2 = bobShape{
		name: "XStore", rootGVK: controlplane.StoreGVK, bucketGVK: controlplane.MBucketGVK, namespaced: true,
		create: func(t *testing.T, ns, name string) client.ObjectKey {
			return createdStore(t, compositionFrom(t, filepath.Join(v2Dir, "composition.yaml")), ns, name)
		},
		buckets:  storeBuckets,
		describe: func(ctx context.Context, key client.ObjectKey) string { return cp.DescribeStore(ctx, key) },
		xr: func(ctx context.Context, key client.ObjectKey) *unstructured.Unstructured {
			x, _ := cp.Object(ctx, controlplane.StoreGVK, key)
			return x
		},
	}
	bobLegacy = bobShape{
		name: "DatabaseClaim", rootGVK: controlplane.ClaimGVK, bucketGVK: controlplane.BucketGVK,
		create: func(t *testing.T, ns, name string) client.ObjectKey {
			return created(t, composition(t, 1), ns, name)
		},
		buckets:  buckets,
		describe: func(ctx context.Context, key client.ObjectKey) string { return cp.Describe(ctx, key) },
		xr: func(ctx context.Context, key client.ObjectKey) *unstructured.Unstructured {
			x, _ := cp.XR(ctx, key)
			return x
		},
	}
)

// TestRandomizedBob: Bob, with the RBAC a real install gives him, makes
// random writes (metadata, labels, annotations, spec fields, status,
// creations, deletions, pauses) to Alice's XStore, its Buckets and a
// production XStore's Buckets in their namespace, interleaved with Alice's
// permitted resizes and Crossplane's reconciles. After every round an
// oracle checks every cloud call made so far against a cause: a creation
// Crossplane composed, an Update of the data bucket to a size Alice set.
// A violation fails with the seed and the rounds up to it (the shortest
// prefix that shows it); -bob.seed replays a game, -bob.rounds lengthens
// it (make soak-bob).
func TestRandomizedBob(t *testing.T) {
	t.Parallel()
	playBob(t, bobV2, "v2-random-bob")
}

// TestRandomizedBobLegacy is the same game in the legacy shape: Alice's
// DatabaseClaim and a production Claim in their namespace, whose
// cluster-scoped XDatabases Bob may not write, and whose cluster-scoped
// Buckets he may (the provider's edit role, bound cluster-wide). Bob also
// repoints the Claim's spec.resourceRef (at a name no XR has, or at the
// production XR) and its compositionRef.
func TestRandomizedBobLegacy(t *testing.T) {
	t.Parallel()
	playBob(t, bobLegacy, "legacy-random-bob")
}

func playBob(t *testing.T, shape bobShape, ns string) {
	seed := *bobSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("%s seed %d (replay: go test ./test/e2e -run %s -bob.seed %d -bob.rounds %d)", t.Name(), seed, t.Name(), seed, *bobRounds)
	ctx := context.Background()
	prod := shape.create(t, ns, "prod")
	shop := shape.create(t, ns, "shop")
	g := &bobGame{t: t, shape: shape, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), bob: as(t, controlplane.Bob), shop: shop, prod: prod,
		buckets: map[string]*unstructured.Unstructured{}, composed: map[string]bool{}, sizes: []int64{1}}
	for xr, key := range map[string]client.ObjectKey{"shop": shop, "prod": prod} {
		for res, b := range shape.buckets(t, key) {
			g.buckets[xr+"/"+res] = b
			g.composed[b.GetName()] = true
			if xr == "prod" {
				g.victims = append(g.victims, b.GetName())
			}
		}
	}
	slices.Sort(g.victims)
	size := "small"
	for round := 1; round <= *bobRounds; round++ {
		if g.rng.IntN(4) == 0 {
			size = map[string]string{"small": "large", "large": "small"}[size]
			g.alice(size)
		}
		g.play(ctx)
		time.Sleep(time.Duration(200+g.rng.IntN(600)) * time.Millisecond)
		if v := g.violation(); v != "" {
			t.Fatalf("seed %d, round %d: %s\nthe rounds up to it:\n%s", seed, round, v, strings.Join(g.log, "\n"))
		}
	}
	// Bob's last pause and freezes lifted, the game settles: Alice's last size has
	// reached the cloud, and nothing uncaused did meanwhile. Unless Bob
	// deleted her data bucket: that orphans the cloud bucket, and
	// composing it again is a creation no cause covers, withheld until
	// one does; then only the oracle is asked. The same when a write of
	// Bob's left the shop apart from its XR (a repointed Claim): Alice's
	// size then reaches nothing, which is safe.
	g.release(ctx)
	if g.deletedData || g.detached {
		time.Sleep(settleTimeout / 9)
		if v := g.violation(); v != "" {
			t.Fatalf("seed %d, settling: %s\nthe rounds:\n%s", seed, v, strings.Join(g.log, "\n"))
		}
		t.Logf("seed %d: %d rounds, %d of Bob's writes admitted (his deletion of the data bucket or repointing of the Claim among them):\n%s", seed, *bobRounds, g.admitted(), strings.Join(g.log, "\n"))
		return
	}
	want := map[string]int64{"small": 1, "large": 2}[size]
	deadline := time.Now().Add(settleTimeout)
	for {
		s, _ := cp.Cloud.Get(g.buckets["shop/data"].GetName())
		if v := g.violation(); v != "" {
			t.Fatalf("seed %d, settling: %s\nthe rounds:\n%s", seed, v, strings.Join(g.log, "\n"))
		}
		if s.Size == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: the data bucket's cloud size is %d, want Alice's last size %d — %s\nthe rounds:\n%s", seed, s.Size, want, shape.describe(ctx, shop), strings.Join(g.log, "\n"))
		}
		time.Sleep(controlplane.Poll)
	}
	t.Logf("seed %d: %d rounds, %d of Bob's writes admitted, Alice changed the size %d times:\n%s", seed, *bobRounds, g.admitted(), len(g.sizes)-1, strings.Join(g.log, "\n"))
}

// root is the shop's XStore or Claim, to write.
func (g *bobGame) root() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(g.shape.rootGVK)
	u.SetNamespace(g.shop.Namespace)
	u.SetName(g.shop.Name)
	return u
}

// alice resizes the shop, a change her policy permits.
func (g *bobGame) alice(size string) {
	x := g.root()
	err := controlplane.Update(alice(g.t), x, func() { _ = unstructured.SetNestedField(x.Object, size, "spec", "size") })
	g.log = append(g.log, fmt.Sprintf("alice resizes shop to %s: %v", size, errText(err)))
	if err == nil {
		g.sizes = append(g.sizes, map[string]int64{"small": 1, "large": 2}[size])
		g.updates++
	}
}

// release lifts, as Alice would, a pause or freeze Bob left on the shop or
// its Buckets. Anyone may freeze, which holds her changes
// without losing them; she may lift it, as a subject her policy lets
// initiate changes, and her last size must then reach the cloud.
func (g *bobGame) release(ctx context.Context) {
	x := g.root()
	err := controlplane.Update(alice(g.t), x, func() {
		ann := x.GetAnnotations()
		delete(ann, "crossplane.io/paused")
		delete(ann, "kausality.io/freeze")
		x.SetAnnotations(ann)
	})
	if err != nil {
		g.t.Fatalf("alice lifts Bob's pause and freeze of the %s shop: %v", g.shape.name, err)
	}
	for _, res := range []string{"data", "logs"} {
		b := &unstructured.Unstructured{}
		b.SetGroupVersionKind(g.shape.bucketGVK)
		if err := cp.AdminClient().Get(ctx, client.ObjectKeyFromObject(g.buckets["shop/"+res]), b); err != nil {
			continue
		}
		_, frozen := b.GetAnnotations()["kausality.io/freeze"]
		_, paused := b.GetAnnotations()["crossplane.io/paused"]
		if !frozen && !paused {
			continue
		}
		err := controlplane.Update(alice(g.t), b, func() {
			ann := b.GetAnnotations()
			delete(ann, "kausality.io/freeze")
			delete(ann, "crossplane.io/paused")
			b.SetAnnotations(ann)
		})
		if err != nil {
			g.t.Fatalf("alice lifts the freeze and pause Bob set on Bucket shop/%s: %v", res, err)
		}
		g.log = append(g.log, fmt.Sprintf("alice lifts the freeze and pause on Bucket shop/%s", res))
	}
}

// bobMoves are what Bob may try, each on a target drawn at random, with
// how often he tries it: most often the metadata Crossplane and the
// providers act on.
var bobMoves = []struct {
	move   string
	weight int
}{
	{"annotate", 4}, {"create", 2}, {"resize", 1}, {"tier", 1}, {"label", 1}, {"bucket-spec", 1},
	{"manage-all", 1}, {"provider-config", 1}, {"status", 1}, {"delete", 1}, {"unpause", 1},
	{"repoint", 1}, {"switch-composition", 1},
}

// pick draws one of choices, each as often as its weight says.
func pick[T any](rng *rand.Rand, choices []T, weight func(T) int) T {
	total := 0
	for _, c := range choices {
		total += weight(c)
	}
	n := rng.IntN(total)
	for _, c := range choices {
		if n -= weight(c); n < 0 {
			return c
		}
	}
	return choices[len(choices)-1]
}

// play makes one of Bob's moves and logs it with what the API server said.
func (g *bobGame) play(ctx context.Context) {
	move := pick(g.rng, bobMoves, func(m struct {
		move   string
		weight int
	}) int {
		return m.weight
	}).move
	var what string
	var err error
	switch move {
	case "resize", "tier":
		x := g.root()
		field, value := "size", []string{"small", "large"}[g.rng.IntN(2)]
		if move == "tier" {
			field, value = "tier", []string{"standard", "gold", "archive"}[g.rng.IntN(3)]
		}
		what = fmt.Sprintf("sets %s shop spec.%s=%s", g.shape.name, field, value)
		err = controlplane.Update(g.bob, x, func() { _ = unstructured.SetNestedField(x.Object, value, "spec", field) })
	case "repoint", "switch-composition":
		// What binds the shop to its composite, and which Composition
		// composes it: only Crossplane (or a rule) changes them.
		x := g.root()
		what, err = g.rebind(x, move)
		// Admitted, it would part the shop from what Alice's changes reach.
		g.detached = g.detached || err == nil
	case "annotate", "label":
		key, value := g.metadata(move)
		o, name := g.target()
		what = fmt.Sprintf("sets %s %s[%s]=%q", name, move, key, value)
		err = controlplane.Update(g.bob, o, func() {
			if move == "label" {
				l := o.GetLabels()
				if l == nil {
					l = map[string]string{}
				}
				l[key] = value
				o.SetLabels(l)
				return
			}
			a := o.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[key] = value
			o.SetAnnotations(a)
		})
	case "unpause":
		o, name := g.target()
		what = fmt.Sprintf("removes crossplane.io/paused from %s", name)
		err = controlplane.Update(g.bob, o, func() {
			a := o.GetAnnotations()
			delete(a, "crossplane.io/paused")
			o.SetAnnotations(a)
		})
	case "bucket-spec", "manage-all", "provider-config":
		name := g.bucketName()
		b := g.buckets[name].DeepCopy()
		what = fmt.Sprintf("%s on Bucket %s", move, name)
		err = controlplane.Update(g.bob, b, func() {
			switch move {
			case "bucket-spec":
				_ = unstructured.SetNestedField(b.Object, int64(1+g.rng.IntN(9)), "spec", "forProvider", "size")
			case "manage-all":
				_ = unstructured.SetNestedStringSlice(b.Object, []string{"*"}, "spec", "managementPolicies")
			default:
				_ = unstructured.SetNestedMap(b.Object, map[string]any{"kind": "ProviderConfig", "name": "bobs"}, "spec", "providerConfigRef")
			}
		})
	case "status":
		o, name := g.target()
		what = fmt.Sprintf("clears the conditions of %s through /status", name)
		err = controlplane.UpdateStatus(g.bob, o, func() { unstructured.RemoveNestedField(o.Object, "status", "conditions") })
	case "create":
		b := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": map[string]any{"size": int64(9), "region": "eu"}}}}
		b.SetGroupVersionKind(g.shape.bucketGVK)
		if g.shape.namespaced {
			b.SetNamespace(g.shop.Namespace)
		}
		b.SetName(fmt.Sprintf("bob-%d", g.rng.IntN(1_000_000)))
		ann := map[string]string{"crossplane.io/external-name": g.victims[g.rng.IntN(len(g.victims))]}
		if g.rng.IntN(2) == 0 {
			ann["crossplane.io/composition-resource-name"] = []string{"data", "logs"}[g.rng.IntN(2)]
		}
		b.SetAnnotations(ann)
		if g.rng.IntN(2) == 0 {
			if x := g.shape.xr(ctx, g.shop); x != nil {
				b.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(x, x.GroupVersionKind())})
			}
		}
		what = fmt.Sprintf("creates Bucket %s with %v, controlled: %t", b.GetName(), ann, len(b.GetOwnerReferences()) > 0)
		err = g.bob.Create(ctx, b)
	case "delete":
		name := g.bucketName()
		what = fmt.Sprintf("deletes Bucket %s", name)
		err = g.bob.Delete(ctx, g.buckets[name].DeepCopy())
		g.deletedData = g.deletedData || (err == nil && name == "shop/data")
	}
	g.log = append(g.log, fmt.Sprintf("bob %s: %s", what, errText(err)))
}

// target is a random one of the shop (XStore or Claim) and the Buckets,
// as Bob would read it now.
func (g *bobGame) target() (*unstructured.Unstructured, string) {
	if g.rng.IntN(3) == 0 {
		x, _ := cp.Object(context.Background(), g.shape.rootGVK, g.shop)
		if x == nil {
			x = g.root()
		}
		return x, g.shape.name + " shop"
	}
	name := g.bucketName()
	b := &unstructured.Unstructured{}
	b.SetGroupVersionKind(g.shape.bucketGVK)
	_ = cp.AdminClient().Get(context.Background(), client.ObjectKeyFromObject(g.buckets[name]), b)
	if b.GetName() == "" {
		b = g.buckets[name].DeepCopy()
	}
	return b, "Bucket " + name
}

// bucketName is one of the Buckets, Alice's data bucket (which her
// changes reach) half the time.
func (g *bobGame) bucketName() string {
	if g.rng.IntN(2) == 0 {
		return "shop/data"
	}
	names := []string{"shop/logs", "prod/data", "prod/logs"}
	return names[g.rng.IntN(len(names))]
}

// rebind repoints x (move "repoint": a Claim's spec.resourceRef at a name
// no XR has or at the production XR; an XStore's resource references at a
// production Bucket) or switches its Composition, as Bob.
func (g *bobGame) rebind(x *unstructured.Unstructured, move string) (string, error) {
	var path []string
	var value any
	switch {
	case move == "switch-composition" && g.shape.namespaced:
		path, value = []string{"spec", "crossplane", "compositionRef", "name"}, "bobs-composition"
	case move == "switch-composition":
		path, value = []string{"spec", "compositionRef", "name"}, "bobs-composition"
	case g.shape.namespaced:
		victim := g.buckets["prod/"+[]string{"data", "logs"}[g.rng.IntN(2)]]
		path, value = []string{"spec", "crossplane", "resourceRefs"}, []any{map[string]any{"apiVersion": g.shape.bucketGVK.GroupVersion().String(), "kind": "Bucket", "name": victim.GetName()}}
	default:
		name := []string{g.ghost(), g.xrName(g.prod)}[g.rng.IntN(2)]
		path, value = []string{"spec", "resourceRef"}, map[string]any{"apiVersion": controlplane.XRGVK.GroupVersion().String(), "kind": controlplane.XRGVK.Kind, "name": name}
	}
	err := controlplane.Update(g.bob, x, func() { _ = unstructured.SetNestedField(x.Object, value, path...) })
	return fmt.Sprintf("sets %s shop %s=%v", g.shape.name, strings.Join(path, "."), value), err
}

// xrName is the name of the composite of key's XStore or Claim.
func (g *bobGame) xrName(key client.ObjectKey) string {
	if x := g.shape.xr(context.Background(), key); x != nil {
		return x.GetName()
	}
	return "none"
}

// metadata is a key and value Bob writes: one Crossplane or Kausality acts
// on, or one nobody reads.
func (g *bobGame) metadata(kind string) (string, string) {
	if kind == "label" {
		keys := []string{"crossplane.io/composite", "crossplane.io/claim-name", "kausality.io/gated", "team"}
		return keys[g.rng.IntN(len(keys))], []string{"prod", "", "true", "false"}[g.rng.IntN(4)]
	}
	victim := g.victims[g.rng.IntN(len(g.victims))]
	pairs := [][2]string{
		{"crossplane.io/paused", "true"},
		{"crossplane.io/external-name", victim},
		{"crossplane.io/composition-resource-name", []string{"data", "logs"}[g.rng.IntN(2)]},
		{"kausality.io/allowances", `[{"relation":"External","target":{"external":{"apiGroup":"` + g.shape.bucketGVK.Group + `","kind":"Bucket"}},"verbs":["*"],"generation":99}]`},
		{"kausality.io/trace-ticket", "BOB-1"},
		{"kausality.io/freeze", "bob"},
		{"kausality.io/allow-delete", "true"},
		{"example.org/note", "hello"},
	}
	// The keys Crossplane and the providers act on, three times as often.
	p := pairs[g.rng.IntN(len(pairs))]
	if g.rng.IntN(4) > 0 {
		p = pairs[g.rng.IntN(4)]
	}
	return p[0], p[1]
}

// violation is the first cloud call so far that no cause covers, or "".
func (g *bobGame) violation() string {
	creates := map[string]int{}
	updates := 0
	data := g.buckets["shop/data"].GetName()
	for _, c := range cp.Cloud.Calls() {
		if c.Kind != "" || !g.ours(c.Name) {
			continue
		}
		switch c.Verb {
		case recorder.VerbCreate:
			creates[c.Name]++
			if !g.composed[c.Name] || creates[c.Name] > 1 {
				return fmt.Sprintf("cloud Create of bucket %s (size %d), which Crossplane did not compose or created already", c.Name, c.Size)
			}
		case recorder.VerbUpdate:
			updates++
			if c.Name != data || !slices.Contains(g.sizes, c.Size) {
				return fmt.Sprintf("cloud Update of bucket %s to size %d: Alice set only the data bucket's sizes %v", c.Name, c.Size, g.sizes)
			}
			if updates > g.updates {
				return fmt.Sprintf("cloud Update %d of the data bucket, after only %d changes of Alice's", updates, g.updates)
			}
		case recorder.VerbDelete:
			return fmt.Sprintf("cloud Delete of bucket %s", c.Name)
		}
	}
	return ""
}

// ours reports whether a bucket name belongs to this game: the composed
// buckets, whatever Bob's creations point at, and what an XR of the
// ghost name would compose.
func (g *bobGame) ours(name string) bool {
	return g.composed[name] || strings.HasPrefix(name, "bob-") || strings.HasPrefix(name, g.ghost()+"-")
}

// ghost is the name of no XR that Bob points the shop's Claim at: were it
// admitted, Crossplane would create an XR of that name.
func (g *bobGame) ghost() string { return g.shop.Namespace + "-ghost" }

func (g *bobGame) admitted() int {
	n := 0
	for _, l := range g.log {
		if strings.HasPrefix(l, "bob ") && strings.HasSuffix(l, ": admitted") {
			n++
		}
	}
	return n
}

func errText(err error) string {
	if err == nil {
		return "admitted"
	}
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
