package compose

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// policyUpjet is policyDB for provider-upjet-aws's Instance: spec.size may
// change its instance class.
var policyUpjet = strings.NewReplacer(
	"{apiGroup: rds.aws.crossplane.io, apiVersion: v1alpha1, resource: rdsinstances}", "{apiGroup: rds.aws.m.upbound.io, apiVersion: v1beta1, resource: instances}",
	"{external: {kind: RDSInstance}}", "{external: {kind: Instance}}",
	"{external: {provider: provider-aws, kind: RDSInstance}}", "{external: {kind: Instance}}",
).Replace(policyDB)

// xrAllowancesUpjet are xrAllowances as admission leaves them under
// policyUpjet.
var xrAllowancesUpjet = strings.NewReplacer(
	`{"apiGroup":"rds.aws.crossplane.io","apiVersion":"v1alpha1","resource":"rdsinstances"}`, `{"apiGroup":"rds.aws.m.upbound.io","apiVersion":"v1beta1","resource":"instances"}`,
	`{"external":{"kind":"RDSInstance","provider":"provider-aws"}}`, `{"external":{"kind":"Instance"}}`,
).Replace(xrAllowances)

// upjetComposed are the fields of spec.forProvider the corpus database
// Composition sets (examples/corpus/database); the provider
// late-initialized the others of testdata/upjet-instance.yaml.
var upjetComposed = []string{"region", "engine", "engineVersion", "allocatedStorage", "instanceClass", "username",
	"autoGeneratePassword", "publiclyAccessible", "skipFinalSnapshot", "backupRetentionPeriod", "dbSubnetGroupName"}

// upjetInstance is testdata/upjet-instance.yaml: the observed Instance
// (class db.t3.micro, with the function's annotations as a run at
// generation 1 left them) and the Instance as patch-and-transform desires
// it at class.
func upjetInstance(b testing.TB, class string) (observed, desired map[string]any) {
	b.Helper()
	raw, err := os.ReadFile("testdata/upjet-instance.yaml")
	if err != nil {
		b.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &observed); err != nil {
		b.Fatal(err)
	}
	spec := observed["spec"].(map[string]any)
	fp := spec["forProvider"].(map[string]any)
	composed := map[string]any{}
	for _, k := range upjetComposed {
		composed[k] = fp[k]
	}
	desired = map[string]any{
		"apiVersion": observed["apiVersion"], "kind": observed["kind"],
		"spec": map[string]any{"forProvider": composed, "writeConnectionSecretToRef": spec["writeConnectionSecretToRef"]},
	}
	// What the function recorded when it let the spec through at
	// generation 1, and what the gate approved after the provider's late
	// initialization.
	ann := observed["metadata"].(map[string]any)["annotations"].(map[string]any)
	ann[v1alpha1.AnnotationApplied] = mutation.Record("spec", desired["spec"], skipManaged).String()
	ann[v1alpha1.AnnotationApproved] = gate.SpecRecord(observed).String()
	ann[v1alpha1.AnnotationApprovedGeneration] = "1"
	ann[v1alpha1.AnnotationCompositionRevision] = "xdatabases-aws-1"
	composed["instanceClass"] = class
	return observed, desired
}

// upjetRequest is benchRequest for the Instances of provider-upjet-aws
// the corpus database Composition composes: each observed at db.t3.micro
// as the provider reports it, desired at db.t3.large, the XR's allowance
// covering the class.
func upjetRequest(b testing.TB, n int) *fnv1.RunFunctionRequest {
	b.Helper()
	observed, desired := upjetInstance(b, "db.t3.large")
	o, err := structpb.NewStruct(observed)
	if err != nil {
		b.Fatal(err)
	}
	d, err := structpb.NewStruct(desired)
	if err != nil {
		b.Fatal(err)
	}
	req := newRequest(b, xr(b, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowancesUpjet}), nil, nil, policyUpjet)
	req.Observed.Resources = map[string]*fnv1.Resource{}
	for i := range n {
		name := fmt.Sprintf("rds-%d", i)
		req.Observed.Resources[name] = &fnv1.Resource{Resource: o}
		req.Desired.Resources[name] = &fnv1.Resource{Resource: d, Ready: fnv1.Ready_READY_TRUE}
	}
	return req
}
