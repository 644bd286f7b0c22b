package gate

import (
	"slices"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
)

// resolverAccepts asks crossplane-runtime's own resolver, with management
// policies enabled, whether it accepts the set.
func resolverAccepts(set []string) bool {
	mp := make(xpv2.ManagementPolicies, 0, len(set))
	for _, a := range set {
		mp = append(mp, xpv2.ManagementAction(a))
	}
	return managed.NewManagementPoliciesResolver(true, mp).Validate() == nil
}

// subsets returns every subset of xs, in a stable order.
func subsets(xs []string) [][]string {
	out := [][]string{}
	for mask := 0; mask < 1<<len(xs); mask++ {
		s := []string{}
		for i, x := range xs {
			if mask&(1<<i) != 0 {
				s = append(s, x)
			}
		}
		out = append(out, s)
	}
	return out
}

func TestSupportedMatchesResolver(t *testing.T) {
	for _, s := range append(subsets(order), []string{All}) {
		if got, want := Supported(s), resolverAccepts(s); got != want {
			t.Errorf("Supported(%v) = %v, crossplane-runtime says %v", s, got, want)
		}
	}
}

func TestComputeEveryResultIsAccepted(t *testing.T) {
	verbSets := subsets([]string{Create, Update, Delete, All})
	for _, ro := range [][]string{DefaultReadOnly, {Observe}} {
		for _, verbs := range verbSets {
			got, err := Compute(ro, nil, verbs)
			if got == nil {
				// The function leaves a nil gate to the pipeline.
				t.Errorf("Compute(%v, %v) = nil, want a gate", ro, verbs)
			}
			if !resolverAccepts(got) {
				t.Errorf("Compute(%v, %v) = %v, which crossplane-runtime rejects", ro, verbs, got)
			}
			if err != nil {
				if !slices.Equal(got, ro) {
					t.Errorf("Compute(%v, %v) failed (%v) but returned %v, want the read-only set", ro, verbs, err, got)
				}
				continue
			}
			// Never wider than asked: every action is read-only or granted.
			for _, a := range got {
				if !slices.Contains(ro, a) && !slices.Contains(verbs, a) && !slices.Contains(verbs, All) {
					t.Errorf("Compute(%v, %v) = %v grants %s, which no verb asked for", ro, verbs, got, a)
				}
			}
			// Never narrower on writes: every verb asked for is granted.
			for _, v := range verbs {
				if v != All && !slices.Contains(got, v) {
					t.Errorf("Compute(%v, %v) = %v without error but drops %s", ro, verbs, got, v)
				}
			}
		}
	}
}

func TestCompute(t *testing.T) {
	cases := map[string]struct {
		readOnly, verbs []string
		want            []string
		wantErr         bool
	}{
		"ClosedWhenNoVerbs":      {readOnly: DefaultReadOnly, want: []string{Observe, LateInitialize}},
		"UpdateKeepsLateInit":    {readOnly: DefaultReadOnly, verbs: []string{Update}, want: []string{Observe, Update, LateInitialize}},
		"CreateKeepsLateInit":    {readOnly: DefaultReadOnly, verbs: []string{Create}, want: []string{Observe, Create, LateInitialize}},
		"DeleteDropsLateInit":    {readOnly: DefaultReadOnly, verbs: []string{Delete}, want: []string{Observe, Delete}},
		"CreateUpdateDelete":     {readOnly: DefaultReadOnly, verbs: []string{Delete, Update, Create}, want: []string{Observe, Create, Update, Delete, LateInitialize}},
		"ObserveOnlyCUD":         {readOnly: []string{Observe}, verbs: []string{Delete, Update, Create}, want: []string{Observe, Create, Update, Delete}},
		"DuplicatesCollapse":     {readOnly: DefaultReadOnly, verbs: []string{Update, Update}, want: []string{Observe, Update, LateInitialize}},
		"StarOpensFully":         {readOnly: DefaultReadOnly, verbs: []string{All}, want: []string{Observe, Create, Update, Delete, LateInitialize}},
		"ObserveOnlyUpdate":      {readOnly: []string{Observe}, verbs: []string{Update}, want: []string{Observe, Update}},
		"UpdateDeleteFails":      {readOnly: DefaultReadOnly, verbs: []string{Update, Delete}, want: DefaultReadOnly, wantErr: true},
		"UnknownVerbFails":       {readOnly: DefaultReadOnly, verbs: []string{"Patch"}, want: DefaultReadOnly, wantErr: true},
		"BadReadOnlyFailsClosed": {readOnly: []string{"Watch"}, verbs: []string{Update}, want: DefaultReadOnly, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Compute(tc.readOnly, nil, tc.verbs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Compute(%v, %v) error = %v, want error %v", tc.readOnly, tc.verbs, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Compute(%v, %v): -want +got:\n%s", tc.readOnly, tc.verbs, diff)
			}
		})
	}
}

func TestValidateReadOnly(t *testing.T) {
	cases := map[string]struct {
		set     []string
		wantErr bool
	}{
		"Default":           {set: DefaultReadOnly},
		"ObserveOnly":       {set: []string{Observe}},
		"Reordered":         {set: []string{LateInitialize, Observe}},
		"Empty":             {set: []string{}, wantErr: true},
		"WritesUpdate":      {set: []string{Observe, Update}, wantErr: true},
		"Star":              {set: []string{All}, wantErr: true},
		"Unknown":           {set: []string{Observe, "Watch"}, wantErr: true},
		"LateInitOnlyFails": {set: []string{LateInitialize}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := ValidateReadOnly(tc.set); (err != nil) != tc.wantErr {
				t.Errorf("ValidateReadOnly(%v) = %v, want error %v", tc.set, err, tc.wantErr)
			}
		})
	}
}

// TestComputeNeverWiderThanAsked runs the formula over every set the
// pipeline may ask for, both closed gates and every set of granted verbs:
// the gate is always a set crossplane-runtime's own resolver accepts, never
// holds an action the pipeline did not ask for or that neither the closed
// gate nor a verb brings, and, when it does not fail, opens every verb both
// asked for and granted. A failure falls back to the closed gate.
func TestComputeNeverWiderThanAsked(t *testing.T) {
	askeds := append([][]string{nil, {All}}, subsets(order)...)
	for _, asked := range askeds {
		// What the pipeline asked for, worked out here, not by askedSet.
		want := func(a string) bool { return asked == nil || slices.Contains(asked, All) || slices.Contains(asked, a) }
		for _, ro := range [][]string{DefaultReadOnly, {Observe}} {
			for _, verbs := range subsets([]string{Create, Update, Delete, All}) {
				got, err := Compute(ro, asked, verbs)
				if !resolverAccepts(got) {
					t.Errorf("Compute(%v, asked %v, %v) = %v, which crossplane-runtime rejects", ro, asked, verbs, got)
				}
				for _, a := range got {
					if !want(a) {
						t.Errorf("Compute(%v, asked %v, %v) = %v holds %s, which the pipeline did not ask for", ro, asked, verbs, got, a)
					}
					if !slices.Contains(ro, a) && !slices.Contains(verbs, a) && !slices.Contains(verbs, All) {
						t.Errorf("Compute(%v, asked %v, %v) = %v grants %s, which no verb brings", ro, asked, verbs, got, a)
					}
				}
				if err != nil {
					if closed := Closed(ro, asked); !slices.Equal(got, closed) {
						t.Errorf("Compute(%v, asked %v, %v) failed (%v) with %v, want the closed gate %v", ro, asked, verbs, err, got, closed)
					}
					continue
				}
				for _, v := range []string{Create, Update, Delete} {
					granted := slices.Contains(verbs, v) || slices.Contains(verbs, All)
					if granted && want(v) && !slices.Contains(got, v) {
						t.Errorf("Compute(%v, asked %v, %v) = %v without error but drops %s, which both the pipeline and an allowance ask for", ro, asked, verbs, got, v)
					}
				}
			}
		}
	}
}

func TestComputeAsked(t *testing.T) {
	cases := map[string]struct {
		reason  string
		asked   []string
		verbs   []string
		want    []string
		wantErr bool
	}{
		"ObserveOnlyImportNeverCreated": {
			reason: "An observe-only import (Crossplane's docs) is never created, whatever the allowances grant, and gets no LateInitialize it did not ask for.",
			asked:  []string{Observe}, verbs: []string{Create}, want: []string{Observe},
		},
		"ObserveOnlyNeverDeleted": {
			reason: "An observe-only resource is never deleted.",
			asked:  []string{Observe}, verbs: []string{All}, want: []string{Observe},
		},
		"KeepOnDeleteNeverDeleted": {
			reason: "A resource its Composition keeps on deletion (no Delete) is not deleted by a Delete allowance.",
			asked:  []string{Observe, Create, Update, LateInitialize}, verbs: []string{Delete}, want: []string{Observe, LateInitialize},
		},
		"KeepOnDeleteStillUpdated": {
			reason: "The same resource still opens for a permitted Update.",
			asked:  []string{Observe, Create, Update, LateInitialize}, verbs: []string{Update}, want: []string{Observe, Update, LateInitialize},
		},
		"NoLateInitializeAsked": {
			reason: "Without LateInitialize in the request, neither the closed nor the open gate has it.",
			asked:  []string{Observe, Create, Update, Delete}, verbs: []string{Update}, want: []string{Observe, Update},
		},
		"StarAsksEverything": {
			reason: "[\"*\"] asks for every action, as no request does.",
			asked:  []string{All}, verbs: []string{Create}, want: []string{Observe, Create, LateInitialize},
		},
		"PausedStaysPaused": {
			reason: "An empty request pauses the resource; Kausality keeps it paused.",
			asked:  []string{}, verbs: []string{Update}, want: []string{},
		},
		"UnknownAskedFailsClosed": {
			reason: "A request that does not read closes the gate to nothing and says why.",
			asked:  []string{"Watch"}, verbs: []string{Update}, want: []string{}, wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Compute(DefaultReadOnly, tc.asked, tc.verbs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nCompute(asked %v, %v) error = %v, want error %t", tc.reason, tc.asked, tc.verbs, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCompute(asked %v, %v): -want +got:\n%s", tc.reason, tc.asked, tc.verbs, diff)
			}
		})
	}
}
