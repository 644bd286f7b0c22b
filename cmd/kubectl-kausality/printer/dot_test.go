package printer

import (
	"testing"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

func TestDotColor(t *testing.T) {
	cases := map[string]struct {
		n    tree.Node
		want string
	}{
		"FrozenFirst": {n: tree.Node{Object: objectWith(func(o *tree.Node) { o.Frozen = "alice"; o.Withheld = "x" })}, want: colorFrozen},
		"Withheld":    {n: tree.Node{Object: objectWith(func(o *tree.Node) { o.Withheld = "x" })}, want: colorBlocked},
		"Gone":        {n: tree.Node{Missing: true}, want: colorBlocked},
		"Pending":     {n: tree.Node{Object: objectWith(func(o *tree.Node) { o.Pending = []string{"Update"} })}, want: colorPending},
		"Waiting":     {n: tree.Node{Object: objectWith(func(o *tree.Node) { o.Open = []string{"Update"}; o.Gate = []string{"Observe"} })}, want: colorPending},
		"Open":        {n: tree.Node{Object: objectWith(func(o *tree.Node) { o.Open = []string{"Update"}; o.Gate = []string{"*"} })}, want: colorOpen},
		"Quiet":       {n: tree.Node{}, want: colorQuiet},
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

func objectWith(set func(*tree.Node)) (o report.Object) {
	n := &tree.Node{}
	set(n)
	return n.Object
}
