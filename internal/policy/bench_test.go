package policy

import (
	"fmt"
	"testing"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// benchSet is three policies for one kind, each with rules and conditions,
// as a platform team might write for a database claim.
func benchSet(b *testing.B) Set {
	b.Helper()
	var ps []v1alpha1.AllowancePolicy
	for i := range 3 {
		p := *decode[v1alpha1.AllowancePolicy](b, dbPolicy)
		p.Name = fmt.Sprintf("policy-%d", i)
		p.UID = ""
		p.Spec.Priority = int32(i)
		ps = append(ps, p)
	}
	s, errs := NewCache().For("example.com/v1alpha1", "XDatabase", ps)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	return s
}

// BenchmarkEvaluate is admission's policy work for a Claim-sized update of a
// watched field under 3 policies. BenchmarkEvaluateReference is the spec diff
// alone, which any admission check must do; report Evaluate as a ratio of it.
func BenchmarkEvaluate(b *testing.B) {
	s := benchSet(b)
	old := xr(b, "small", "{jira: INFRA-1}")
	obj := xr(b, "large", "{jira: INFRA-1}")
	alice := Identity{Username: "alice@example.com", Groups: []string{"platform-team"}}
	b.ReportAllocs()
	for b.Loop() {
		d, err := s.Evaluate(Request{Object: obj, OldObject: old, User: alice, Now: evalNow})
		if err != nil || len(d.Allowances) == 0 {
			b.Fatalf("Evaluate() = %v, %v", d, err)
		}
	}
}

func BenchmarkEvaluateReference(b *testing.B) {
	old := xr(b, "small", "{jira: INFRA-1}")
	obj := xr(b, "large", "{jira: INFRA-1}")
	b.ReportAllocs()
	for b.Loop() {
		if len(mutation.Diff("spec", old["spec"], obj["spec"])) == 0 {
			b.Fatal("no change")
		}
	}
}
