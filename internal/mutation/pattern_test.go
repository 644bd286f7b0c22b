package mutation

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

func TestParsePattern(t *testing.T) {
	type want struct {
		str string
		err string // substring; empty means no error
	}
	cases := map[string]struct {
		reason string
		in     string
		want   want
	}{
		"Field":          {reason: "A plain path parses.", in: "spec.forProvider.instanceClass", want: want{str: "spec.forProvider.instanceClass"}},
		"Wildcard":       {reason: "[*] is a wildcard segment.", in: "spec.forProvider.tags[*]", want: want{str: "spec.forProvider.tags[*]"}},
		"DotWildcard":    {reason: ".* is the same wildcard, written canonically as [*].", in: "spec.*.x", want: want{str: "spec[*].x"}},
		"MatchAll":       {reason: "The single * matches every path.", in: "*", want: want{str: "*"}},
		"Index":          {reason: "Concrete indices parse.", in: "spec.l[3].x", want: want{str: "spec.l[3].x"}},
		"BracketKey":     {reason: "Keys with periods go in brackets.", in: "metadata.annotations[kausality.io/x]", want: want{str: "metadata.annotations[kausality.io/x]"}},
		"QuotedKey":      {reason: "Quoted bracketed keys are accepted and written unquoted.", in: "metadata.annotations['crossplane.io/external-name']", want: want{str: "metadata.annotations[crossplane.io/external-name]"}},
		"Empty":          {reason: "An empty pattern is refused.", in: "", want: want{err: "path pattern is empty"}},
		"Unterminated":   {reason: "An unclosed bracket is refused, naming the pattern.", in: "spec.tags[0", want: want{err: `cannot parse path pattern "spec.tags[0": unterminated`}},
		"Unopened":       {reason: "A stray closing bracket is refused.", in: "spec.tags]", want: want{err: `cannot parse path pattern "spec.tags]": unexpected ']'`}},
		"EmptyBrackets":  {reason: "Empty brackets are refused.", in: "spec.tags[]", want: want{err: `cannot parse path pattern "spec.tags[]"`}},
		"DoublePeriod":   {reason: "An empty segment between periods is refused.", in: "spec..tags", want: want{err: `cannot parse path pattern "spec..tags": unexpected '.'`}},
		"LeadingPeriod":  {reason: "A leading period is refused.", in: ".spec", want: want{err: `cannot parse path pattern ".spec"`}},
		"TrailingPeriod": {reason: "A trailing period is refused.", in: "spec.", want: want{err: `cannot parse path pattern "spec."`}},
		"EmptyQuoted":    {reason: "Quotes around nothing are an empty segment.", in: "spec['']", want: want{err: `path pattern "spec['']": segment 1 is empty`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePattern(tc.in)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nParsePattern(%q): want error containing %q, got %v", tc.reason, tc.in, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nParsePattern(%q): %v", tc.reason, tc.in, err)
			}
			if diff := cmp.Diff(tc.want.str, p.String()); diff != "" {
				t.Errorf("%s\nParsePattern(%q).String(): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestPatternCovers(t *testing.T) {
	cases := map[string]struct {
		reason  string
		pattern string
		path    string
		want    bool
	}{
		"Exact":            {reason: "A pattern covers the path it names.", pattern: "spec.forProvider.instanceClass", path: "spec.forProvider.instanceClass", want: true},
		"PrefixField":      {reason: "A bound on a field covers fields below it.", pattern: "spec.forProvider", path: "spec.forProvider.instanceClass", want: true},
		"PrefixIndex":      {reason: "A bound on a field covers items below it.", pattern: "spec.forProvider", path: "spec.forProvider.tags[3]", want: true},
		"NotOnBoundary":    {reason: "spec.forProvider must not cover spec.forProviderX.", pattern: "spec.forProvider", path: "spec.forProviderX", want: false},
		"NotOnBoundaryKey": {reason: "Nor a longer bracketed key.", pattern: "m[a.b]", path: "m[a.bc]", want: false},
		"Parent":           {reason: "A pattern does not cover its parent.", pattern: "spec.forProvider.tags", path: "spec.forProvider", want: false},
		"Sibling":          {reason: "Nor a sibling.", pattern: "spec.forProvider.tags", path: "spec.forProvider.region", want: false},
		"WildcardIndex":    {reason: "[*] matches any index.", pattern: "spec.tags[*]", path: "spec.tags[17]", want: true},
		"WildcardKey":      {reason: "[*] matches any map key.", pattern: "metadata.annotations[*]", path: "metadata.annotations[kausality.io/x]", want: true},
		"WildcardMiddle":   {reason: "[*] matches one segment in the middle.", pattern: "spec.rules[*].port", path: "spec.rules[2].port", want: true},
		"WildcardMiddleNo": {reason: "...and the rest must still match.", pattern: "spec.rules[*].port", path: "spec.rules[2].proto", want: false},
		"WildcardOneSeg":   {reason: "[*] matches exactly one segment, not zero.", pattern: "spec.tags[*]", path: "spec.tags", want: false},
		"WildcardBelow":    {reason: "[*] covers everything below the segment it matches.", pattern: "spec.rules[*]", path: "spec.rules[0].ports[1]", want: true},
		"MatchAll":         {reason: "* covers every path.", pattern: "*", path: "spec.a[0].b", want: true},
		"MatchAllRoot":     {reason: "* covers even the root.", pattern: "*", path: "", want: true},
		"RootNotCovered":   {reason: "Only * covers the root.", pattern: "spec", path: "", want: false},
		"IndexVsKey":       {reason: "An index in a pattern matches a numeric map key.", pattern: "spec.m[0]", path: "spec.m.0", want: true},
		"KeyVsIndex":       {reason: "A numeric key in a pattern matches an index.", pattern: "spec.l.0", path: "spec.l[0]", want: true},
		"IndexMismatch":    {reason: "Different indices do not match.", pattern: "spec.l[1]", path: "spec.l[10]", want: false},
		"UnparsablePath":   {reason: "An unparsable path is never covered.", pattern: "spec", path: "spec..a", want: false},
		"LiteralStarKey":   {reason: "A literal * key in a path is matched by the wildcard.", pattern: "spec.m[*]", path: "spec.m[*]", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePattern(tc.pattern)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tc.pattern, err)
			}
			if got := p.Covers(tc.path); got != tc.want {
				t.Errorf("%s\nParsePattern(%q).Covers(%q): want %t, got %t", tc.reason, tc.pattern, tc.path, tc.want, got)
			}
		})
	}
	if (Pattern{}).Covers("spec") {
		t.Errorf("the zero Pattern must cover nothing")
	}
}

func TestCoveredBy(t *testing.T) {
	b := func(p string, vs ...v1alpha1.MutationVerb) v1alpha1.MutationBound {
		return v1alpha1.MutationBound{JSONPath: p, Verbs: vs}
	}
	cases := map[string]struct {
		reason string
		m      Mutation
		bounds []v1alpha1.MutationBound
		want   bool
	}{
		"PathAndVerb":     {reason: "A bound with the path and the verb covers.", m: mut("spec.forProvider.instanceClass"), bounds: []v1alpha1.MutationBound{b("spec.forProvider.instanceClass", v1alpha1.MutationMutate)}, want: true},
		"WrongVerb":       {reason: "The verb must be permitted.", m: ins("spec.forProvider.instanceClass"), bounds: []v1alpha1.MutationBound{b("spec.forProvider.instanceClass", v1alpha1.MutationMutate)}, want: false},
		"AnyVerb":         {reason: "* permits every verb.", m: del("spec.tags[2]"), bounds: []v1alpha1.MutationBound{b("spec.tags", v1alpha1.MutationAll)}, want: true},
		"WrongPath":       {reason: "The path must be covered.", m: mut("spec.forProviderX"), bounds: []v1alpha1.MutationBound{b("spec.forProvider", v1alpha1.MutationAll)}, want: false},
		"SecondBound":     {reason: "Any bound may cover.", m: ins("spec.tags[0]"), bounds: []v1alpha1.MutationBound{b("spec.size", v1alpha1.MutationMutate), b("spec.tags[*]", v1alpha1.MutationInsert, v1alpha1.MutationDelete)}, want: true},
		"MatchAll":        {reason: "* covers every path.", m: mut("metadata.labels.x"), bounds: []v1alpha1.MutationBound{b("*", v1alpha1.MutationMutate)}, want: true},
		"BadPatternSkips": {reason: "An unparsable bound covers nothing, but others still may.", m: mut("spec.a"), bounds: []v1alpha1.MutationBound{b("spec[", v1alpha1.MutationAll), b("spec", v1alpha1.MutationMutate)}, want: true},
		"BadPatternOnly":  {reason: "An unparsable bound covers nothing.", m: mut("spec.a"), bounds: []v1alpha1.MutationBound{b("spec..a", v1alpha1.MutationAll)}, want: false},
		"NoBounds":        {reason: "No bounds cover nothing.", m: mut("spec.a"), want: false},
		"UnknownVerb":     {reason: "A mutation with an unknown verb is never covered.", m: Mutation{Path: "spec.a", Verb: "Replace"}, bounds: []v1alpha1.MutationBound{b("*", v1alpha1.MutationAll)}, want: false},
		"UnparsablePath":  {reason: "An unparsable mutation path is never covered by a path bound.", m: mut("spec..a"), bounds: []v1alpha1.MutationBound{b("spec", v1alpha1.MutationAll)}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CoveredBy(tc.m, tc.bounds); got != tc.want {
				t.Errorf("%s\nCoveredBy(%v, ...): want %t, got %t", tc.reason, tc.m, tc.want, got)
			}
			// Bounds must agree wherever every bound compiles.
			if bs, err := CompileBounds(tc.bounds); err == nil {
				if got := bs.Covers(tc.m); got != tc.want {
					t.Errorf("%s\nBounds.Covers(%v): want %t, got %t", tc.reason, tc.m, tc.want, got)
				}
			}
		})
	}
	if (Bounds{}).Covers(mut("spec")) {
		t.Errorf("the zero Bounds must cover nothing")
	}
}

func TestCompileBounds(t *testing.T) {
	cases := map[string]struct {
		reason string
		bounds []v1alpha1.MutationBound
		err    string // substring; empty means no error
	}{
		"Valid":   {reason: "Valid bounds compile.", bounds: []v1alpha1.MutationBound{{JSONPath: "spec.tags[*]", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationInsert}}, {JSONPath: "*", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationAll}}}},
		"None":    {reason: "No bounds compile to Bounds that cover nothing."},
		"BadPath": {reason: "The error names the bound and its jsonPath.", bounds: []v1alpha1.MutationBound{{JSONPath: "spec", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationAll}}, {JSONPath: "spec.tags[", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationAll}}}, err: `mutations[1]: invalid jsonPath "spec.tags["`},
		"Empty":   {reason: "An empty jsonPath is refused.", bounds: []v1alpha1.MutationBound{{Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationAll}}}, err: "path pattern is empty"},
		"BadVerb": {reason: "Verbs are a closed set.", bounds: []v1alpha1.MutationBound{{JSONPath: "spec", Verbs: []v1alpha1.MutationVerb{"Replace"}}}, err: `mutations[0] (jsonPath "spec"): verb "Replace"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := CompileBounds(tc.bounds)
			if tc.err == "" {
				if err != nil {
					t.Errorf("%s\nCompileBounds(...): %v", tc.reason, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s\nCompileBounds(...): want error containing %q, got %v", tc.reason, tc.err, err)
			}
		})
	}
}

func TestPatternOverlaps(t *testing.T) {
	cases := map[string]struct {
		pattern, path string
		want          bool
	}{
		"Same":           {"spec.size", "spec.size", true},
		"Below":          {"spec.size", "spec.size.gb", true},
		"Ancestor":       {"spec.parameters.size", "spec.parameters", true},
		"WildcardIndex":  {"spec.containers[*].image", "spec.containers[2].image", true},
		"WildcardParent": {"spec.containers[*].image", "spec.containers[2]", true},
		"Sibling":        {"spec.size", "spec.sizeX", false},
		"OtherBranch":    {"spec.containers[*].image", "spec.volumes[0]", false},
		"Unparsable":     {"spec.size", "spec[", false},
		"All":            {"*", "anything.at.all", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePattern(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Overlaps(tc.path); got != tc.want {
				t.Errorf("ParsePattern(%q).Overlaps(%q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
			}
		})
	}
}

func TestBoundsForNamed(t *testing.T) {
	ms := []Mutation{{Path: "spec.forProvider.size", Verb: v1alpha1.MutationMutate}, {Path: "spec.forProvider.tags.tier", Verb: v1alpha1.MutationInsert}}
	if got := Named(BoundsFor(ms)); !slices.Equal(got, ms) {
		t.Errorf("Named(BoundsFor(ms)) = %v, want %v", got, ms)
	}
	for _, m := range ms {
		if !CoveredBy(m, BoundsFor(ms)) {
			t.Errorf("BoundsFor(ms) does not cover %v", m)
		}
	}
	if got := Named([]v1alpha1.MutationBound{{JSONPath: "spec"}}); !slices.Equal(got, []Mutation{{Path: "spec", Verb: v1alpha1.MutationAll}}) {
		t.Errorf("Named of a bound without verbs = %v, want every verb", got)
	}
}
