package compose

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// TestLeftAsStored: what a run leaves as stored is recorded on the XR
// (KausalityComposed) and on the composed resources the run writes anyway
// (kausality.io/left-as-stored). The XR's record is lost when its
// reconcile fails or a concurrent write of the XR makes Crossplane's
// status update fail; the resources' record is not, so an allowance used
// up for a resource left as stored stays used up, while one whose write
// failed is still let through.
func TestLeftAsStored(t *testing.T) {
	// lost is the XR's record after a reconcile that failed: Crossplane
	// marked it Unknown.
	lost := map[string]any{"type": v1alpha1.ConditionComposed, "status": "Unknown", "reason": "FatalError",
		"message": "A fatal error occurred before the status of this condition could be determined."}
	xrAt := func(t *testing.T, allowances bool, cs ...map[string]any) *structpb.Struct {
		t.Helper()
		var ann map[string]string
		if allowances {
			ann = map[string]string{v1alpha1.AnnotationAllowances: xrAllowances}
		}
		m := xr(t, 2, 1, ann).AsMap()
		st := m["status"].(map[string]any)
		for _, c := range cs {
			st["conditions"] = append(st["conditions"].([]any), c)
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The XR composes two RDS instances: rds, whose class the XR's
	// allowance may change, and replica, which stays as it is.
	observed := func(t *testing.T, name string, own, leftAsStored string) *structpb.Struct {
		t.Helper()
		ann := withLeftAsStored(withComposedGeneration(map[string]string{
			v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-1",
		}, own), leftAsStored)
		m := observedRDS(t, "db.t3.small", 1, 1, ann, "[Observe, LateInitialize]").AsMap()
		m["metadata"].(map[string]any)["name"] = name
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	desired := func(t *testing.T, name, class, forged string) *structpb.Struct {
		t.Helper()
		extra := ""
		if forged != "" {
			extra = "  annotations:\n    " + v1alpha1.AnnotationLeftAsStored + ": '" + forged + "'\n"
		}
		return obj(t, strings.Replace(rds(class, extra), "name: db-rds", "name: "+name, 1))
	}
	rec := func(gen int64, names ...string) string {
		return allowance.Composed{Generation: gen, Untouched: names}.String()
	}

	type want struct {
		class    string            // rds's class as answered
		carried  map[string]string // left-as-stored as answered, by resource
		problems string            // a line the XR reports, "" for none
		record   string            // the XR's KausalityComposed as answered, "" for none
	}
	cases := map[string]struct {
		reason                 string
		xr                     *structpb.Struct
		rdsObserved, replicaOb *structpb.Struct
		rdsClass, forged       string
		want                   want
	}{
		"RecordedWhereTheRunWrites": {
			reason:      "A run that lets rds's change through records on rds that it left replica as stored.",
			xr:          xrAt(t, true),
			rdsObserved: observed(t, "db-rds", "", ""), replicaOb: observed(t, "db-replica", "", ""), rdsClass: "db.t3.large",
			want: want{class: "db.t3.large", carried: map[string]string{"rds": rec(2, "replica")}, record: rec(2, "replica")},
		},
		"UsedUpByARecordOnAnotherResource": {
			reason:      "The XR's record was lost, but replica's write of the run that left rds as stored keeps it: the allowance is used up for rds, whose change is withheld; nothing is written again for it.",
			xr:          xrAt(t, true, lost),
			rdsObserved: observed(t, "db-rds", "", ""), replicaOb: observed(t, "db-replica", "2", rec(2, "rds")), rdsClass: "db.t3.large",
			want: want{class: "db.t3.small", carried: map[string]string{"replica": rec(2, "rds")}},
		},
		"WriteThatFailedIsLetThroughAgain": {
			reason:      "The XR's record was lost with the reconcile whose write of rds failed; replica's record does not name rds, so the allowance still lets rds's change through.",
			xr:          xrAt(t, true, lost),
			rdsObserved: observed(t, "db-rds", "1", ""), replicaOb: observed(t, "db-replica", "2", rec(2)), rdsClass: "db.t3.large",
			want: want{class: "db.t3.large", carried: map[string]string{"replica": rec(2)}},
		},
		"CarriedWhenNothingIsWritten": {
			reason:      "A run that writes nothing while an allowance is not consumed has the first resource left as stored carry the record.",
			xr:          xrAt(t, true),
			rdsObserved: observed(t, "db-rds", "", ""), replicaOb: observed(t, "db-replica", "", ""), rdsClass: "db.t3.small",
			want: want{class: "db.t3.small", carried: map[string]string{"rds": rec(2, "rds", "replica")}, record: rec(2, "rds", "replica")},
		},
		"CarriedOnce": {
			reason:      "A record a resource already carries is not written again.",
			xr:          xrAt(t, true),
			rdsObserved: observed(t, "db-rds", "", rec(2, "rds", "replica")), replicaOb: observed(t, "db-replica", "", ""), rdsClass: "db.t3.small",
			want: want{class: "db.t3.small", carried: map[string]string{"rds": rec(2, "rds", "replica")}},
		},
		"NotCarriedWithoutAnAllowance": {
			reason:      "Without an allowance no change can ride on a lost record: a run that writes nothing writes no record either.",
			xr:          xrAt(t, false),
			rdsObserved: observed(t, "db-rds", "", ""), replicaOb: observed(t, "db-replica", "", ""), rdsClass: "db.t3.small",
			want: want{class: "db.t3.small", carried: map[string]string{}},
		},
		"RecordKeptWithoutNews": {
			reason:      "Without an allowance the XR's record has nothing new to say at a later generation: it is answered as the XR holds it, so Crossplane writes nothing.",
			xr:          xrAt(t, false, map[string]any{"type": v1alpha1.ConditionComposed, "status": "True", "reason": ReasonComposed, "message": rec(1, "replica")}),
			rdsObserved: observed(t, "db-rds", "", ""), replicaOb: observed(t, "db-replica", "", ""), rdsClass: "db.t3.small",
			want: want{class: "db.t3.small", carried: map[string]string{}, record: rec(1, "replica")},
		},
		"NotForgedByAStep": {
			reason:      "A step's left-as-stored is dropped: only what the resource keeps counts.",
			xr:          xrAt(t, false),
			rdsObserved: observed(t, "db-rds", "", ""), replicaOb: observed(t, "db-replica", "", ""), rdsClass: "db.t3.small", forged: rec(9, "replica"),
			want: want{class: "db.t3.small", carried: map[string]string{}},
		},
		"Unreadable": {
			reason:      "A record that does not read says nothing, and the XR names the resource and the annotation.",
			xr:          xrAt(t, true),
			rdsObserved: observed(t, "db-rds", "", ""), replicaOb: observed(t, "db-replica", "2", "left as stored: rds"), rdsClass: "db.t3.large",
			want: want{class: "db.t3.large", carried: map[string]string{"replica": "left as stored: rds"},
				problems: "cannot read what composed resource replica (RDSInstance/db-replica) records of the resources left as stored; the other records decide: annotation " + v1alpha1.AnnotationLeftAsStored},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, tc.xr, tc.rdsObserved, desired(t, "db-rds", tc.rdsClass, tc.forged), policyDB)
			req.Observed.Resources["replica"] = &fnv1.Resource{Resource: tc.replicaOb}
			req.Desired.Resources["replica"] = &fnv1.Resource{Resource: desired(t, "db-replica", "db.t3.small", ""), Ready: fnv1.Ready_READY_TRUE}
			rsp, err := newTestFunction().RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := want{carried: map[string]string{}}
			for n, r := range rsp.GetDesired().GetResources() {
				m := r.GetResource().AsMap()
				if n == "rds" {
					got.class, _ = m["spec"].(map[string]any)["forProvider"].(map[string]any)["instanceClass"].(string)
				}
				ann, _ := m["metadata"].(map[string]any)["annotations"].(map[string]any)
				if s, ok := ann[v1alpha1.AnnotationLeftAsStored].(string); ok {
					got.carried[n] = s
				}
			}
			for _, c := range rsp.GetConditions() {
				if c.GetType() == v1alpha1.ConditionComposed {
					got.record = c.GetMessage()
				}
				if c.GetType() == ConditionAnnotations && c.GetStatus() == fnv1.Status_STATUS_CONDITION_FALSE && tc.want.problems != "" && strings.Contains(c.GetMessage(), tc.want.problems) {
					got.problems = tc.want.problems
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want +got:\n%s\nconditions: %v", tc.reason, diff, rsp.GetConditions())
			}
		})
	}
}
