package gate

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

func TestParseRequested(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []string
		wantErr bool
	}{
		"ObserveOnly": {in: `["Observe"]`, want: []string{Observe}},
		"KeepOnDelete": {in: `["Observe","Create","Update","LateInitialize"]`,
			want: []string{Observe, Create, Update, LateInitialize}},
		"StarIsNil":   {in: `["*"]`},
		"EmptyPauses": {in: `[]`, want: []string{}},
		"Null":        {in: `null`, wantErr: true},
		"NotJSON":     {in: `Observe`, wantErr: true},
		"Unknown":     {in: `["Watch"]`, wantErr: true},
		"StarAndMore": {in: `["*","Observe"]`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRequested(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseRequested(%q) error = %v, want error %t", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseRequested(%q): -want +got:\n%s", tc.in, diff)
			}
			if tc.wantErr {
				return
			}
			if again, err := ParseRequested(FormatRequested(got)); err != nil || !slices.Equal(again, got) || (again == nil) != (got == nil) {
				t.Errorf("ParseRequested(FormatRequested(%v)) = %v, %v", got, again, err)
			}
		})
	}
}

// FuzzParseRequested: whatever the annotation holds, reading it either
// fails with an error or yields a request whose gate crossplane-runtime
// accepts and that reads back the same.
func FuzzParseRequested(f *testing.F) {
	for _, s := range []string{`["Observe"]`, `["*"]`, `[]`, `null`, `["Observe","Create","Update","LateInitialize"]`, `[1]`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseRequested(s)
		if err != nil {
			return
		}
		if got := Closed(DefaultReadOnly, ps); !resolverAccepts(got) {
			t.Errorf("closed gate %v for request %q is not accepted", got, s)
		}
		again, err := ParseRequested(FormatRequested(ps))
		if err != nil || !slices.Equal(again, ps) {
			t.Errorf("request %q reads back as %v, %v", s, again, err)
		}
	})
}

// TestDecideRequested: the gate every deciding place computes (Config.For
// reads the pipeline's request off the resource) is never wider than the
// request, and an allowance it makes moot approves nothing.
func TestDecideRequested(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	create := allowance.Allowance{
		Relation: v1alpha1.RelationExternal, Target: v1alpha1.Target{External: map[string]string{"kind": "SubnetGroup"}},
		Verbs: []string{Create}, Generation: 1,
		Trace: allowance.Trace{{APIVersion: "v1", Kind: "SubnetGroup", Name: "s", Generation: 1, Timestamp: allowance.Timestamp(now)}},
	}
	withRequest := func(req string) map[string]any {
		mr := bucket(0, "eu", 1, 0, -1, nil)
		if req != "" {
			mr["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.AnnotationRequestedPolicies] = req
		}
		return mr
	}
	cases := map[string]struct {
		reason       string
		request      string
		wantPolicies []string
		wantMoot     int
		wantApproves bool
		wantErr      bool
	}{
		"ObserveOnlyImport": {
			reason:  "upbound's SubnetGroup set to [Observe] in its Composition: a Create allowance from the XR's creation opens nothing and approves nothing.",
			request: `["Observe"]`, wantPolicies: []string{Observe}, wantMoot: 1,
		},
		"NoRecord": {
			reason:       "A resource the function gated before it recorded requests: \"*\", as before.",
			wantPolicies: []string{Observe, Create, LateInitialize}, wantApproves: true,
		},
		"Star": {
			reason:  "A request of [\"*\"] opens what the allowance grants.",
			request: `["*"]`, wantPolicies: []string{Observe, Create, LateInitialize}, wantApproves: true,
		},
		"Unreadable": {
			reason:  "A record that does not read closes the gate and says why.",
			request: `Observe`, wantPolicies: []string{}, wantMoot: 1, wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mr := withRequest(tc.request)
			d := Config{}.For(mr).Decide(mr, nil, []allowance.Allowance{create}, now, "")
			if diff := cmp.Diff(tc.wantPolicies, d.Policies); diff != "" {
				t.Errorf("%s\nPolicies: -want +got:\n%s", tc.reason, diff)
			}
			if len(d.Moot) != tc.wantMoot || d.Approves != tc.wantApproves || (d.Err != nil) != tc.wantErr {
				t.Errorf("%s\nmoot %d approves %t err %v, want %d %t error %t", tc.reason, len(d.Moot), d.Approves, d.Err, tc.wantMoot, tc.wantApproves, tc.wantErr)
			}
		})
	}
}
