package printer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// shop is a small tree: an XR whose change is withheld, a Bucket with
// its gate open, and a Bucket that is gone.
func shop() *tree.Node {
	return &tree.Node{
		Object: report.Object{APIVersion: "example.org/v1alpha1", Kind: "XPlatform", Name: "shop", Role: report.RoleComposite, Synced: "True", Ready: "True", Withheld: "no rule"},
		Children: []*tree.Node{
			{Object: report.Object{
				APIVersion: "s3.aws.m.upbound.io/v1beta1", Kind: "Bucket", Name: "shop-logs", Resource: "logs", Role: report.RoleManaged, Synced: "True", Ready: "True",
				Gate: []string{"*"}, Gated: true, Open: []string{"Update"}, Initiator: "alice",
				Trace: allowance.Trace{{Kind: "XPlatform", Name: "shop", Field: "spec.size", User: "alice"}, {Kind: "Bucket", Name: "shop-logs"}},
			}},
			{Object: report.Object{Kind: "Bucket", Name: "shop-gone"}, Missing: true},
		},
	}
}

func TestTree(t *testing.T) {
	type args struct {
		p Printer
	}
	type want struct {
		out string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Default": {
			reason: "One line per object, the tree drawn in the first column, what Kausality holds in the last.",
			args:   args{p: DefaultPrinter{}},
			want: want{out: "" +
				"NAME                 RESOURCE  SYNCED  READY  GATE  KAUSALITY\n" +
				"XPlatform/shop       -         True    True   -     withheld: no rule\n" +
				"├─ Bucket/shop-logs  logs      True    True   *     gate open for Update\n" +
				"└─ Bucket/shop-gone  -         -       -      -     gone\n"},
		},
		"Wide": {
			reason: "Wide adds who started the change and its trace.",
			args:   args{p: WidePrinter{}},
			want: want{out: "" +
				"NAME                 RESOURCE  SYNCED  READY  GATE  KAUSALITY             INITIATOR  TRACE\n" +
				"XPlatform/shop       -         True    True   -     withheld: no rule     -          -\n" +
				"├─ Bucket/shop-logs  logs      True    True   *     gate open for Update  alice      XPlatform/shop[spec.size] → Bucket/shop-logs\n" +
				"└─ Bucket/shop-gone  -         -       -      -     gone                  -          -\n"},
		},
		"Dot": {
			reason: "One box per object, filled by state, edges from parent to child.",
			args:   args{p: DotPrinter{}},
			want: want{out: `digraph kausality {
  rankdir=TB;
  node [shape=box, style="rounded,filled", fontname="Helvetica"];
  n0 [label="XPlatform/shop\nwithheld: no rule", fillcolor="#f4cccc"];
  n1 [label="Bucket/shop-logs\ngate: *\ngate open for Update", fillcolor="#d9ead3"];
  n2 [label="Bucket/shop-gone\ngone", fillcolor="#f4cccc", style="rounded,dashed"];
  n0 -> n1;
  n0 -> n2;
}
`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tc.args.p.Print(&out, Tree{Node: shop()}); err != nil {
				t.Fatalf("%s\nPrint(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.out, out.String()); diff != "" {
				t.Errorf("%s\nPrint(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestTreeJSON: a Tree encodes as its root does, so trace's JSON and YAML
// are the nodes themselves.
func TestTreeJSON(t *testing.T) {
	n := shop()
	want, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(Tree{Node: n})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("json.Marshal(Tree{...}): -root, +tree:\n%s", diff)
	}
}

func TestDotColor(t *testing.T) {
	type args struct {
		n tree.Node
	}
	type want struct {
		color string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"FrozenFirst": {reason: "A freeze explains the rest.", args: args{n: tree.Node{Object: report.Object{Frozen: "alice", Withheld: "x"}}}, want: want{color: colorFrozen}},
		"Withheld":    {reason: "A withheld change keeps it from the cloud.", args: args{n: tree.Node{Object: report.Object{Withheld: "x"}}}, want: want{color: colorBlocked}},
		"Gone":        {reason: "A gone object blocks.", args: args{n: tree.Node{Missing: true}}, want: want{color: colorBlocked}},
		"Pending":     {reason: "A pending allowance waits.", args: args{n: tree.Node{Object: report.Object{Pending: []string{"Update"}}}}, want: want{color: colorPending}},
		"Waiting":     {reason: "An allowance behind a closed gate waits.", args: args{n: tree.Node{Object: report.Object{Open: []string{"Update"}, Gate: []string{"Observe"}}}}, want: want{color: colorPending}},
		"Open":        {reason: "An open gate is on its way.", args: args{n: tree.Node{Object: report.Object{Open: []string{"Update"}, Gate: []string{"*"}}}}, want: want{color: colorOpen}},
		"Quiet":       {reason: "Nothing held.", args: args{n: tree.Node{}}, want: want{color: colorQuiet}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want.color, dotColor(&tc.args.n)); diff != "" {
				t.Errorf("%s\ndotColor(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDotQuote(t *testing.T) {
	if diff := cmp.Diff(`"a\"b\\c\nd"`, dotQuote("a\"b\\c\nd")); diff != "" {
		t.Errorf("dotQuote(...): -want, +got:\n%s", diff)
	}
}
