package compose

import (
	"context"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	function "github.com/crossplane/function-sdk-go"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// noopServer serves the noop body over gRPC.
type noopServer struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func (noopServer) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return noop(req)
}

// cannedServer answers every request with the same response, without
// reading it: what gRPC alone costs for a request and a response of those
// sizes.
type cannedServer struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
	rsp *fnv1.RunFunctionResponse
}

func (s cannedServer) RunFunction(context.Context, *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return s.rsp, nil
}

// serveLoopback serves srv on a loopback port the way function.Serve does
// (insecure credentials, the SDK's default receive limit) and returns a
// client over a real gRPC connection to it. Both are stopped when b ends.
func serveLoopback(b *testing.B, srv fnv1.FunctionRunnerServiceServer) fnv1.FunctionRunnerServiceClient {
	b.Helper()
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("cannot listen: %v", err)
	}
	s := grpc.NewServer(
		grpc.MaxRecvMsgSize(function.DefaultMaxRecvMsgSize),
		grpc.Creds(insecure.NewCredentials()),
	)
	fnv1.RegisterFunctionRunnerServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	b.Cleanup(s.Stop)

	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(function.DefaultMaxRecvMsgSize)),
	)
	if err != nil {
		b.Fatalf("cannot dial %s: %v", lis.Addr(), err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return fnv1.NewFunctionRunnerServiceClient(conn)
}

// benchGateOpened reports whether the desired resource name of rsp has Update in
// its spec.managementPolicies.
func benchGateOpened(rsp *fnv1.RunFunctionResponse, name string) bool {
	spec := rsp.GetDesired().GetResources()[name].GetResource().GetFields()["spec"].GetStructValue()
	for _, v := range spec.GetFields()["managementPolicies"].GetListValue().GetValues() {
		if v.GetStringValue() == string(v1alpha1.VerbUpdate) {
			return true
		}
	}
	return false
}

// firstFatal returns the first fatal result of rsp, or nil.
func firstFatal(rsp *fnv1.RunFunctionResponse) *fnv1.Result {
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			return r
		}
	}
	return nil
}

// BenchmarkRunFunction_grpc measures the function as Crossplane calls it,
// over gRPC, next to a no-op function served the same way: both servers run
// on loopback in this process and get the same request through a real client
// connection, so marshalling, transport and the SDK's structpb decoding are
// in both. Report impl=kausality as a ratio of impl=noop; the absolute
// figures depend on the machine, the ratio is what Kausality costs.
//
// impl=transport answers with Kausality's own response, computed once, and
// does no work at all: the difference to impl=noop is the cost of moving
// Kausality's larger answer (the annotations DESIGN §3 puts on every
// composed resource, the gated label, spec.managementPolicies: proto's cost
// grows with their number of Struct values more than with their bytes), the
// difference to impl=kausality the cost of the function's body.
//
//	go test ./internal/compose/ -run '^$' -bench 'grpc/' -benchmem -count 6 > grpc.txt
//	benchstat -col '/impl@(noop kausality transport)' grpc.txt
func BenchmarkRunFunction_grpc(b *testing.B) {
	ctx := context.Background()
	noopClient := serveLoopback(b, noopServer{})
	kausalityClient := serveLoopback(b, newTestFunction())

	for _, sh := range benchShapes {
		for _, n := range []int{100, sh.large} {
			req := sh.request(b, n)
			canned, err := newTestFunction().RunFunction(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			transportClient := serveLoopback(b, cannedServer{rsp: canned})
			b.Run(fmt.Sprintf("shape=%s/impl=transport/n=%d", sh.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := transportClient.RunFunction(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("shape=%s/impl=noop/n=%d", sh.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					rsp, err := noopClient.RunFunction(ctx, req)
					if err != nil || len(rsp.GetDesired().GetResources()) != n {
						b.Fatalf("noop RunFunction() = %d resources, %v", len(rsp.GetDesired().GetResources()), err)
					}
				}
			})
			b.Run(fmt.Sprintf("shape=%s/impl=kausality/n=%d", sh.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					rsp, err := kausalityClient.RunFunction(ctx, req)
					if err != nil || len(rsp.GetDesired().GetResources()) != n {
						b.Fatalf("kausality RunFunction() = %d resources, %v", len(rsp.GetDesired().GetResources()), err)
					}
					if r := firstFatal(rsp); r != nil {
						b.Fatalf("kausality RunFunction() is fatal: %s", r.GetMessage())
					}
					if !benchGateOpened(rsp, fmt.Sprintf("rds-%d", n-1)) {
						b.Fatalf("kausality RunFunction() kept the gate of rds-%d closed", n-1)
					}
				}
			})
		}
	}
}
