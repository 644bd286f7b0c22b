package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree/treetest"
	"github.com/kausality-io/kausality-crossplane/internal/report"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestTrace(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XPlatform"}, meta.RESTScopeNamespace)
	cases := map[string]struct {
		reason   string
		resource string
		name     string
		format   printer.Format
		want     []string // lines or parts of the output, in order
		err      string
	}{
		"Default": {
			reason: "The tree drawn in the first column, what Kausality holds in the last.", resource: "xplatforms/shop", format: printer.FormatDefault,
			want: []string{"NAME", "KAUSALITY", "XPlatform/shop", "withheld: resource logs", "├─ Bucket/shop-logs", "gate closed", "└─ XStorage/shop-storage", "being created", "   ├─ Bucket/shop-gone", "gone", "   └─ Bucket/shop-data"},
		},
		"Wide": {
			reason: "Wide adds the initiator and the trace.", resource: "xplatforms", name: "shop", format: printer.FormatWide,
			want: []string{"INITIATOR", "TRACE"},
		},
		"BothNames": {reason: "TYPE/NAME and NAME together are ambiguous.", resource: "xplatforms/shop", name: "other", format: printer.FormatDefault, err: "not both"},
		"NoName":    {reason: "A TYPE alone names nothing.", resource: "xplatforms", format: printer.FormatDefault, err: "names no object"},
		"UnknownKind": {reason: "A TYPE the API server does not serve is named.", resource: "xwidgets/shop", format: printer.FormatDefault,
			err: `cannot find the kind of "xwidgets"`},
		"UnknownFormat": {reason: "An unknown output format is named.", resource: "xplatforms/shop", format: "table", err: `unknown output format "table"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := Trace(context.Background(), treetest.Reader(t), mapper, "team-a", tc.resource, tc.name, tc.format, &out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s\nTrace(...) = %v, want an error containing %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nTrace(...): %v", tc.reason, err)
			}
			rest := out.String()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%s\noutput lacks %q after what came before:\n%s", tc.reason, w, out.String())
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestTraceJSON(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XPlatform"}, meta.RESTScopeNamespace)
	var out bytes.Buffer
	if err := Trace(context.Background(), treetest.Reader(t), mapper, "team-a", "xplatforms/shop", "", printer.FormatJSON, &out); err != nil {
		t.Fatal(err)
	}
	var n tree.Node
	if err := json.Unmarshal(out.Bytes(), &n); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if n.Role != report.RoleComposite || len(n.Children) != 2 || n.Children[1].Children[1].Path != "storage/data" || n.Withheld == "" {
		t.Errorf("decoded tree %+v: want the XPlatform, its two children, the nested data bucket and the withheld change", n)
	}
}

func TestTraceDot(t *testing.T) {
	var out bytes.Buffer
	if err := Trace(context.Background(), treetest.Reader(t), treetest.Mapper(), "team-a", "xplatforms/shop", "", printer.FormatDot, &out); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "trace.dot"), out.String())
	// The same tree gives the same text: ids follow the walk.
	var again bytes.Buffer
	if err := Trace(context.Background(), treetest.Reader(t), treetest.Mapper(), "team-a", "xplatforms/shop", "", printer.FormatDot, &again); err != nil || again.String() != out.String() {
		t.Errorf("a second rendering differs (%v):\n%s", err, again.String())
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if strings.TrimSpace(got) == "" {
		t.Errorf("%s: empty output", path)
	}
	fixture.Golden(t, path, []byte(got), *update)
}
