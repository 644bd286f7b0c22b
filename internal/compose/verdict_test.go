package compose

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// TestVerdict: the verdict on one composed resource is a value worked out
// from what load read (the policies, the XR's allowances, its freeze), the
// observed and desired resource, and propagation control's word on its
// change: what is let through, withheld and why, held back, its gate and
// its annotations. Giving it edits neither resource nor the decision it
// was made from.
func TestVerdict(t *testing.T) {
	// stored is the RDS instance as observed at db.t3.small, its gate
	// last opened for that class; extra annotations are added to its own.
	stored := func(t *testing.T, extra map[string]string) map[string]any {
		ann := map[string]string{v1alpha1.AnnotationApplied: appliedFor(t, "db.t3.small"), v1alpha1.AnnotationApproved: appliedFor(t, "db.t3.small"),
			v1alpha1.AnnotationApprovedGeneration: "1", v1alpha1.AnnotationCompositionRevision: "xdatabases-aws-2"}
		for k, v := range extra {
			ann[k] = v
		}
		o := observedRDS(t, "db.t3.small", 1, 1, ann, "[Observe, LateInitialize]").AsMap()
		composedIntegers(o)
		return o
	}
	// wanted is the RDS instance as the pipeline wants it.
	wanted := func(t *testing.T, class string) map[string]any { return obj(t, rds(class, "")).AsMap() }
	storedWith := func(extra map[string]string) func(*testing.T) map[string]any {
		return func(t *testing.T) map[string]any { return stored(t, extra) }
	}
	wantedAt := func(class string) func(*testing.T) map[string]any {
		return func(t *testing.T) map[string]any { return wanted(t, class) }
	}
	moved := func(t *testing.T) map[string]any {
		d := wanted(t, "db.t3.small")
		_ = unstructured.SetNestedField(d, "us-east-1", "spec", "forProvider", "region")
		return d
	}
	bucket := func(*testing.T) map[string]any {
		return map[string]any{"apiVersion": "s3.aws.crossplane.io/v1beta1", "kind": "Bucket", "metadata": map[string]any{"name": "b"}, "spec": map[string]any{"forProvider": map[string]any{"acl": "private"}}}
	}
	// heldCreation is the pending Create allowance of a creation of the
	// db.t3.small instance propagation control held back in an earlier run.
	heldCreation := allowance.ExternalGrant("rds.aws.crossplane.io", "RDSInstance", v1alpha1.VerbCreate, 1, allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "db", Generation: 1}})
	heldCreation.Pending = mutation.Record("spec", map[string]any{"forProvider": map[string]any{"region": "eu-central-1", "instanceClass": "db.t3.small"}}, skipManaged)
	held := &hold{resource: "rds", kind: "RDSInstance", name: "db-rds", why: `propagateWhen "false" of resource is false`, code: metrics.ReasonPropagateWhen}
	readOnly := gate.DefaultReadOnly
	update := []string{"Observe", "Update", "LateInitialize"}

	type args struct {
		phase             policy.Phase
		bare              bool // the XR carries no allowance
		frozen            string
		observed, desired func(*testing.T) map[string]any // observed nil: a creation
		pacing            pacing
	}
	type want struct {
		answered bool     // false: not answered at all, its creation refused
		passed   []string // the fields let through ("" for a creation)
		held     []string // the fields held back
		hold     string   // why propagation control holds it; "" when it does not
		withheld []string // the XR's lines: the decision's, then the gate's
		stamped  bool
		gated    bool
		policies []string // the gate; nil: the pipeline's stay
		// external is the state of the External allowance stamped for the
		// gate controller: "" none, "open", or "pending" (held back).
		external string
		class    string // the instanceClass the resource is answered with
		region   string // the region it is answered with
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"LetThrough": {
			reason: "The XR's allowance covers the class: it is let through, the gate opens for Update and an External allowance carries the change to the gate controller.",
			args:   args{observed: storedWith(nil), desired: wantedAt("db.t3.large")},
			want: want{answered: true, passed: []string{"spec.forProvider.instanceClass"}, stamped: true, gated: true, policies: update, external: "open",
				class: "db.t3.large", region: "eu-central-1"},
		},
		"WithheldForWantOfAllowance": {
			reason: "No allowance covers the region: it is withheld and said why, the resource keeps its observed region and the gate stays read-only.",
			args:   args{observed: storedWith(nil), desired: moved},
			want: want{answered: true, stamped: true, gated: true, policies: readOnly,
				withheld: []string{"resource rds (RDSInstance db-rds): withheld Mutate spec.forProvider.region: no unconsumed allowance on XDatabase/db grants Update of rdsinstances; policies: xdatabase-policy"},
				class:    "db.t3.small", region: "eu-central-1"},
		},
		"HeldBackByPropagationControl": {
			reason: "Propagation control holds the allowed class back: nothing is let through, the resource keeps its observed class behind a closed gate, and the change waits on it as a pending allowance.",
			args:   args{observed: storedWith(nil), desired: wantedAt("db.t3.large"), pacing: pacing{paced: true, hold: held}},
			want: want{answered: true, held: []string{"spec.forProvider.instanceClass"}, hold: held.why, stamped: true, gated: true, policies: readOnly, external: "pending",
				class: "db.t3.small", region: "eu-central-1"},
		},
		"PacedAndGoesNow": {
			reason: "Propagation control paces the change and its turn came: it goes as if nothing paced it.",
			args:   args{observed: storedWith(nil), desired: wantedAt("db.t3.large"), pacing: pacing{paced: true}},
			want: want{answered: true, passed: []string{"spec.forProvider.instanceClass"}, stamped: true, gated: true, policies: update, external: "open",
				class: "db.t3.large", region: "eu-central-1"},
		},
		"Creation": {
			reason: "While the XR initializes its policy lets it create the instance: the creation is let through and the gate opens Create.",
			args:   args{phase: policy.PhaseInitializing, bare: true, desired: wantedAt("db.t3.small")},
			want: want{answered: true, passed: []string{""}, stamped: true, gated: true, policies: []string{"Observe", "Create", "LateInitialize"}, external: "open",
				class: "db.t3.small", region: "eu-central-1"},
		},
		"CreationRefused": {
			reason: "Once steady, creating the instance needs an allowance: without one it is not answered at all, and the XR says why.",
			args:   args{desired: wantedAt("db.t3.small")},
			want:   want{withheld: []string{"resource rds (RDSInstance db-rds): withheld Create: no unconsumed allowance on XDatabase/db grants Create of rdsinstances; policies: xdatabase-policy"}},
		},
		"CreationHeldBack": {
			reason: "A creation propagation control holds back is made in Kubernetes only, behind a closed gate, its Create pending on it.",
			args:   args{phase: policy.PhaseInitializing, bare: true, desired: wantedAt("db.t3.small"), pacing: pacing{paced: true, hold: held}},
			want: want{answered: true, held: []string{""}, hold: held.why, stamped: true, gated: true, policies: readOnly, external: "pending",
				class: "db.t3.small", region: "eu-central-1"},
		},
		"HeldCreationReleased": {
			reason: "A creation held back in an earlier run is released when its turn comes: its pending Create opens the gate.",
			args: args{observed: storedWith(map[string]string{v1alpha1.AnnotationAllowances: allowance.Format([]allowance.Allowance{heldCreation})}),
				desired: wantedAt("db.t3.small"), pacing: pacing{paced: true}},
			want: want{answered: true, stamped: true, gated: true, policies: []string{"Observe", "Create", "LateInitialize"}, external: "open",
				class: "db.t3.small", region: "eu-central-1"},
		},
		"GateClosedWhileFrozen": {
			reason: "A frozen XR keeps the gate shut even for an allowed change, and says who froze it.",
			args:   args{frozen: "alice@example.com", observed: storedWith(nil), desired: wantedAt("db.t3.large")},
			want: want{answered: true, passed: []string{"spec.forProvider.instanceClass"}, stamped: true, gated: true, policies: readOnly, external: "open",
				withheld: []string{"resource rds (RDSInstance db-rds): withheld open gate: XDatabase/db is frozen by alice@example.com"},
				class:    "db.t3.large", region: "eu-central-1"},
		},
		"UnrestrictedKind": {
			reason: "A kind no policy names needs no cause: its change is let through, and it is neither stamped nor gated.",
			args: args{observed: bucket, desired: func(t *testing.T) map[string]any {
				b := bucket(t)
				_ = unstructured.SetNestedField(b, "public-read", "spec", "forProvider", "acl")
				return b
			}},
			want: want{answered: true, passed: []string{"spec.forProvider.acl"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			phase := tc.args.phase
			if phase == "" {
				phase = policy.PhaseSteady
			}
			r := permitRun(t, phase, !tc.args.bare)
			r.cfg.gate = r.cfg.gate.Defaulted()
			r.frozen = tc.args.frozen
			r.now = testNow
			r.xrTrace = allowance.Trace{allowance.HopOf(r.xr, 2)}
			var observed map[string]any
			if tc.args.observed != nil {
				observed = tc.args.observed(t)
			}
			desired := tc.args.desired(t)
			it := r.decide("rds", observed, desired)
			beforeObserved, beforeDesired := runtimeCopy(observed), runtimeCopy(desired)
			beforePassed, beforeSpec, beforeWanted := slices.Clone(it.ch.passed), runtimeCopy(map[string]any{"spec": it.ch.spec}), maps.Clone(it.ch.wanted)

			v := r.verdictOf(it, tc.args.pacing)

			got := want{answered: v.it.ok, passed: paths(v.ch.passed), held: paths(v.ch.held), stamped: v.stamp != nil}
			if v.hold != nil {
				got.hold = v.hold.why
			}
			for _, w := range slices.Concat(it.ch.reports, v.reports) {
				got.withheld = append(got.withheld, w.String())
			}
			if st := v.stamp; st != nil {
				got.gated, got.policies = st.gated, st.policies
				as, err := allowance.Parse(st.annotations[v1alpha1.AnnotationAllowances])
				if err != nil {
					t.Fatalf("%s\nthe stamped allowances do not parse: %v", tc.reason, err)
				}
				got.external = externalState(as)
				if st.closing == nil && (st.annotations[v1alpha1.AnnotationApplied] == "" || st.annotations[v1alpha1.AnnotationTrace] == "") {
					t.Errorf("%s\nthe stamp lacks the applied record or the trace: %v", tc.reason, st.annotations)
				}
			}
			if got.answered {
				answered := v.ch.object(desired)
				got.class, _, _ = unstructured.NestedString(answered, "spec", "forProvider", "instanceClass")
				got.region, _, _ = unstructured.NestedString(answered, "spec", "forProvider", "region")
				if v.stamp == nil {
					got.class, got.region = "", "" // a bucket has neither
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nverdict: -want +got:\n%s", tc.reason, diff)
			}

			if diff := cmp.Diff(beforeDesired, desired); diff != "" {
				t.Errorf("%s\nthe verdict wrote the desired resource: -before +after:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(beforeObserved, observed); observed != nil && diff != "" {
				t.Errorf("%s\nthe verdict wrote the observed resource: -before +after:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(beforePassed, it.ch.passed, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nthe verdict edited what the decision let through: -before +after:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(beforeSpec, map[string]any{"spec": it.ch.spec}); diff != "" {
				t.Errorf("%s\nthe verdict edited the decision's spec: -before +after:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(beforeWanted, it.ch.wanted); diff != "" {
				t.Errorf("%s\nthe verdict edited the decision's record of what the pipeline wants: -before +after:\n%s", tc.reason, diff)
			}
		})
	}
}

// paths are the paths ms change.
func paths(ms []mutation.Mutation) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Path)
	}
	return out
}

// externalState is "pending" when an External allowance of as waits for
// propagation control, "open" when an unconsumed one does not, "" when
// there is none.
func externalState(as []allowance.Allowance) string {
	state := ""
	for _, a := range as {
		switch {
		case a.Relation != v1alpha1.RelationExternal || a.Consumed:
		case a.IsPending():
			return "pending"
		default:
			state = "open"
		}
	}
	return state
}
