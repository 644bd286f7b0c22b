package compose

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/rollout"
)

// benchRequest is an XR with an unconsumed spec.size allowance composing n
// RDS instances, each observed at db.t3.small and desired at db.t3.large:
// every resource has one mutation to let through and a gate to open.
func benchRequest(b testing.TB, n int) *fnv1.RunFunctionRequest {
	b.Helper()
	// As a resource carries them once created: what was let through, and
	// the spec its gate approved (the same, at generation 1).
	observedAnn := map[string]string{v1alpha1.AnnotationApplied: appliedFor(b, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(b, "db.t3.small"), v1alpha1.AnnotationApprovedGeneration: "1"}
	req := newRequest(b, xr(b, 2, 1, map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}), nil, nil, policyDB)
	req.Observed.Resources = map[string]*fnv1.Resource{}
	for i := range n {
		name := fmt.Sprintf("rds-%d", i)
		req.Observed.Resources[name] = &fnv1.Resource{Resource: observedRDS(b, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]")}
		req.Desired.Resources[name] = &fnv1.Resource{Resource: obj(b, rds("db.t3.large", "")), Ready: fnv1.Ready_READY_TRUE}
	}
	return req
}

// noop is the body of a function that changes nothing but, like every
// function built on the SDK template, decodes the observed XR and the
// observed and desired composed resources and writes the desired ones back.
func noop(req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	if _, err := request.GetObservedCompositeResource(req); err != nil {
		return nil, err
	}
	if _, err := request.GetObservedComposedResources(req); err != nil {
		return nil, err
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return nil, err
	}
	return rsp, response.SetDesiredComposedResources(rsp, desired)
}

// benchRun runs RunFunction on req, which must answer n resources.
func benchRun(b *testing.B, req *fnv1.RunFunctionRequest, n int) {
	f := newTestFunction()
	b.ReportAllocs()
	for b.Loop() {
		rsp, err := f.RunFunction(context.Background(), req)
		if err != nil || len(rsp.GetDesired().GetResources()) != n {
			b.Fatalf("RunFunction() = %d resources, %v", len(rsp.GetDesired().GetResources()), err)
		}
	}
}

// A benchShape is a kind of composed resource the benchmarks compose N
// of.
type benchShape struct {
	name    string
	request func(b testing.TB, n int) *fnv1.RunFunctionRequest
	// large is the larger N the gRPC benchmarks compose: 1000, or for a
	// shape whose request at 1000 exceeds the 4 MiB a function receives
	// (function.DefaultMaxRecvMsgSize), so that no XR could compose that
	// many, the most that fit.
	large int
}

// benchShapes are the benchmarks' composed resources: rdsinstance, the
// smallest gated resource there is (two spec fields, no status), where
// what Kausality adds to every resource weighs most against the request;
// and upjet, provider-upjet-aws's Instance as the corpus database
// Composition composes it and the provider reports it (upjetRequest), about
// 10 KB of request each.
var benchShapes = []benchShape{{"rdsinstance", benchRequest, 1000}, {"upjet", upjetRequest, 300}}

// BenchmarkRunFunction measures RunFunction at 10, 100 and the shape's
// large number of composed resources of each shape next to a no-op function body on the same
// request. Report impl=kausality as a ratio of impl=noop (make bench has
// benchstat print it).
func BenchmarkRunFunction(b *testing.B) {
	for _, sh := range benchShapes {
		for _, n := range []int{10, 100, sh.large} {
			req := sh.request(b, n)
			b.Run(fmt.Sprintf("shape=%s/impl=noop/n=%d", sh.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					rsp, err := noop(req)
					if err != nil || len(rsp.GetDesired().GetResources()) != n {
						b.Fatalf("noop() = %d resources, %v", len(rsp.GetDesired().GetResources()), err)
					}
				}
			})
			b.Run(fmt.Sprintf("shape=%s/impl=kausality/n=%d", sh.name, n), func(b *testing.B) { benchRun(b, req, n) })
		}
	}
}

// BenchmarkPropagation measures RunFunction on the request of
// BenchmarkRunFunction at 100 resources with and without a collection of
// all of them under the default exponentiallyUpdated: report propagated as
// a ratio of plain. With no resource updated yet, the first is let through
// and the other 99 are held with pending allowances.
func BenchmarkPropagation(b *testing.B) {
	const n = 100
	plain := benchRequest(b, n)
	propagated := benchRequest(b, n)
	propagated.Input = obj(b, "apiVersion: kausality.fn.crossplane.io/v1beta1\nkind: Input\npropagation:\n  collections:\n  - {name: instances, matchResourceName: 'rds-*'}\n")
	for name, req := range map[string]*fnv1.RunFunctionRequest{"plain": plain, "propagated": propagated} {
		b.Run(fmt.Sprintf("impl=%s/n=%d", name, n), func(b *testing.B) { benchRun(b, req, n) })
	}
	// The propagated request really holds: one let through, the rest held.
	rsp, _ := newTestFunction().RunFunction(context.Background(), propagated)
	open := 0
	for _, r := range rsp.GetDesired().GetResources() {
		if strings.Contains(fmt.Sprint(r.GetResource().AsMap()["spec"]), "Update") {
			open++
		}
	}
	if open != 1 {
		b.Fatalf("propagated: %d gates open, want 1", open)
	}
}

// fleetRequest is XR db-0 of a fleet of xrs XRs of one Composition revision,
// each composing perXR RDS instances, while a Function upgrade rolls out
// across them (an UpgradeAllowance with rollout: {}). The provider counted
// the fleet: half of it applied the upgrade, and db-0 has its turn
// (kausality.io/rollout-turns), so it takes the upgrade up. Nothing of the
// fleet but its counts is in the request.
func fleetRequest(b *testing.B, xrs, perXR int) *fnv1.RunFunctionRequest {
	b.Helper()
	next := map[string]string{"function-patch-and-transform": ptPackage + ":v0.10.8"}
	key := (&run{loaded: loaded{revision: "xdatabases-aws-1", functions: logic.FormatFunctions(next)}}).logicKey()
	m := xr(b, 1, 1, nil).AsMap()
	m["metadata"].(map[string]any)["name"] = "db-0"
	m["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.AnnotationRolloutTurns: rollout.Turns{{Upgrade: "pt-0-10", Generation: 3, Logic: key}}.Format()}
	m["status"].(map[string]any)["conditions"] = []any{m["status"].(map[string]any)["conditions"].([]any)[0],
		map[string]any{"type": v1alpha1.ConditionCreated, "status": "True", "reason": ReasonCreated},
		map[string]any{"type": "Ready", "status": "True", "reason": "Available"}}
	composite, err := structpb.NewStruct(m)
	if err != nil {
		b.Fatal(err)
	}
	observedAnn := map[string]string{
		v1alpha1.AnnotationApplied: appliedFor(b, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		v1alpha1.AnnotationApproved: appliedFor(b, "db.t3.small"), v1alpha1.AnnotationApprovedGeneration: "1",
		v1alpha1.AnnotationFunctionVersions: `{"function-patch-and-transform":"` + ptPackage + `:v0.10.7"}`,
	}
	req := newRequest(b, composite, nil, nil, policyDB)
	req.Observed.Resources = map[string]*fnv1.Resource{}
	for i := range perXR {
		name := fmt.Sprintf("rds-%d", i)
		req.Observed.Resources[name] = &fnv1.Resource{Resource: observedRDS(b, "db.t3.small", 1, 1, observedAnn, "[Observe, LateInitialize]")}
		req.Desired.Resources[name] = &fnv1.Resource{Resource: obj(b, rds("db.t3.large", "")), Ready: fnv1.Ready_READY_TRUE}
	}
	status := fmt.Sprintf("status: {rollout: {composites: %d, updated: %d, turns: %d}}\n", xrs, xrs/2, xrs)
	req.RequiredResources[RequirementUpgrades].Items = []*fnv1.Resource{{Resource: obj(b, ptUpgrade+"  rollout: {}\n"+status)}}
	withFunctions(b, req, next)
	return req
}

// annotationBytes is the mean size of the kausality.io annotations of rs.
func annotationBytes(rs map[string]*fnv1.Resource) float64 {
	total := 0.0
	for _, r := range rs {
		total += kausalityBytes(r.GetResource().AsMap())
	}
	return total / float64(max(len(rs), 1))
}

// kausalityBytes is the size of an object's kausality.io annotations,
// keys and values.
func kausalityBytes(o map[string]any) float64 {
	md, _ := o["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	n := 0
	for k, v := range ann {
		if s, ok := v.(string); ok && strings.HasPrefix(k, "kausality.io/") {
			n += len(k) + len(s)
		}
	}
	return float64(n)
}

// BenchmarkRunFunctionFleet measures the function's time and request size
// for one XR of ten composed resources while an upgrade rolls out across a
// fleet of 50, 500 and 5,000 XRs, next to the no-op function on the same
// request: how the cost per XR grows with the fleet (make bench-scale
// reads the ratio of fleet=5000 to fleet=50). It reports the bytes of
// kausality.io annotations a composed resource carries at rest and during
// the change (test/e2e's TestV2FleetRollOut reports them on real core).
func BenchmarkRunFunctionFleet(b *testing.B) {
	const perXR = 10
	for _, xrs := range []int{50, 500, 5000} {
		req := fleetRequest(b, xrs, perXR)
		size := float64(proto.Size(req))
		// It takes the upgrade up: the benchmark measures a run that lets
		// the roll-out's change through, not one turned away early.
		rsp, err := newTestFunction().RunFunction(context.Background(), req)
		if err != nil || !strings.Contains(rsp.String(), "db.t3.large") {
			b.Fatalf("db-0 of %d does not take the upgrade up: %v\n%s", xrs, err, rsp)
		}
		// The bytes of kausality.io annotations each composed resource
		// carries at rest (observed, the last change applied) and during
		// the change (desired, the gate open), and the XR's.
		atRest, during := annotationBytes(req.GetObserved().GetResources()), annotationBytes(rsp.GetDesired().GetResources())
		b.Run(fmt.Sprintf("fleet=%d/impl=noop", xrs), func(b *testing.B) {
			for b.Loop() {
				if _, err := noop(req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(size, "request-B")
		})
		b.Run(fmt.Sprintf("fleet=%d/impl=kausality", xrs), func(b *testing.B) {
			benchRun(b, req, perXR)
			b.ReportMetric(size, "request-B")
			b.ReportMetric(atRest, "annotation-B/resource-at-rest")
			b.ReportMetric(during, "annotation-B/resource-in-change")
		})
	}
}
