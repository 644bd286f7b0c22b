package derivation

import (
	"strings"
	"testing"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// syncRevision is revision n of Composition xdatabases: revision 1 patches
// the size into the bucket, revision 2 also its region.
func syncRevision(t *testing.T, n int64) *xpv1.CompositionRevision {
	t.Helper()
	patches := `
          - {fromFieldPath: spec.size, toFieldPath: spec.forProvider.size}`
	if n >= 2 {
		patches += `
          - {fromFieldPath: spec.region, toFieldPath: spec.forProvider.region}`
	}
	y := `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositionRevision
metadata:
  name: xdatabases-` + strings.Repeat("a", int(n)) + `
  labels: {crossplane.io/composition-name: xdatabases}
spec:
  revision: ` + string(rune('0'+n)) + `
  compositeTypeRef: {apiVersion: example.com/v1alpha1, kind: XDatabase}
  mode: Pipeline
  pipeline:
  - step: resources
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: bucket
        base: {apiVersion: recorder.kausality.io/v1alpha1, kind: Bucket, spec: {forProvider: {size: 1}}}
        patches:` + patches + `
`
	r := &xpv1.CompositionRevision{}
	if err := yaml.Unmarshal([]byte(y), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// syncComposition is the Composition, annotated as an administrator
// asks for a derived policy.
func syncComposition() *xpv1.Composition {
	return &xpv1.Composition{ObjectMeta: metav1.ObjectMeta{Name: "xdatabases", Annotations: map[string]string{
		AnnotationDerivePolicy:   "true",
		AnnotationDeriveSubjects: "group=platform-team, propagator=crossplane-system/crossplane",
		AnnotationDeriveDeleting: "delete",
	}}}
}

// syncDesired is the policy revision n derives, and its model.
func syncDesired(t *testing.T, n int64) (*Model, *v1alpha1.AllowancePolicy) {
	t.Helper()
	c := syncComposition()
	rev := syncRevision(t, n)
	o, err := OptionsFrom(c)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadRevision(c.GetName(), rev)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Desired(m, RevisionRef(c.GetName(), rev), o)
	if err != nil {
		t.Fatal(err)
	}
	return m, p
}

// stored is p as the API server returns it: a resource version, and the
// CRD's defaults the server may or may not fill in.
func stored(p *v1alpha1.AllowancePolicy, edit func(*v1alpha1.AllowancePolicy)) *v1alpha1.AllowancePolicy {
	p = p.DeepCopy()
	p.ResourceVersion = "7"
	if edit != nil {
		edit(p)
	}
	return p
}

func TestDecide(t *testing.T) {
	_, rev1 := syncDesired(t, 1)
	m2, rev2 := syncDesired(t, 2)
	m1, _ := syncDesired(t, 1)
	dropRule := func(trigger string) func(*v1alpha1.AllowancePolicy) {
		return func(p *v1alpha1.AllowancePolicy) {
			var rs []v1alpha1.Rule
			for _, r := range p.Spec.Rules {
				if r.Trigger != trigger {
					rs = append(rs, r)
				}
			}
			p.Spec.Rules = rs
		}
	}
	cases := map[string]struct {
		reason  string
		m       *Model
		desired *v1alpha1.AllowancePolicy
		live    *v1alpha1.AllowancePolicy
		// want
		action    Action
		spec      *v1alpha1.AllowancePolicySpec
		from      string
		status    metav1.ConditionStatus
		reason2   string
		mentions  []string
		notInMsgs []string
	}{
		"Absent": {
			reason: "A Composition without its policy gets one, named after the XR's plural.",
			m:      m1, desired: rev1, live: nil,
			action: ActionCreate, spec: &rev1.Spec, from: "xdatabases/1", status: metav1.ConditionTrue, reason2: ReasonSynced,
		},
		"UpToDate": {
			reason: "The policy the provider wrote for this revision needs no write.",
			m:      m1, desired: rev1, live: stored(rev1, nil),
			action: ActionNone, status: metav1.ConditionTrue, reason2: ReasonSynced,
		},
		"StoredWithoutDefaults": {
			reason: "The CRD's defaults (mode, drift, relation) do not make a stored policy look edited.",
			m:      m1, desired: rev1,
			live: stored(rev1, func(p *v1alpha1.AllowancePolicy) {
				p.Spec.Mode, p.Spec.Drift = "", ""
				p.Spec.Rules[0].Policies[0].Relation = ""
			}),
			action: ActionNone, status: metav1.ConditionTrue, reason2: ReasonSynced,
		},
		"NewRevisionWidensUnedited": {
			reason: "A new revision with a new patch widens the policy the provider wrote, and says what it added.",
			m:      m2, desired: rev2, live: stored(rev1, nil),
			action: ActionUpdate, spec: &rev2.Spec, from: "xdatabases/2", status: metav1.ConditionTrue, reason2: ReasonSynced,
			mentions: []string{"add: spec.region", "applied from xdatabases/1"},
		},
		"NewRevisionNarrowsUnedited": {
			reason: "A revision that no longer needs a rule narrows the policy the provider wrote.",
			m:      m1, desired: rev1, live: stored(rev2, nil),
			action: ActionUpdate, spec: &rev1.Spec, from: "xdatabases/1", status: metav1.ConditionTrue, reason2: ReasonSynced,
			mentions: []string{"remove: spec.region"},
		},
		"SameRulesNewRevision": {
			reason: "A revision that derives the same spec only moves derived-from.",
			m:      m1, desired: rev1,
			live:   stored(rev1, func(p *v1alpha1.AllowancePolicy) { p.Annotations[AnnotationDerivedFrom] = "xdatabases/0" }),
			action: ActionUpdate, spec: &rev1.Spec, from: "xdatabases/1", status: metav1.ConditionTrue, reason2: ReasonSynced,
		},
		"EditedNeverWidened": {
			reason: "An administrator narrowed the policy (no size rule); the new revision's wider derivation is reported, not written.",
			m:      m2, desired: rev2, live: stored(rev1, dropRule("spec.size")),
			action: ActionConflict, status: metav1.ConditionFalse, reason2: ReasonConflict,
			mentions: []string{"edited since the provider derived it from xdatabases/1", "derivation of xdatabases/2 is not applied", "add: spec.region", "spec.size"},
		},
		"EditedNeverNarrowed": {
			reason: "An edited policy is not narrowed either: the rule the new revision no longer needs is reported.",
			m:      m1, desired: rev1,
			live:   stored(rev2, func(p *v1alpha1.AllowancePolicy) { p.Spec.Subjects = p.Spec.Subjects[:1] }),
			action: ActionConflict, status: metav1.ConditionFalse, reason2: ReasonConflict,
			mentions: []string{"remove: spec.region", "change spec.subjects"},
		},
		"EditedToTheDerivation": {
			reason: "An edit that makes the spec what the derivation says is adopted: only the annotations are written.",
			m:      m2, desired: rev2,
			live: stored(rev2, func(p *v1alpha1.AllowancePolicy) {
				p.Annotations[AnnotationDerivedFrom] = "xdatabases/1"
				p.Annotations[AnnotationDerivedHash] = Hash(rev1.Spec)
			}),
			action: ActionUpdate, spec: &rev2.Spec, from: "xdatabases/2", status: metav1.ConditionTrue, reason2: ReasonSynced,
		},
		"DerivedByTheCLIDiffers": {
			reason: "A policy `kubectl kausality policy derive` wrote (derived-from the Composition, no hash) that differs is not the provider's to overwrite.",
			m:      m2, desired: rev2,
			live: stored(rev1, func(p *v1alpha1.AllowancePolicy) {
				p.Annotations = map[string]string{AnnotationDerivedFrom: "xdatabases"}
			}),
			action: ActionConflict, status: metav1.ConditionFalse, reason2: ReasonConflict,
			mentions: []string{"not written by the provider", "add: spec.region"},
		},
		"Foreign": {
			reason: "A hand-written policy of the same name is left alone.",
			m:      m1, desired: rev1,
			live:   stored(rev1, func(p *v1alpha1.AllowancePolicy) { p.Annotations = nil }),
			action: ActionForeign,
		},
		"DerivedFromAnother": {
			reason: "A policy another Composition keeps is left alone.",
			m:      m1, desired: rev1,
			live:   stored(rev1, func(p *v1alpha1.AllowancePolicy) { p.Annotations[AnnotationDerivedFrom] = "xdatabases-v2/3" }),
			action: ActionForeign,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Decide(tc.m, tc.desired, tc.live, nil)
			if d.Action != tc.action {
				t.Fatalf("%s\nDecide(...).Action = %s, want %s (condition %+v)", tc.reason, d.Action, tc.action, d.Condition)
			}
			if tc.spec != nil {
				if d.Policy == nil {
					t.Fatalf("%s\nDecide(...) writes no policy", tc.reason)
				}
				if diff := cmp.Diff(Normalized(*tc.spec), Normalized(d.Policy.Spec)); diff != "" {
					t.Errorf("%s\nDecide(...) spec: -want, +got:\n%s", tc.reason, diff)
				}
				if got := d.Policy.Annotations[AnnotationDerivedFrom]; got != tc.from {
					t.Errorf("%s\nderived-from = %q, want %q", tc.reason, got, tc.from)
				}
				if got, want := d.Policy.Annotations[AnnotationDerivedHash], Hash(d.Policy.Spec); got != want {
					t.Errorf("%s\nderived-hash = %q, want the hash of the spec written, %q", tc.reason, got, want)
				}
				if tc.live != nil && d.Policy.ResourceVersion != tc.live.ResourceVersion {
					t.Errorf("%s\nthe update does not carry the live resource version: a concurrent edit would be lost", tc.reason)
				}
			} else if d.Policy != nil {
				t.Errorf("%s\nDecide(...) writes %s, want no write", tc.reason, d.Policy.GetName())
			}
			if tc.action == ActionForeign {
				return
			}
			if d.Condition.Type != ConditionDerived || d.Condition.Status != tc.status || d.Condition.Reason != tc.reason2 {
				t.Errorf("%s\ncondition = %s %s %s, want %s %s %s", tc.reason, d.Condition.Type, d.Condition.Status, d.Condition.Reason, ConditionDerived, tc.status, tc.reason2)
			}
			for _, s := range tc.mentions {
				if !strings.Contains(d.Condition.Message, s) {
					t.Errorf("%s\ncondition message %q does not mention %q", tc.reason, d.Condition.Message, s)
				}
			}
		})
	}
}

func TestDesired(t *testing.T) {
	_, p := syncDesired(t, 2)
	if p.GetName() != "xdatabases" {
		t.Errorf("name = %q, want the XR's plural xdatabases, as the CLI names it", p.GetName())
	}
	want := []v1alpha1.Subject{
		{Kind: v1alpha1.SubjectGroup, Name: "platform-team", MayInitiate: true},
		{Kind: v1alpha1.SubjectServiceAccount, Namespace: "crossplane-system", Name: "crossplane"},
	}
	if diff := cmp.Diff(want, p.Spec.Subjects); diff != "" {
		t.Errorf("subjects from %s: -want, +got:\n%s", AnnotationDeriveSubjects, diff)
	}
	if p.Spec.Mode != v1alpha1.ModeEnforce || p.Spec.Drift != v1alpha1.DriftDeny {
		t.Errorf("mode %q drift %q: the CRD's defaults must be written out so the stored spec hashes the same", p.Spec.Mode, p.Spec.Drift)
	}
	if !strings.Contains(strings.Join(triggersOf(p), ","), "spec.region") {
		t.Errorf("rules %v: want one for spec.region, which revision 2 patches", triggersOf(p))
	}
	hasDelete := false
	for _, e := range p.Spec.Deleting.Policies {
		hasDelete = hasDelete || (e.Relation == v1alpha1.RelationExternal && v1alpha1.GrantsVerb(e.Verbs, v1alpha1.VerbDelete))
	}
	if !hasDelete {
		t.Errorf("deleting %+v: %s: delete grants the external Delete", p.Spec.Deleting, AnnotationDeriveDeleting)
	}
}

func triggersOf(p *v1alpha1.AllowancePolicy) []string {
	var out []string
	for _, r := range p.Spec.Rules {
		out = append(out, r.Trigger)
	}
	return out
}

func TestOptionsFrom(t *testing.T) {
	cases := map[string]struct {
		ann     map[string]string
		name    string
		err     string
		protect bool
	}{
		"Defaults":          {ann: map[string]string{}},
		"Name":              {ann: map[string]string{AnnotationDerivedPolicyName: "databases"}, name: "databases"},
		"BadName":           {ann: map[string]string{AnnotationDerivedPolicyName: "Not A Name"}, err: AnnotationDerivedPolicyName},
		"BadSubjects":       {ann: map[string]string{AnnotationDeriveSubjects: "team=x"}, err: AnnotationDeriveSubjects},
		"BadServiceAccount": {ann: map[string]string{AnnotationDeriveSubjects: "service-account=nonamespace"}, err: "not namespace/name"},
		"BadDeleting":       {ann: map[string]string{AnnotationDeriveDeleting: "cascade"}, err: AnnotationDeriveDeleting},
		"Protection":        {ann: map[string]string{AnnotationDeriveDeletionProtection: "true"}, protect: true},
		"BadProtection":     {ann: map[string]string{AnnotationDeriveDeletionProtection: "yes please"}, err: AnnotationDeriveDeletionProtection},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := OptionsFrom(&xpv1.Composition{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: tc.ann}})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("OptionsFrom(%v) error = %v, want one naming %q", tc.ann, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Name != tc.name || o.DeletionProtection != tc.protect || o.Deleting != DeletingOrphan {
				t.Errorf("OptionsFrom(%v) = name %q protection %v deleting %q, want %q %v orphan", tc.ann, o.Name, o.DeletionProtection, o.Deleting, tc.name, tc.protect)
			}
		})
	}
}

func TestParseSubjectList(t *testing.T) {
	got, err := ParseSubjectList("group=platform-team,\n --user=alice@example.com, service-account=team-a/deployer ,propagator=crossplane-system/crossplane,")
	if err != nil {
		t.Fatal(err)
	}
	// The same subjects, in the same order, as the CLI's flags give.
	want, err := Subjects([]string{"alice@example.com"}, []string{"platform-team"}, []string{"team-a/deployer"}, []string{"crossplane-system/crossplane"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSubjectList: -want (the CLI's), +got:\n%s", diff)
	}
	if _, err := ParseSubjectList("platform-team"); err == nil {
		t.Error("ParseSubjectList(platform-team) accepted an entry without a kind: it would silently match nobody")
	}
}

func TestLatest(t *testing.T) {
	r1, r2, r3 := syncRevision(t, 1), syncRevision(t, 2), syncRevision(t, 3)
	r3.Labels[xpv1.LabelCompositionName] = "other"
	if got := Latest("xdatabases", []xpv1.CompositionRevision{*r2, *r3, *r1}); got == nil || got.GetName() != r2.GetName() {
		t.Errorf("Latest = %v, want %s: the highest spec.revision of this Composition's", got, r2.GetName())
	}
	if got := Latest("none", []xpv1.CompositionRevision{*r1}); got != nil {
		t.Errorf("Latest of a Composition without revisions = %s, want none", got.GetName())
	}
	if got := RevisionRef("xdatabases", r2); got != "xdatabases/2" {
		t.Errorf("RevisionRef = %q, want xdatabases/2", got)
	}
}

func TestTruncate(t *testing.T) {
	s := strings.Repeat("→", maxMessage)
	got := truncate(s)
	if len(got) > maxMessage || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, "→") {
		t.Errorf("truncate: %d bytes, want at most %d ending in ...", len(got), maxMessage)
	}
	if strings.ContainsRune(got, '\uFFFD') || !utfValid(got) {
		t.Error("truncate cut a rune in half")
	}
}

func utfValid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
