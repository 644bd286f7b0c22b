package derivation

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestScanExpressions(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []string
		wantErr string
	}{
		"None":          {in: "plain", want: nil},
		"Whole":         {in: "${schema.spec.name}", want: []string{"schema.spec.name"}},
		"Embedded":      {in: "web-${schema.spec.name}-${schema.spec.env}", want: []string{"schema.spec.name", "schema.spec.env"}},
		"MapLiteral":    {in: `${ {"a": "}"}.a }`, want: []string{` {"a": "}"}.a `}},
		"QuotedBrace":   {in: `${schema.spec.name + '}'}x`, want: []string{`schema.spec.name + '}'`}},
		"TripleQuote":   {in: `${"""}"""}`, want: []string{`"""}"""`}},
		"EscapedQuote":  {in: `${"\"}" + x}`, want: []string{`"\"}" + x`}},
		"DollarAlone":   {in: "cost: $5 {x}", want: nil},
		"Unterminated":  {in: "a ${schema.spec.name", wantErr: "offset 2 has no closing }"},
		"UnterminatedQ": {in: `${"}`, wantErr: "offset 0 has no closing }"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			es, err := ScanExpressions(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ScanExpressions(%q): %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.Text)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ScanExpressions(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestReferences(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []Reference
	}{
		"Field":      {"schema.spec.name", []Reference{{Root: "schema", Path: "spec.name"}}},
		"Method":     {"schema.spec.name.lowerAscii()", []Reference{{Root: "schema", Path: "spec.name"}}},
		"Optional":   {`schema.spec.?team`, []Reference{{Root: "schema", Path: "spec.team", Optional: true}}},
		"OrValue":    {`schema.spec.?team.orValue("x")`, []Reference{{Root: "schema", Path: "spec.team"}}},
		"Index":      {"schema.spec.ports[0].name", []Reference{{Root: "schema", Path: "spec.ports[0].name"}}},
		"Key":        {`schema.metadata.labels["app.kubernetes.io/name"]`, []Reference{{Root: "schema", Path: "metadata.labels[app.kubernetes.io/name]"}}},
		"Two":        {"schema.spec.a + deployment.status.b", []Reference{{Root: "schema", Path: "spec.a"}, {Root: "deployment", Path: "status.b"}}},
		"InString":   {`"schema.spec.no" + schema.spec.yes`, []Reference{{Root: "schema", Path: "spec.yes"}}},
		"Function":   {"string(schema.spec.replicas)", []Reference{{Root: "schema", Path: "spec.replicas"}}},
		"BareIdent":  {"region", nil},
		"DigitField": {"schema.spec.123", []Reference{{Root: "schema", Path: "spec"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := References(tc.in)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("References(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// FuzzScanExpressions checks the scanner on any string: it never panics,
// its expressions lie in the string in order without overlapping, each
// spans exactly "${" + Text + "}", and every reference in them is a
// path fieldpath parses back to itself.
func FuzzScanExpressions(f *testing.F) {
	for _, s := range []string{"${schema.spec.name}", "a-${x}-${y}", `${ {"a": "}"}.a }`, `${"""}"""}`, "${", "$${}}", `${schema.spec.?a["b.c"][?0].d()}`, "${'\\'}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		es, err := ScanExpressions(s)
		if err != nil {
			return
		}
		end := 0
		for _, e := range es {
			if e.Start < end || e.End > len(s) || e.Start+2 > e.End-1 {
				t.Fatalf("expression %+v out of order or range in %q", e, s)
			}
			if s[e.Start:e.Start+2] != "${" || s[e.End-1] != '}' || s[e.Start+2:e.End-1] != e.Text {
				t.Fatalf("expression %+v does not span ${%s} in %q", e, e.Text, s)
			}
			end = e.End
			for _, r := range References(e.Text) {
				if r.Path == "" {
					continue
				}
				segs, err := fieldpath.Parse(r.Path)
				if err != nil || segs.String() != r.Path {
					t.Fatalf("reference %+v of %q: path does not parse back (%v)", r, e.Text, err)
				}
			}
		}
	})
}

// TestGraphGolden derives the policy of testdata/kro-webapp.yaml, as the
// CLI does (Kubernetes' own kinds first), and compares it with its golden.
func TestGraphGolden(t *testing.T) {
	objs := readObjects(t, "testdata/kro-webapp.yaml")
	if len(objs) != 1 || !IsResourceGraph(objs[0]) {
		t.Fatalf("testdata/kro-webapp.yaml: want one ResourceGraphDefinition, got %d objects", len(objs))
	}
	m, err := ReadGraph(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	r, err := Derive(m, Options{Subjects: corpusSubjects, Deleting: DeletingDelete, Resolver: kroResolver{allXRDs(t)}, XRSchema: &Schema{}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(r)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kro-webapp", b)
}

type kroResolver struct{ next Resolver }

func (k kroResolver) Resolve(gvk schema.GroupVersionKind) (Kind, bool, error) {
	if kk, ok, _ := (KubernetesKinds{}).Resolve(gvk); ok {
		return kk, true, nil
	}
	return k.next.Resolve(gvk)
}
