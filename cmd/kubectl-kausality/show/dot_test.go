package show

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/internal/report"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XPlatform"}, meta.RESTScopeNamespace)
	return m
}

func TestPrintDot(t *testing.T) {
	var out bytes.Buffer
	if err := Trace(context.Background(), reader(t), mapper(), "team-a", "xplatforms/shop", "", FormatDot, &out); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "trace.dot"), out.String())
	// The same tree gives the same text: ids follow the walk.
	var again bytes.Buffer
	if err := Trace(context.Background(), reader(t), mapper(), "team-a", "xplatforms/shop", "", FormatDot, &again); err != nil || again.String() != out.String() {
		t.Errorf("a second rendering differs (%v):\n%s", err, again.String())
	}
}

func TestDotColor(t *testing.T) {
	cases := map[string]struct {
		n    Node
		want string
	}{
		"FrozenFirst": {n: Node{Object: objectWith(func(o *Node) { o.Frozen = "alice"; o.Withheld = "x" })}, want: colorFrozen},
		"Withheld":    {n: Node{Object: objectWith(func(o *Node) { o.Withheld = "x" })}, want: colorBlocked},
		"Gone":        {n: Node{Missing: true}, want: colorBlocked},
		"Pending":     {n: Node{Object: objectWith(func(o *Node) { o.Pending = []string{"Update"} })}, want: colorPending},
		"Waiting":     {n: Node{Object: objectWith(func(o *Node) { o.Open = []string{"Update"}; o.Gate = []string{"Observe"} })}, want: colorPending},
		"Open":        {n: Node{Object: objectWith(func(o *Node) { o.Open = []string{"Update"}; o.Gate = []string{"*"} })}, want: colorOpen},
		"Quiet":       {n: Node{}, want: colorQuiet},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := dotColor(&tc.n); got != tc.want {
				t.Errorf("dotColor(%+v) = %s, want %s", tc.n.Object, got, tc.want)
			}
		})
	}
	if got := dotQuote("a\"b\\c\nd"); got != `"a\"b\\c\nd"` {
		t.Errorf("dotQuote(...) = %s", got)
	}
}

func objectWith(set func(*Node)) (o report.Object) {
	n := &Node{}
	set(n)
	return n.Object
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if strings.TrimSpace(got) == "" {
		t.Errorf("%s: empty output", path)
	}
	fixture.Golden(t, path, []byte(got), *update)
}
