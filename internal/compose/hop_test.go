package compose

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// TestMRHopLabels: a composed resource's trace labels go into its hop, but
// labels a pipeline step made too large are left out and reported, so they
// are not copied into every later write.
func TestMRHopLabels(t *testing.T) {
	cases := map[string]struct {
		ann          map[string]string
		wantLabels   map[string]string
		wantProblems int
	}{
		"Kept":     {ann: map[string]string{"kausality.io/trace-ticket": "T-9"}, wantLabels: map[string]string{"ticket": "T-9"}},
		"TooLarge": {ann: map[string]string{"kausality.io/trace-ticket": strings.Repeat("x", allowance.MaxHopValue+1)}, wantProblems: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "s3.aws.m.upbound.io/v1beta1", "kind": "Bucket"}}
			obj.SetName("db-logs")
			r := &run{}
			h, problems := r.mrHop(childMeta{resName: "logs", obj: obj, name: "db-logs", ann: tc.ann}, 2, change{})
			if diff := cmp.Diff(tc.wantLabels, h.Labels); diff != "" {
				t.Errorf("labels: -want +got:\n%s", diff)
			}
			if len(problems) != tc.wantProblems {
				t.Errorf("problems = %v, want %d", problems, tc.wantProblems)
			}
		})
	}
}
