package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/status"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// corpusDir holds the real-world corpus: compositions written after public
// ones, composing real provider kinds (CRDs with their real facts, served
// by the recording provider), with the policies a platform team would write.
var corpusDir = filepath.Join("..", "..", "examples", "corpus")

// corpusGroup is the API group of the corpus's XRs.
const corpusGroup = "aws.platform.example.org"

// corpusCase is one composition of the corpus and what a platform team
// expects of it under Kausality.
type corpusCase struct {
	// dir is the folder under examples/corpus; kind its XR's kind.
	dir, kind string
	// resources counts the settled tree: the XR, nested XRs and managed
	// resources.
	resources int
	// change is Alice's permitted change of the XR; updates the managed
	// resources (by path) it reaches the cloud of, once each.
	change  func(xr *unstructured.Unstructured)
	updates []string
	// paced, when set, are two managed resources propagation control
	// rolls the change out to one after the other: the second takes it
	// only once the first applied it.
	paced []string
	// drift, when set, changes a managed resource in the cloud's console
	// (resource, a field of spec.forProvider, a value): the provider
	// reports it, and nothing is written back without a cause.
	drift *corpusDrift
	// added are the managed resources the change composes, created in the
	// cloud once each; the tree then counts resources+len(added).
	added []string
	// revision edits the Composition (old → new text) into a new revision
	// whose output no rule and no UpgradeAllowance covers; withheld is the
	// field the XR then names.
	revision [2]string
	withheld string
	// upgrade, when set, approves the revision with an UpgradeAllowance.
	upgrade *corpusUpgrade
	// deleted are the managed resources (by path prefix) whose cloud
	// resources deleting the XR deletes; the rest are orphaned.
	deleted []string
	// completed are the managed resources (by path) whose
	// spec.forProvider the pipeline may complete after their creation
	// call, from what a sibling reports, and when it is complete: created
	// with what was known then, they take the completed value in one
	// Update as part of the creation, which Crossplane without Kausality
	// would write too.
	completed map[string]func(forProvider map[string]any) bool
}

// corpusUpgrade is an UpgradeAllowance for a corpus case's revision 2: it
// grants Update of path on the managed kind (group, plural resource and
// kind), which reaches the cloud of updates once each.
type corpusUpgrade struct {
	group, resource, kind, path string
	updates                     []string
}

// corpusDrift is a change in the cloud's console.
type corpusDrift struct {
	resource, field string
	value           any
}

var corpusCases = []corpusCase{
	{
		dir: "network", kind: "XNetwork", resources: 7,
		change: func(xr *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(xr.Object, "cc-4711", "spec", "parameters", "costCenter")
		},
		updates:  []string{"vpc", "gateway", "subnet-a", "subnet-b", "routetable"},
		revision: [2]string{"mapPublicIpOnLaunch: true", "mapPublicIpOnLaunch: false"},
		withheld: "spec.forProvider.mapPublicIpOnLaunch",
		upgrade:  &corpusUpgrade{group: "ec2.aws.m.upbound.io", resource: "subnets", kind: "Subnet", path: "spec.forProvider.mapPublicIpOnLaunch", updates: []string{"subnet-a", "subnet-b"}},
		deleted:  []string{""},
	},
	{
		dir: "database", kind: "XSQLInstance", resources: 3,
		change: func(xr *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(xr.Object, int64(50), "spec", "parameters", "storageGB")
		},
		updates:  []string{"instance"},
		drift:    &corpusDrift{resource: "instance", field: "allocatedStorage", value: int64(999)},
		revision: [2]string{"backupRetentionPeriod: 7", "backupRetentionPeriod: 1"},
		withheld: "spec.forProvider.backupRetentionPeriod",
		upgrade:  &corpusUpgrade{group: "rds.aws.m.upbound.io", resource: "instances", kind: "Instance", path: "spec.forProvider.backupRetentionPeriod", updates: []string{"instance"}},
	},
	{
		dir: "cluster", kind: "XKubernetesCluster", resources: 7,
		change: func(xr *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(xr.Object, int64(3), "spec", "parameters", "nodes", "count")
		},
		updates:  []string{"nodepool-a", "nodepool-b"},
		paced:    []string{"nodepool-a", "nodepool-b"},
		revision: [2]string{"maxSize: 10", "maxSize: 20"},
		withheld: "spec.forProvider.scalingConfig.maxSize",
		upgrade:  &corpusUpgrade{group: "eks.aws.m.upbound.io", resource: "nodegroups", kind: "NodeGroup", path: "spec.forProvider.scalingConfig.maxSize", updates: []string{"nodepool-a", "nodepool-b"}},
		deleted:  []string{""},
	},
	{
		dir: "storage", kind: "XObjectStorage", resources: 3,
		change: func(xr *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(xr.Object, true, "spec", "parameters", "versioning")
		},
		added:    []string{"versioning"},
		revision: [2]string{"blockPublicPolicy: true", "blockPublicPolicy: false"},
		withheld: "spec.forProvider.blockPublicPolicy",
		upgrade:  &corpusUpgrade{group: "s3.aws.m.upbound.io", resource: "bucketpublicaccessblocks", kind: "BucketPublicAccessBlock", path: "spec.forProvider.blockPublicPolicy", updates: []string{"public-access-block"}},
	},
	{
		dir: "platform", kind: "XPlatform", resources: 11,
		change: func(xr *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(xr.Object, int64(40), "spec", "parameters", "database", "storageGB")
		},
		updates:  []string{"database/instance"},
		revision: [2]string{"vpcCidrBlock: 10.0.0.0/16", "vpcCidrBlock: 10.1.0.0/16"},
		withheld: "spec.parameters.vpcCidrBlock",
		// The XPlatform's deleting rules let Alice delete both XRs it
		// composed; each one's own rules decide its cloud resources.
		deleted: []string{"network/"},
		// The network reports its subnets' ids one at a time
		// (status.subnetIds[0], [1]); the database is composed once the
		// first is there, and its subnet group takes the second when the
		// second subnet reports it.
		completed: map[string]func(map[string]any) bool{"database/subnetgroup": func(p map[string]any) bool {
			ids, _ := p["subnetIds"].([]any)
			return len(ids) == 2
		}},
	},
}

var corpusOnce = sync.OnceValue(installCorpus)

// installCorpus installs every XRD, Composition and AllowancePolicy of the
// corpus, as an administrator would, and waits until the provider's
// webhooks cover the XR kinds and the managed kinds the policies name.
func installCorpus() error {
	ctx := context.Background()
	// The public pipelines' examples beside the five (app, access-keys,
	// eks) have scenarios of their own. lb-controller is not run here:
	// it composes provider-helm's Release and an XPodIdentity, which the
	// recording provider does not serve; its pattern (a value raised
	// during the creation, withheld after it) runs on real core as
	// TestV2ValueRaisedDuringCreation (testdata/v2/raised.yaml).
	var crds []string
	for _, c := range corpusCases {
		if err := cp.ApplyFile(ctx, filepath.Join(corpusDir, c.dir, "xrd.yaml")); err != nil {
			return err
		}
	}
	for _, c := range corpusCases {
		crds = append(crds, strings.ToLower(c.kind)+"s."+corpusGroup)
	}
	if err := cp.Established(ctx, 90*time.Second, crds...); err != nil {
		return err
	}
	for _, c := range corpusCases {
		for _, f := range []string{"composition.yaml", "policy.yaml"} {
			if err := cp.ApplyFile(ctx, filepath.Join(corpusDir, c.dir, f)); err != nil {
				return err
			}
		}
	}
	return controlplane.WaitForRules(ctx, cp.AdminClient(), "xnetworks", "xsqlinstances", "xkubernetesclusters", "xplatforms",
		"vpcs", "subnets", "instances", "nodegroups")
}

// TestCorpus runs every composition of the real-world corpus on real
// Crossplane under Kausality: created until every resource is Ready with
// no help, each managed resource created in the cloud exactly once; one
// permitted change reaching the cloud exactly once for each resource it
// should touch and nothing else; a new Composition revision no rule covers
// withheld with zero cloud calls; and deletion deleting in the cloud
// exactly what the policy's deleting rules permit.
func TestCorpus(t *testing.T) {
	t.Parallel()
	orphan := bobsEarlyBucket(t)
	if err := corpusOnce(); err != nil {
		t.Fatal(err)
	}
	t.Run("ungated-deletion", func(t *testing.T) {
		t.Parallel()
		bobDeletesHisEarlyBucket(t, orphan)
	})
	for _, c := range corpusCases {
		t.Run(c.dir, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

func (c corpusCase) run(t *testing.T) {
	ctx := context.Background()
	ns := "corpus-" + c.dir
	namespace(t, ns)
	gvk := schema.GroupVersionKind{Group: corpusGroup, Version: "v1alpha1", Kind: c.kind}
	compFile := filepath.Join(corpusDir, c.dir, "composition.yaml")
	// The case composes with its own copy of the Composition, so that its
	// new revision reaches no other case's XRs (the platform's children
	// use the originals).
	comp := "corpus-" + c.dir
	if err := cp.Composition(ctx, compFile, comp); err != nil {
		t.Fatal(err)
	}
	var key client.ObjectKey
	if err := controlplane.ApplyFileAs(ctx, alice(t), filepath.Join(corpusDir, c.dir, "xr.yaml"), func(u *unstructured.Unstructured) {
		u.SetNamespace(ns)
		_ = unstructured.SetNestedField(u.Object, comp, "spec", "crossplane", "compositionRef", "name")
		key = client.ObjectKeyFromObject(u)
	}); err != nil {
		t.Fatal(err)
	}
	tree := func() []controlplane.Node {
		t.Helper()
		nodes, err := cp.Tree(ctx, gvk, key)
		if err != nil {
			t.Fatal(err)
		}
		return nodes
	}
	resources := c.resources
	settled := func(what string) []controlplane.Node {
		t.Helper()
		var nodes []controlplane.Node
		fixture.Eventually(t, 3*settleTimeout, what, func() (bool, string) {
			nodes = tree()
			ok, why, err := controlplane.TreeSettled(nodes, resources)
			if err != nil {
				return false, err.Error()
			}
			return ok, why + "\n" + controlplane.DescribeTree(nodes)
		})
		return nodes
	}

	// Creation: every resource Ready, each created in the cloud once, the
	// trace of each naming Alice.
	nodes := settled("the tree to be created and Ready")
	mrs := map[string]*unstructured.Unstructured{}
	for _, n := range nodes {
		if n.Composite {
			continue
		}
		mrs[n.Path] = n.Object
		if tr := traceOf(t, n.Object); tr.Initiator() != controlplane.Alice {
			t.Errorf("%s %s trace %v starts with %q, want %s", n.Object.GetKind(), n.Path, kinds(tr), tr.Initiator(), controlplane.Alice)
		}
	}
	for p, done := range c.completed {
		mr, ok := mrs[p]
		if !ok {
			t.Fatalf("no managed resource %q in the tree", p)
		}
		fixture.Eventually(t, settleTimeout, "the pipeline to complete "+p, func() (bool, string) {
			o, err := cp.Object(ctx, mr.GroupVersionKind(), client.ObjectKeyFromObject(mr))
			if err != nil || o == nil {
				return false, fmt.Sprint(err)
			}
			mrs[p] = o
			return done(forProvider(t, o)), fmt.Sprintf("spec.forProvider %v", forProvider(t, o))
		})
	}
	want := map[string][3]int{}
	for p, mr := range mrs {
		want[p] = [3]int{1, 0, 0}
		if _, ok := c.completed[p]; ok && !createdAsSpecified(t, mr) {
			want[p] = [3]int{1, 1, 0}
		}
	}
	expectCorpusCalls(t, mrs, want)
	for p := range c.completed {
		mr := mrs[p]
		if s, _ := cp.Cloud.GetObject(mr.GetKind(), mr.GetName()); !reflect.DeepEqual(s, forProvider(t, mr)) {
			t.Errorf("%s %s in the cloud %v, want its completed spec.forProvider %v", mr.GetKind(), p, s, forProvider(t, mr))
		}
	}

	// The permitted change.
	x := &unstructured.Unstructured{}
	x.SetGroupVersionKind(gvk)
	x.SetNamespace(key.Namespace)
	x.SetName(key.Name)
	var release func()
	if c.paced != nil {
		// The cloud is slow to apply the first: the second must not take
		// the change meanwhile.
		release = cp.Cloud.Hold(mrs[c.paced[0]].GetName())
		defer release()
	}
	if err := controlplane.Update(alice(t), x, func() { c.change(x) }); err != nil {
		t.Fatalf("alice's permitted change: %v", err)
	}
	if c.paced != nil {
		fixture.Eventually(t, settleTimeout, "the XR to say propagation holds the change back", func() (bool, string) {
			xr, err := cp.Object(ctx, gvk, key)
			if err != nil || xr == nil {
				return false, fmt.Sprint(err)
			}
			cond := controlplane.Condition(xr, v1alpha1.ConditionPropagated)
			return cond.Status == "False" && strings.Contains(cond.Message, c.paced[1]), controlplane.Conditions(xr)
		})
		time.Sleep(2 * controlplane.Poll)
		if got := objectCounts(mrs[c.paced[1]]); got[1] != 0 {
			t.Errorf("%s took the change while %s's was in flight: Create/Update/Delete = %v", c.paced[1], c.paced[0], got)
		}
		// A permitted change mid-flight and a roll-out in progress, as
		// the CLI shows them.
		expectCLI(t, c.dir+"-paced", []string{"held: resource " + c.paced[1], "is false\n", "gate open for Update"}, "trace", strings.ToLower(c.kind)+"s."+corpusGroup+"/"+key.Name, "-n", key.Namespace)
		release()
	}
	for _, p := range c.updates {
		if _, ok := mrs[p]; !ok {
			t.Fatalf("no managed resource %q in the tree", p)
		}
		want[p] = [3]int{1, 1, 0}
	}
	resources += len(c.added)
	for _, n := range settled("the tree to settle after the permitted change") {
		if _, ok := mrs[n.Path]; !ok && !n.Composite {
			mrs[n.Path] = n.Object
		}
	}
	for _, p := range c.added {
		if _, ok := mrs[p]; !ok {
			t.Fatalf("the change composed no managed resource %q", p)
		}
		if tr := traceOf(t, mrs[p]); tr.Initiator() != controlplane.Alice {
			t.Errorf("%s trace %v starts with %q, want %s, whose change composed it", p, kinds(tr), tr.Initiator(), controlplane.Alice)
		}
		want[p] = [3]int{1, 0, 0}
	}
	expectCorpusCalls(t, mrs, want)

	// The unpermitted change: a new revision of the Composition.
	raw, err := os.ReadFile(compFile) //nolint:gosec // the corpus
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), c.revision[0]) {
		t.Fatalf("%s does not contain %q", compFile, c.revision[0])
	}
	revised := filepath.Join(t.TempDir(), "composition.yaml")
	if err := os.WriteFile(revised, []byte(strings.ReplaceAll(string(raw), c.revision[0], c.revision[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cp.Composition(ctx, revised, comp); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, settleTimeout, "the XR to report the withheld revision", func() (bool, string) {
		xr, err := cp.Object(ctx, gvk, key)
		if err != nil || xr == nil {
			return false, fmt.Sprint(err)
		}
		cond := controlplane.Condition(xr, "KausalityAllowed")
		return cond.Status == "False" && strings.Contains(cond.Message, c.withheld), controlplane.Conditions(xr)
	})
	expectCorpusCalls(t, mrs, want)
	c.checkTrace(t, key)

	// An administrator approves the revision: exactly its change reaches
	// the cloud, once for each resource, traced to the UpgradeAllowance.
	if u := c.upgrade; u != nil {
		ua := &v1alpha1.UpgradeAllowance{}
		if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
metadata: {name: %[1]s-2}
spec:
  compositions: [{name: %[1]s, revision: 2}]
  policies:
  - target: {apiGroup: %[2]s, apiVersion: v1beta1, resource: %[3]s}
    relation: ControllerChild
    verbs: [Update]
    mutations: [{jsonPath: %[5]s, verbs: [Mutate]}]
  - target: {external: {apiGroup: %[2]s, kind: %[4]s}}
    relation: External
    verbs: [Update]
`, comp, u.group, u.resource, u.kind, u.path)), ua); err != nil {
			t.Fatal(err)
		}
		admin := cp.AdminClient()
		if err := admin.Create(ctx, ua); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), ua) })
		for _, p := range u.updates {
			w := want[p]
			w[1]++
			want[p] = w
		}
		expectCorpusCalls(t, mrs, want)
		for _, n := range settled("the tree to settle after the upgrade") {
			if slices.Contains(u.updates, n.Path) {
				if tr := traceOf(t, n.Object); tr[0].Kind != v1alpha1.UpgradeAllowanceKind || tr[0].Name != ua.GetName() {
					t.Errorf("%s trace %v, want it to start at UpgradeAllowance %s", n.Path, kinds(tr), ua.GetName())
				}
			}
		}
	}

	// Drift: someone changes a resource in the cloud's console. The
	// provider reports what the cloud holds; the gate stays closed, so
	// nothing is written back without a cause.
	if d := c.drift; d != nil {
		mr := mrs[d.resource]
		s, ok := cp.Cloud.GetObject(mr.GetKind(), mr.GetName())
		if !ok {
			t.Fatalf("the cloud has no %s %s", mr.GetKind(), d.resource)
		}
		s[d.field] = d.value
		cp.Cloud.PutObject(mr.GetKind(), mr.GetName(), s)
		fixture.Eventually(t, settleTimeout, "the provider to report the drift", func() (bool, string) {
			o, err := cp.Object(ctx, mr.GroupVersionKind(), client.ObjectKeyFromObject(mr))
			if err != nil || o == nil {
				return false, fmt.Sprint(err)
			}
			v, _, _ := unstructured.NestedFieldNoCopy(o.Object, "status", "atProvider", d.field)
			return v == d.value, fmt.Sprintf("status.atProvider.%s = %v", d.field, v)
		})
		expectCorpusCalls(t, mrs, want)
		if s, _ := cp.Cloud.GetObject(mr.GetKind(), mr.GetName()); s[d.field] != d.value {
			t.Errorf("cloud %s of %s = %v, want the console's %v kept", d.field, d.resource, s[d.field], d.value)
		}
	}

	// Deletion, with the XR's deletion protection lifted.
	deleteProtected(t, alice(t), x)
	fixture.Eventually(t, 2*settleTimeout, "the tree to be gone", func() (bool, string) {
		for p, o := range mrs {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GroupVersionKind())
			if err := cp.AdminClient().Get(ctx, client.ObjectKeyFromObject(o), u); !kerrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s %s still there (%v): %s", o.GetKind(), p, err, controlplane.Conditions(u))
			}
		}
		return true, ""
	})
	for p := range mrs {
		w := want[p]
		for _, d := range c.deleted {
			if strings.HasPrefix(p, d) {
				w[2] = 1
			}
		}
		want[p] = w
	}
	expectCorpusCalls(t, mrs, want)
	for p, o := range mrs {
		_, exists := cp.Cloud.GetObject(o.GetKind(), o.GetName())
		if exists != (want[p][2] == 0) {
			t.Errorf("%s %s in the cloud after the deletion: %t, want %t", o.GetKind(), p, exists, want[p][2] == 0)
		}
	}
}

// createdAsSpecified reports whether the cloud resource of mr was
// created with what mr's spec.forProvider says now.
func createdAsSpecified(t *testing.T, mr *unstructured.Unstructured) bool {
	t.Helper()
	created, ok := cp.Cloud.Created(mr.GetKind(), mr.GetName())
	if !ok {
		t.Fatalf("%s %s was never created in the cloud", mr.GetKind(), mr.GetName())
	}
	return reflect.DeepEqual(created, forProvider(t, mr))
}

// forProvider is mr's spec.forProvider as JSON values.
func forProvider(t *testing.T, mr *unstructured.Unstructured) map[string]any {
	t.Helper()
	p, _, err := unstructured.NestedMap(mr.Object, "spec", "forProvider")
	if err != nil {
		t.Fatalf("%s %s: %v", mr.GetKind(), mr.GetName(), err)
	}
	return p
}

// objectCounts are a managed resource's external Create, Update and
// Delete calls.
func objectCounts(o *unstructured.Unstructured) [3]int {
	return [3]int{
		cp.Cloud.CountObject(recorder.VerbCreate, o.GetKind(), o.GetName()),
		cp.Cloud.CountObject(recorder.VerbUpdate, o.GetKind(), o.GetName()),
		cp.Cloud.CountObject(recorder.VerbDelete, o.GetKind(), o.GetName()),
	}
}

// expectCorpusCalls waits until every managed resource's cloud calls are
// as wanted (by path: Create, Update, Delete), then checks they stay so.
func expectCorpusCalls(t *testing.T, mrs map[string]*unstructured.Unstructured, want map[string][3]int) {
	t.Helper()
	fixture.Eventually(t, 2*settleTimeout, "the cloud calls", func() (bool, string) {
		for p, w := range want {
			if got := objectCounts(mrs[p]); got != w {
				return false, fmt.Sprintf("%s %s: Create/Update/Delete = %v, want %v", mrs[p].GetKind(), p, got, w)
			}
		}
		return true, ""
	})
	time.Sleep(2 * controlplane.Poll)
	for p, w := range want {
		if got := objectCounts(mrs[p]); got != w {
			t.Errorf("%s %s: external Create/Update/Delete = %v, want %v", mrs[p].GetKind(), p, got, w)
		}
	}
}

// checkTrace runs `kubectl kausality trace` and `explain` as Alice, and
// explain as a platform engineer, on the XR while its revision is withheld
// and expects what testdata/cli/<case>.txt, <case>-explain.txt and
// <case>-explain-admin.txt hold.
// Its status lists the XR with the withheld change.
func (c corpusCase) checkTrace(t *testing.T, key client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	resource := strings.ToLower(c.kind) + "s." + corpusGroup + "/" + key.Name
	expectCLI(t, c.dir, []string{"withheld"}, "trace", resource, "-n", key.Namespace)
	// Alice learns what was withheld and why; the platform engineer, who
	// may read the policies, also what would permit it.
	expectCLI(t, c.dir+"-explain", []string{"Withheld"}, "explain", resource, "-n", key.Namespace)
	expectCLIAs(t, asAdmin, c.dir+"-explain-admin", []string{"Withheld", "UpgradeAllowance"}, "explain", resource, "-n", key.Namespace)
	var out bytes.Buffer
	if err := status.Status(ctx, cp.AdminClient(), key.Namespace, printer.FormatDefault, &out); err != nil {
		t.Fatalf("kubectl kausality status: %v", err)
	}
	if !strings.Contains(out.String(), c.kind+"/"+key.Name) || !strings.Contains(out.String(), c.withheld) {
		t.Errorf("kubectl kausality status in %s names no withheld %s on %s/%s:\n%s", key.Namespace, c.withheld, c.kind, key.Name, out.String())
	}
}

var update = flag.Bool("update", false, "rewrite the golden files of kubectl kausality's output")

// bobsEarlyBucket is an S3 Bucket Bob creates, managing everything, before
// any policy restricts the kind (no corpus policy is installed yet): it is
// not gated, and the provider creates it in the cloud.
func bobsEarlyBucket(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	namespace(t, "corpus-bob")
	b := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"forProvider":        map[string]any{"region": "eu-central-1"},
		"managementPolicies": []any{"*"},
	}}}
	b.SetGroupVersionKind(schema.GroupVersionKind{Group: "s3.aws.m.upbound.io", Version: "v1beta1", Kind: "Bucket"})
	b.SetNamespace("corpus-bob")
	b.SetName("bobs-early-bucket")
	if err := as(t, controlplane.Bob).Create(context.Background(), b); err != nil {
		t.Fatalf("bob creates an S3 Bucket before any policy restricts the kind: %v", err)
	}
	if b.GetLabels()[v1alpha1.LabelGated] == "true" {
		t.Fatalf("bob's early Bucket is gated (%v): some policy restricts S3 Buckets already", b.GetLabels())
	}
	fixture.Eventually(t, settleTimeout, "bob's early Bucket in the cloud", func() (bool, string) {
		n := cp.Cloud.CountObject(recorder.VerbCreate, "Bucket", b.GetName())
		return n == 1, fmt.Sprintf("%d Creates", n)
	})
	return b
}

// bobDeletesHisEarlyBucket: the corpus's storage policy now restricts S3
// Buckets, and Bob's early one was never written since, so it is still
// ungated with managementPolicies ["*"]. Deleting it would delete the
// cloud bucket without any cause; the webhook gates it closed first, and
// the cloud bucket is orphaned.
func bobDeletesHisEarlyBucket(t *testing.T, b *unstructured.Unstructured) {
	ctx := context.Background()
	fixture.Eventually(t, settleTimeout, "the provider's webhooks to cover deleting ungated S3 Buckets", func() (bool, string) {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := cp.AdminClient().Get(ctx, client.ObjectKey{Name: policycontroller.DynamicName}, v); err != nil {
			return false, err.Error()
		}
		for _, h := range v.Webhooks {
			for _, r := range h.Rules {
				if h.Name == "restricted-deletion.managed.kausality.io" && slices.Contains(r.APIGroups, "s3.aws.m.upbound.io") && slices.Contains(r.Resources, "buckets") {
					return true, ""
				}
			}
		}
		return false, "no restricted-deletion rule for s3.aws.m.upbound.io buckets"
	})
	stored, err := cp.Object(ctx, b.GroupVersionKind(), client.ObjectKeyFromObject(b))
	if err != nil || stored == nil {
		t.Fatalf("bob's early Bucket: %v", err)
	}
	if stored.GetLabels()[v1alpha1.LabelGated] == "true" {
		t.Fatalf("bob's early Bucket was gated before its deletion: %v", stored.GetLabels())
	}
	if err := as(t, controlplane.Bob).Delete(ctx, stored); err != nil {
		t.Fatalf("bob deletes his early Bucket: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "bob's early Bucket to go", func() (bool, string) {
		o, err := cp.Object(ctx, b.GroupVersionKind(), client.ObjectKeyFromObject(b))
		return o == nil && err == nil, fmt.Sprint(err)
	})
	time.Sleep(2 * controlplane.Poll)
	if n := cp.Cloud.CountObject(recorder.VerbDelete, "Bucket", b.GetName()); n != 0 {
		t.Errorf("cloud Deletes of bob's early Bucket = %d, want 0: deleting an ungated resource of a restricted kind must orphan it", n)
	}
	if _, ok := cp.Cloud.GetObject("Bucket", b.GetName()); !ok {
		t.Errorf("the cloud bucket behind bob's early Bucket is gone")
	}
}
