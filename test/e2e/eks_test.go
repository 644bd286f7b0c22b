package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
)

// eksDir is an EKS cluster after upbound/configuration-aws-eks: its
// addons, access entry and node group function-sequencer holds back until
// the cluster (and then the node group) is ready.
var eksDir = filepath.Join("..", "..", "examples", "corpus", "eks")

var eksGVK = schema.GroupVersionKind{Group: "aws.platform.example.org", Version: "v1alpha1", Kind: "XEKS"}

// eksKinds are the managed kinds the EKS Composition composes.
var eksKinds = []schema.GroupVersionKind{
	{Group: "iam.aws.m.upbound.io", Version: "v1beta1", Kind: "Role"},
	{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Kind: "Cluster"},
	{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Kind: "Addon"},
	{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Kind: "AccessEntry"},
	{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Kind: "NodeGroup"},
}

func installEKS(t *testing.T) {
	t.Helper()
	installExample(t, eksDir, "xeks.aws.platform.example.org", "xeks", []string{"xeks", "roles", "clusters", "addons", "accessentries", "nodegroups"}, policy.ClassManaged, eksKinds...)
}

// TestV2SequencedEKS: the EKS-like XR under Kausality on real core, with
// function-cel-filter and function-sequencer in its pipeline. Every
// managed resource is created in the cloud once, in the sequencer's
// order: the addon and the access entry only after the cluster, the node
// group after the addon, and the last addons after the node group, each
// in the XR's creation although composed reconciles after it. Alice's
// permitted instance type change reaches the node group once; a
// Composition edit of the node group's maximum size, which no
// UpgradeAllowance covers, does not reach the cloud, and the XR says why.
func TestV2SequencedEKS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	installEKS(t)
	comp := compositionFrom(t, filepath.Join(eksDir, "composition.yaml"))
	ns := "v2-eks"
	namespace(t, ns)
	x := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"parameters": map[string]any{
		"id": "prod", "region": "eu-central-1", "version": "1.30",
		"iam":   map[string]any{"principalArn": "arn:aws:iam::123456789012:role/platform-admin"},
		"nodes": map[string]any{"count": int64(3), "instanceType": "t3.small"},
	}}}}
	x.SetGroupVersionKind(eksGVK)
	x.SetNamespace(ns)
	x.SetName("prod")
	_ = unstructured.SetNestedField(x.Object, comp, "spec", "crossplane", "compositionRef", "name")
	if err := alice(t).Create(ctx, x); err != nil {
		t.Fatalf("alice creates XEKS %s/%s: %v", ns, x.GetName(), err)
	}
	key := client.ObjectKeyFromObject(x)
	want := []string{"accessEntry", "aws-ebs-csi-driver-addon", "controlplaneRole", "eks-pod-identity-agent-addon", "kubernetesCluster", "nodeGroupPublic", "nodegroupRole", "vpc-cni-addon"}
	var mrs map[string]*unstructured.Unstructured
	fixture.Eventually(t, settleTimeout, "every managed resource to be composed and the XR Ready and created", func() (bool, string) {
		mrs = composedOf(t, key, eksKinds...)
		o, err := cp.Object(ctx, eksGVK, key)
		if err != nil || o == nil {
			return false, fmt.Sprint(err)
		}
		done := slices.Equal(slices.Sorted(maps.Keys(mrs)), want) && policy.Ready(o.Object) && policy.ConditionTrue(o.Object, v1alpha1.ConditionCreated)
		return done, fmt.Sprintf("composed %v — %s", slices.Sorted(maps.Keys(mrs)), describeXR(ctx, eksGVK, key))
	})
	created := map[string]int{}
	for i, c := range cp.Cloud.Calls() {
		if c.Verb == recorder.VerbCreate {
			if _, ok := created[c.Kind+"/"+c.Name]; !ok {
				created[c.Kind+"/"+c.Name] = i
			}
		}
	}
	order := func(res string) int {
		mr := mrs[res]
		i, ok := created[mr.GetKind()+"/"+mr.GetName()]
		if !ok {
			t.Fatalf("%s (%s %s) was never created in the cloud", res, mr.GetKind(), mr.GetName())
		}
		return i
	}
	for res, mr := range mrs {
		if n := cp.Cloud.CountObject(recorder.VerbCreate, mr.GetKind(), mr.GetName()); n != 1 {
			t.Errorf("%s: %d cloud Creates, want 1", res, n)
		}
		if tr := mr.GetAnnotations()[v1alpha1.AnnotationTrace]; !strings.Contains(tr, controlplane.Alice) {
			t.Errorf("%s trace %q does not name %s", res, tr, controlplane.Alice)
		}
	}
	for _, seq := range [][2]string{{"kubernetesCluster", "vpc-cni-addon"}, {"vpc-cni-addon", "nodeGroupPublic"}, {"nodeGroupPublic", "aws-ebs-csi-driver-addon"}, {"kubernetesCluster", "accessEntry"}} {
		if order(seq[0]) > order(seq[1]) {
			t.Errorf("%s was created in the cloud before %s", seq[1], seq[0])
		}
	}
	o, _ := cp.Object(ctx, eksGVK, key)
	if !policy.ConditionTrue(o.Object, v1alpha1.ConditionRestricted) || !policy.ConditionTrue(o.Object, v1alpha1.ConditionAllowed) {
		t.Errorf("the XR does not say every kind is restricted and every change allowed: %s", describeXR(ctx, eksGVK, key))
	}
	ng := mrs["nodeGroupPublic"].GetName()

	// Alice's permitted change reaches the node group, once.
	if err := controlplane.Update(alice(t), x, func() {
		_ = unstructured.SetNestedField(x.Object, "t3.large", "spec", "parameters", "nodes", "instanceType")
	}); err != nil {
		t.Fatalf("alice changes the instance type: %v", err)
	}
	fixture.Eventually(t, settleTimeout, "the instance type to reach the node group in the cloud", func() (bool, string) {
		s, _ := cp.Cloud.GetObject("NodeGroup", ng)
		types, _ := s["instanceTypes"].([]any)
		return len(types) == 1 && types[0] == "t3.large", fmt.Sprintf("cloud node group %v — %s", s, describeXR(ctx, eksGVK, key))
	})
	time.Sleep(2 * controlplane.Poll)
	if n := cp.Cloud.CountObject(recorder.VerbUpdate, "NodeGroup", ng); n != 1 {
		t.Errorf("node group: %d cloud Updates, want 1", n)
	}

	// A Composition edit nobody approved: the node group's maximum size.
	raw, err := os.ReadFile(filepath.Join(eksDir, "composition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), "maxSize: 100", "maxSize: 200", 1)
	if edited == string(raw) {
		t.Fatal("the Composition no longer sets the node group's maxSize to 100")
	}
	file := filepath.Join(t.TempDir(), "composition.yaml")
	if err := os.WriteFile(file, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if again := compositionFrom(t, file); again != comp {
		t.Fatalf("the edited Composition is %s, want it to replace %s", again, comp)
	}
	fixture.Eventually(t, settleTimeout, "the XR to withhold the new revision's maxSize", func() (bool, string) {
		o, err := cp.Object(ctx, eksGVK, key)
		if err != nil || o == nil {
			return false, fmt.Sprint(err)
		}
		c := policy.Condition(o.Object, v1alpha1.ConditionAllowed)
		m, _ := c["message"].(string)
		return c["status"] == "False" && strings.Contains(m, "scalingConfig.maxSize") && strings.Contains(m, "UpgradeAllowance"), describeXR(ctx, eksGVK, key)
	})
	time.Sleep(2 * controlplane.Poll)
	if n := cp.Cloud.CountObject(recorder.VerbUpdate, "NodeGroup", ng); n != 1 {
		t.Errorf("node group: %d cloud Updates after the Composition edit, want still 1", n)
	}
	if s, _ := cp.Cloud.GetObject("NodeGroup", ng); fmt.Sprint(s["scalingConfig"]) != "map[maxSize:100 minSize:1]" {
		t.Errorf("cloud node group scalingConfig = %v, want maxSize 100 kept", s["scalingConfig"])
	}
}
