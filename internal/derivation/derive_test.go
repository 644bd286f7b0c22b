package derivation

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// corpusDeleting is what each hand-written corpus policy lets a deletion
// do, so that the derived one is compared under the same choice: the
// flag is the administrator's, not the Composition's.
var corpusDeleting = map[string]Deleting{
	"cluster": DeletingDelete, "network": DeletingDelete,
	"database": DeletingOrphan, "storage": DeletingOrphan, "platform": DeletingOrphan,
}

// explained says why the derived policy and the hand-written one of a
// corpus case differ, and why check finds gaps in the hand-written one,
// by XR field (a trigger) or by "create Kind". The derived policy mirrors
// every patch; the hand-written ones grant only the changes the platform
// team meant to let through.
var explained = map[string]map[string]string{
	"cluster": {
		"spec.parameters.region":             "moving a cluster to another region replaces it: the hand-written policy withholds it",
		"spec.parameters.subnetIds":          "re-homing the control plane and node pools is withheld by hand; only resizing is granted",
		"spec.parameters.version":            "a version upgrade goes through an UpgradeAllowance or a rule of its own, by hand",
		"spec.parameters.nodes.instanceType": "changing the node type replaces the node pools: withheld by hand",
	},
	"database": {
		"spec.parameters.region":        "moving a database to another region replaces it: withheld by hand",
		"spec.parameters.subnetIds":     "re-homing the subnet group is withheld by hand; only storage resizes are granted",
		"spec.parameters.engine":        "changing the engine replaces the database: withheld by hand",
		"spec.parameters.engineVersion": "an engine upgrade is withheld by hand (an UpgradeAllowance or a rule of its own)",
		"spec.parameters.size":          "resizing the instance class restarts the database: withheld by hand",
	},
	"network": {
		"spec.parameters.id":                          "renaming the network retags it: withheld by hand, only the cost center is granted",
		"spec.parameters.region":                      "moving a network to another region replaces it: withheld by hand",
		"spec.parameters.vpcCidrBlock":                "changing the VPC's CIDR replaces it: withheld by hand",
		"spec.parameters.subnets[0].availabilityZone": "moving a subnet replaces it: withheld by hand",
		"spec.parameters.subnets[0].cidrBlock":        "changing a subnet's CIDR replaces it: withheld by hand",
		"spec.parameters.subnets[1].availabilityZone": "moving a subnet replaces it: withheld by hand",
		"spec.parameters.subnets[1].cidrBlock":        "changing a subnet's CIDR replaces it: withheld by hand",
	},
	"platform": {
		"spec.parameters.id":            "renaming the platform's network is withheld by hand",
		"spec.parameters.region":        "moving the platform is withheld by hand",
		"spec.parameters.database.size": "resizing the database is withheld by hand; only storage is granted",
	},
	"storage": {
		"spec.parameters.region":     "moving a bucket replaces it: withheld by hand",
		"create BucketVersioning":    "the hand-written policy composes the versioning only through its versioning rule, since function-cel-filter drops it until spec.parameters.versioning is true; derivation cannot read that step, so the derived initializing bound lets it be created with the bucket (the filter still drops it)",
		"spec.parameters.versioning": "function-cel-filter composes the versioning when it turns true; no patch reads it; derive by experiment notes that turning it on composes the versioning",
	},
}

// TestDerive derives a policy from every Composition under examples/ and
// compares it with its golden file. For the corpus, whose cases come with
// a hand-written policy, the golden also lists where the two decide the
// composition's changes differently and what check finds in the
// hand-written policy, each with why; an unexplained difference fails.
func TestDerive(t *testing.T) {
	defs := allXRDs(t)
	for name, path := range compositions(t) {
		t.Run(name, func(t *testing.T) {
			c := strings.TrimPrefix(name, "corpus-")
			// The five compositions of the corpus come with a hand-written
			// policy.yaml; the public pipelines beside them (app,
			// access-keys, eks) with the policies their scenarios use.
			_, err := os.Stat(filepath.Join(filepath.Dir(path), "policy.yaml"))
			corpus := c != name && err == nil
			deleting := DeletingOrphan
			if corpus {
				deleting = corpusDeleting[c]
			}
			comp := readComposition(t, path)
			rm, err := Read(comp)
			if err != nil {
				t.Fatal(err)
			}
			if err := NeedsRender(comp, rm); err != nil {
				// Only a render reads it (TestExperimentChecksEveryPipeline
				// in the CLI does): deriving it structurally is refused.
				if !strings.Contains(err.Error(), "--functions") || !strings.Contains(err.Error(), comp.GetName()) {
					t.Errorf("NeedsRender(...) = %v, want it to name the Composition and --functions", err)
				}
				return
			}
			r := deriveExample(t, path, defs, deleting)
			out, err := Render(r)
			if err != nil {
				t.Fatal(err)
			}
			// What Render writes reads back as the policy, comments and
			// flow style notwithstanding.
			var back v1alpha1.AllowancePolicy
			if err := yaml.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(r.Policy, &back); diff != "" {
				t.Errorf("Render(...) reads back differently: -want, +got:\n%s", diff)
			}
			m, err := Read(readComposition(t, path))
			if err != nil {
				t.Fatal(err)
			}
			// A derived policy covers its own Composition exactly.
			rep, err := Check([]*Model{m}, []v1alpha1.AllowancePolicy{*r.Policy}, defs)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Findings {
				t.Errorf("check of the derived policy: %s", f)
			}
			if corpus {
				out = append(out, compare(t, c, m, defs, r.Policy)...)
			}
			golden(t, name, out)
		})
	}
}

// compare is the golden's part on the hand-written policy: differences of
// outcome and check findings, each explained.
func compare(t *testing.T, c string, m *Model, defs *Definitions, derived *v1alpha1.AllowancePolicy) []byte {
	t.Helper()
	hand := readPolicies(t, filepath.Join(examples, "corpus", c, "policy.yaml"))
	want := outcomes(t, m, defs, hand)
	got := outcomes(t, m, defs, []v1alpha1.AllowancePolicy{*derived})
	used := map[string]bool{}
	why := func(key string) string {
		used[key] = true
		w, ok := explained[c][key]
		if !ok {
			t.Errorf("corpus %s: difference on %s is not explained: add it to explained", c, key)
		}
		return w
	}
	var b strings.Builder
	b.WriteString("# Compared with policy.yaml, for the changes this Composition makes\n# (each evaluated with internal/policy: derived | hand-written):\n")
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if got[k].value == want[k].value {
			continue
		}
		fmt.Fprintf(&b, "# - %s: %s | %s\n#   why: %s\n", k, got[k].value, want[k].value, why(got[k].group))
	}
	rep, err := Check([]*Model{m}, hand, defs)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("# check composition.yaml against policy.yaml:\n")
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "# - %s\n#   why: %s\n", f, why(f.Field))
	}
	for k := range explained[c] {
		if !used[k] {
			t.Errorf("corpus %s: explanation of %s explains nothing: remove it", c, k)
		}
	}
	return []byte(b.String())
}

// outcome is what a set of policies decides for one change, and the XR
// field or creation it belongs to.
type outcome struct{ value, group string }

// alice is a member of the group every corpus policy lets initiate.
var alice = policy.Identity{Username: "alice", Groups: []string{"platform-team"}}

// outcomes evaluates, under ps, every change m makes: each patch's XR
// field changed (and, where the field is optional, set and unset) as
// admission and the function would see it, the creation of each composed
// kind, and its deletion.
func outcomes(t *testing.T, m *Model, defs *Definitions, ps []v1alpha1.AllowancePolicy) map[string]outcome {
	t.Helper()
	set, errs := policy.NewCache().For(m.XR.GroupVersion().String(), m.XR.Kind, ps)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	out := map[string]outcome{}
	for _, f := range m.Flows {
		c := childOf(t, defs, f.Template)
		for _, from := range f.From {
			if root(from) != "spec" {
				continue
			}
			for _, v := range verbsOf(f, defs.Schema(m.XR)) {
				old, obj := xrChange(t, m, from, v)
				d, err := set.Evaluate(policy.Request{Object: obj, OldObject: old, User: alice, Now: time.Unix(0, 0)})
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("%s %s → %s %s", v, from, f.Template.GVK.Kind, f.To)
				out[key] = outcome{group: from, value: decided(set, d.Allowances, c, mutation.Mutation{Path: f.To, Verb: v})}
			}
		}
	}
	for _, tp := range m.Templates {
		c := childOf(t, defs, tp)
		ext := ""
		if c.Class.Gated() {
			ext = fmt.Sprintf(", external Create %t", set.CreationGrantsExternal(c))
		}
		out["create "+c.Kind] = outcome{group: "create " + c.Kind, value: fmt.Sprintf("create %t%s", set.CreationCovers(c), ext)}
		del := set.DeletionBound(alice)
		out["delete "+c.Kind] = outcome{group: "delete " + c.Kind, value: fmt.Sprintf("delete %t, external %v", del.AllowsChild(c, v1alpha1.VerbDelete), del.ExternalVerbs(c))}
	}
	return out
}

func childOf(t *testing.T, defs *Definitions, tp *Template) policy.Child {
	t.Helper()
	k, err := resolveOne(tp.GVK, defs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return policy.Child{APIGroup: tp.GVK.Group, APIVersion: tp.GVK.Version, Kind: tp.GVK.Kind, Resource: k.Resource, Class: k.Class}
}

// xrChange is an XR past its creation before and after a change of field.
func xrChange(t *testing.T, m *Model, field string, v v1alpha1.MutationVerb) (old, obj map[string]any) {
	t.Helper()
	xr := func(value any) map[string]any {
		o := map[string]any{
			"apiVersion": m.XR.GroupVersion().String(), "kind": m.XR.Kind,
			"metadata": map[string]any{"name": "x", "namespace": "default", "generation": int64(1)},
			"spec":     map[string]any{},
			"status":   map[string]any{"observedGeneration": int64(1)},
		}
		if value != nil {
			if err := fieldpath.Pave(o).SetValue(field, value); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	switch v {
	case v1alpha1.MutationInsert:
		return xr(nil), xr("new")
	case v1alpha1.MutationDelete:
		return xr("old"), xr(nil)
	default:
		return xr("old"), xr("new")
	}
}

// decided is whether the allowances let the mutation through to the
// composed resource, and the External verbs they open for it.
func decided(set policy.Set, as []allowance.Allowance, c policy.Child, m mutation.Mutation) string {
	child := !set.Restricts(c) || slices.ContainsFunc(as, func(a allowance.Allowance) bool {
		return a.Relation == v1alpha1.RelationControllerChild && policy.MatchesChild(a.Target, c) &&
			v1alpha1.GrantsVerb(a.Verbs, v1alpha1.VerbUpdate) && (len(a.Mutations) == 0 || mutation.CoveredBy(m, a.Mutations))
	})
	s := "withheld"
	if child {
		s = "permitted"
	}
	if !c.Class.Gated() {
		return s
	}
	if !set.RestrictsExternal(c) {
		return s + ", external unrestricted"
	}
	var verbs []string
	for _, a := range as {
		if a.Relation == v1alpha1.RelationExternal && policy.MatchesExternal(a.Target, c) {
			verbs = append(verbs, a.Verbs...)
		}
	}
	slices.Sort(verbs)
	return fmt.Sprintf("%s, external %v", s, slices.Compact(verbs))
}

// TestDeriveHonoursManagementPolicies: the database Composition of the
// corpus (after upbound's configuration-aws-database) with its SubnetGroup
// imported observe-only and its Instance kept on deletion, as Crossplane's
// docs show: derive writes no External Create for the SubnetGroup and no
// External Delete for the Instance (Kausality never opens them anyway),
// says why in its notes, and check finds the derived policy complete.
func TestDeriveHonoursManagementPolicies(t *testing.T) {
	defs := allXRDs(t)
	comp := readComposition(t, filepath.Join(examples, "corpus", "database", "composition.yaml"))
	m, err := Read(comp)
	if err != nil {
		t.Fatal(err)
	}
	asks := map[string][]any{
		"SubnetGroup": {"Observe"},
		"Instance":    {"Create", "Update", "Observe", "LateInitialize"},
	}
	for _, tp := range m.Templates {
		ps, ok := asks[tp.GVK.Kind]
		if !ok {
			continue
		}
		if err := fieldpath.Pave(tp.Base).SetValue("spec.managementPolicies", ps); err != nil {
			t.Fatal(err)
		}
		delete(asks, tp.GVK.Kind)
	}
	if len(asks) > 0 {
		t.Fatalf("the corpus database Composition composes no %v", asks)
	}
	r, err := Derive(m, Options{Subjects: corpusSubjects, Deleting: DeletingDelete, Resolver: defs, XRSchema: defs.Schema(m.XR)})
	if err != nil {
		t.Fatal(err)
	}
	external := func(entries []v1alpha1.PolicyEntry, kind, verb string) bool {
		return slices.ContainsFunc(entries, func(e v1alpha1.PolicyEntry) bool {
			return e.Relation == v1alpha1.RelationExternal && e.Target.External["kind"] == kind && slices.Contains(e.Verbs, verb)
		})
	}
	init, del := r.Policy.Spec.Initializing.Policies, r.Policy.Spec.Deleting.Policies
	if external(init, "SubnetGroup", v1alpha1.VerbCreate) {
		t.Errorf("derive granted the observe-only SubnetGroup's External Create")
	}
	if !external(init, "Instance", v1alpha1.VerbCreate) {
		t.Errorf("derive dropped the Instance's External Create, which its Composition asks for")
	}
	if external(del, "Instance", v1alpha1.VerbDelete) {
		t.Errorf("derive granted the kept Instance's External Delete")
	}
	if external(del, "SubnetGroup", v1alpha1.VerbDelete) {
		// Observe-only asks for no Delete either.
		t.Errorf("derive granted the observe-only SubnetGroup's External Delete")
	}
	for _, want := range []string{"SubnetGroup.rds.aws.m.upbound.io: no External Create rule", "Instance.rds.aws.m.upbound.io: no External Delete rule"} {
		if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, want) }) {
			t.Errorf("notes %q do not say %q", r.Notes, want)
		}
	}
	rep, err := Check([]*Model{m}, []v1alpha1.AllowancePolicy{*r.Policy}, defs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("check of the derived policy: %s", f)
	}
}
