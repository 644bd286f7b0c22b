package compose

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	function "github.com/crossplane/function-sdk-go"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// patchAndTransform is function-patch-and-transform as `make tools` builds
// it, the step Kausality most often follows.
var patchAndTransform = filepath.Join("..", "..", ".cache", "bin", "function-patch-and-transform")

// servePatchAndTransform runs function-patch-and-transform's own binary on
// a loopback port and returns a client to it; it stops when b ends.
func servePatchAndTransform(b *testing.B) fnv1.FunctionRunnerServiceClient {
	b.Helper()
	if _, err := os.Stat(patchAndTransform); err != nil {
		b.Fatalf("%s is missing: run `make tools` first (%v)", patchAndTransform, err)
	}
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	cmd := exec.Command(patchAndTransform, "--insecure", "--address", addr) //nolint:gosec // the benchmark's own tool
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := (&net.Dialer{Timeout: 200 * time.Millisecond}).DialContext(context.Background(), "tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("function-patch-and-transform does not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(function.DefaultMaxRecvMsgSize)),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return fnv1.NewFunctionRunnerServiceClient(conn)
}

// patchAndTransformRequest is patch-and-transform's own request for the
// composition benchRequest is the output of: the same XR and observed
// RDS instances, and an Input with a template per instance whose one
// patch maps spec.size to the instance class.
func patchAndTransformRequest(b *testing.B, n int) *fnv1.RunFunctionRequest {
	b.Helper()
	req := benchRequest(b, n)
	var in strings.Builder
	in.WriteString("apiVersion: pt.fn.crossplane.io/v1beta1\nkind: Resources\nresources:\n")
	base := indent(rds("db.t3.small", ""), "      ")
	for i := range n {
		fmt.Fprintf(&in, "- name: rds-%d\n  base:\n%s\n  patches:\n  - type: FromCompositeFieldPath\n    fromFieldPath: spec.size\n    toFieldPath: spec.forProvider.instanceClass\n    transforms:\n    - type: map\n      map: {small: db.t3.small, large: db.t3.large}\n", i, base)
	}
	req.Input = obj(b, in.String())
	req.Desired.Resources = map[string]*fnv1.Resource{}
	// Patch-and-transform asks for no required resources.
	req.RequiredResources = nil
	return req
}

// patchAndTransformUpjetRequest is patch-and-transform's own request for
// the composition upjetRequest is the output of: the corpus database
// Composition's instance template (examples/corpus/database, from
// upbound's configuration-aws-database) N times, its XR asking for the
// large class, and the Instances observed as upjetRequest observes them.
func patchAndTransformUpjetRequest(b *testing.B, n int) *fnv1.RunFunctionRequest {
	b.Helper()
	var comp struct {
		Spec struct {
			Pipeline []struct {
				Input struct {
					Resources []map[string]any `json:"resources"`
				} `json:"input"`
			} `json:"pipeline"`
		} `json:"spec"`
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "corpus", "database", "composition.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &comp); err != nil {
		b.Fatal(err)
	}
	var template map[string]any
	for _, r := range comp.Spec.Pipeline[0].Input.Resources {
		if r["name"] == "instance" {
			template = r
		}
	}
	if template == nil {
		b.Fatal("examples/corpus/database has no instance template")
	}
	resources := make([]any, n)
	for i := range n {
		t := maps.Clone(template)
		t["name"] = fmt.Sprintf("rds-%d", i)
		resources[i] = t
	}
	in, err := structpb.NewStruct(map[string]any{"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": resources})
	if err != nil {
		b.Fatal(err)
	}
	x, err := os.ReadFile(filepath.Join("..", "..", "examples", "corpus", "database", "xr.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	xrObj := obj(b, string(x)+"status: {subnetGroupName: orders-subnetgroup-4bz8m}\n").AsMap()
	xrObj["spec"].(map[string]any)["parameters"].(map[string]any)["size"] = "large"
	composite, err := structpb.NewStruct(xrObj)
	if err != nil {
		b.Fatal(err)
	}
	req := upjetRequest(b, n)
	req.Input = in
	req.Observed.Composite = &fnv1.Resource{Resource: composite}
	req.Desired.Resources = map[string]*fnv1.Resource{}
	req.RequiredResources = nil
	return req
}

// BenchmarkRunFunction_patchAndTransform measures the function beside the
// step it follows in most Compositions: function-patch-and-transform on its
// own request for the same N resources of each shape (its Input's
// templates and patches in, the composed resources out), both over gRPC on
// loopback. Report impl=kausality as a ratio of impl=patch-and-transform;
// the goal is 0.5× or less, so adding Kausality to a pipeline costs less
// than half of what the step before it does.
//
//	go test ./internal/compose/ -run '^$' -bench 'patchAndTransform' -count 6 > pat.txt
//	benchstat -col '/impl@(patch-and-transform kausality)' pat.txt
func BenchmarkRunFunction_patchAndTransform(b *testing.B) {
	ctx := context.Background()
	patClient := servePatchAndTransform(b)
	kausalityClient := serveLoopback(b, newTestFunction())
	shapes := []struct {
		benchShape
		pat func(b *testing.B, n int) *fnv1.RunFunctionRequest
	}{{benchShapes[0], patchAndTransformRequest}, {benchShapes[1], patchAndTransformUpjetRequest}}
	for _, sh := range shapes {
		for _, n := range []int{100, sh.large} {
			pat := sh.pat(b, n)
			req := sh.request(b, n)
			b.Run(fmt.Sprintf("shape=%s/impl=patch-and-transform/n=%d", sh.name, n), func(b *testing.B) {
				for b.Loop() {
					rsp, err := patClient.RunFunction(ctx, pat)
					if err != nil || len(rsp.GetDesired().GetResources()) != n {
						b.Fatalf("patch-and-transform RunFunction() = %d resources, %v %v", len(rsp.GetDesired().GetResources()), err, rsp.GetResults())
					}
					class := rsp.GetDesired().GetResources()["rds-0"].GetResource().GetFields()["spec"].GetStructValue().GetFields()["forProvider"].GetStructValue().GetFields()["instanceClass"].GetStringValue()
					if class != "db.t3.large" {
						b.Fatalf("patch-and-transform composed instance class %q, want db.t3.large", class)
					}
				}
			})
			b.Run(fmt.Sprintf("shape=%s/impl=kausality/n=%d", sh.name, n), func(b *testing.B) {
				for b.Loop() {
					rsp, err := kausalityClient.RunFunction(ctx, req)
					if err != nil || len(rsp.GetDesired().GetResources()) != n {
						b.Fatalf("kausality RunFunction() = %d resources, %v", len(rsp.GetDesired().GetResources()), err)
					}
					if !benchGateOpened(rsp, fmt.Sprintf("rds-%d", n-1)) {
						b.Fatalf("kausality RunFunction() kept the gate of rds-%d closed", n-1)
					}
				}
			})
		}
	}
}
