package derivation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// The annotations of keeping a derived policy in sync. The administrator
// writes the first five on a Composition; the provider writes the derived
// ones on the policy.
const (
	// AnnotationDerivePolicy set to "true" on a Composition asks the
	// provider (run with --derive-policies) to keep a policy derived from
	// its latest revision.
	AnnotationDerivePolicy = "kausality.io/derive-policy"
	// AnnotationDerivedPolicyName names the derived policy; default the
	// XR's plural, as `kubectl kausality policy derive` names it.
	AnnotationDerivedPolicyName = "kausality.io/derived-policy-name"
	// AnnotationDeriveSubjects lists the policy's subjects as the CLI's
	// flags name them, comma or newline separated:
	// "group=platform-team, propagator=crossplane-system/crossplane".
	AnnotationDeriveSubjects = "kausality.io/derive-subjects"
	// AnnotationDeriveDeleting is orphan (default) or delete, the CLI's
	// --deleting.
	AnnotationDeriveDeleting = "kausality.io/derive-deleting"
	// AnnotationDeriveDeletionProtection "true" sets
	// spec.deletionProtection, the CLI's --deletion-protection.
	AnnotationDeriveDeletionProtection = "kausality.io/derive-deletion-protection"
	// AnnotationDerivedHash is the hash of the spec the provider last
	// wrote. A live spec with another hash was edited by someone else, and
	// the provider never overwrites it: an administrator's narrowing must
	// not be widened again behind their back.
	AnnotationDerivedHash = "kausality.io/derived-hash"
)

// ConditionDerived is the condition the provider keeps on a derived policy:
// True while the policy is what the Composition's latest revision derives,
// False with reason Conflict while an edit keeps the derivation out.
const ConditionDerived = "Derived"

// Reasons of the Derived condition.
const (
	// ReasonSynced: the spec is the latest revision's derivation.
	ReasonSynced = "Synced"
	// ReasonConflict: the spec was edited since the provider wrote it and
	// differs from the latest revision's derivation, which is not applied.
	ReasonConflict = "Conflict"
)

// maxMessage bounds the condition message well below the API's 32768, so
// a Composition with hundreds of patches cannot make the status
// unwritable.
const maxMessage = 4096

// Wants reports whether a Composition's annotations ask for a derived
// policy.
func Wants(annotations map[string]string) bool {
	return annotations[AnnotationDerivePolicy] == "true"
}

// OptionsFrom reads the derivation options from a Composition's
// annotations; the Resolver and XRSchema are the caller's.
func OptionsFrom(c *xpv1.Composition) (Options, error) {
	ann := c.GetAnnotations()
	o := Options{Name: ann[AnnotationDerivedPolicyName]}
	if o.Name != "" {
		if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
			return Options{}, errors.Errorf("Composition %s: annotation %s: %s", c.GetName(), AnnotationDerivedPolicyName, strings.Join(errs, "; "))
		}
	}
	var err error
	if o.Subjects, err = ParseSubjectList(ann[AnnotationDeriveSubjects]); err != nil {
		return Options{}, errors.Wrapf(err, "Composition %s: annotation %s", c.GetName(), AnnotationDeriveSubjects)
	}
	if o.Deleting, err = ParseDeleting(ann[AnnotationDeriveDeleting]); err != nil {
		return Options{}, errors.Wrapf(err, "Composition %s: annotation %s", c.GetName(), AnnotationDeriveDeleting)
	}
	if v := ann[AnnotationDeriveDeletionProtection]; v != "" {
		if o.DeletionProtection, err = strconv.ParseBool(v); err != nil {
			return Options{}, errors.Wrapf(err, "Composition %s: annotation %s", c.GetName(), AnnotationDeriveDeletionProtection)
		}
	}
	return o, nil
}

// ParseSubjectList parses subjects written as the CLI's flags, without the
// dashes: user=, group=, service-account= and propagator= entries
// separated by commas or newlines. One syntax for the flag and the
// annotation, so a policy derived by hand and one kept in sync agree.
func ParseSubjectList(s string) ([]v1alpha1.Subject, error) {
	var users, groups, sas, props []string
	for _, e := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, errors.Errorf("entry %q is not kind=name", e)
		}
		switch strings.TrimPrefix(strings.TrimSpace(k), "--") {
		case "user":
			users = append(users, strings.TrimSpace(v))
		case "group":
			groups = append(groups, strings.TrimSpace(v))
		case "service-account":
			sas = append(sas, strings.TrimSpace(v))
		case "propagator":
			props = append(props, strings.TrimSpace(v))
		default:
			return nil, errors.Errorf("entry %q: %q is not user, group, service-account or propagator", e, k)
		}
	}
	return Subjects(users, groups, sas, props)
}

// Latest is the Composition's revision Crossplane made last, the highest
// spec.revision among those labelled with its name; nil when there is none
// yet.
func Latest(composition string, revs []xpv1.CompositionRevision) *xpv1.CompositionRevision {
	var out *xpv1.CompositionRevision
	for i := range revs {
		r := &revs[i]
		if r.GetLabels()[xpv1.LabelCompositionName] != composition {
			continue
		}
		if out == nil || r.Spec.Revision > out.Spec.Revision {
			out = r
		}
	}
	return out
}

// RevisionRef is how a derived policy names its source:
// <composition>/<spec.revision>, as UpgradeAllowances name a revision.
func RevisionRef(composition string, rev *xpv1.CompositionRevision) string {
	return fmt.Sprintf("%s/%d", composition, rev.Spec.Revision)
}

// ReadRevision reads the pipeline of a Composition's revision. A revision
// is what XRs run, so the policy derives from it and not from the
// Composition, which may be ahead of its newest revision for a moment.
func ReadRevision(composition string, rev *xpv1.CompositionRevision) (*Model, error) {
	c := &xpv1.Composition{
		ObjectMeta: metav1.ObjectMeta{Name: composition},
		Spec: xpv1.CompositionSpec{
			CompositeTypeRef: rev.Spec.CompositeTypeRef, Mode: rev.Spec.Mode, Pipeline: rev.Spec.Pipeline,
		},
	}
	m, err := Read(c)
	if err != nil {
		return nil, errors.Wrapf(err, "CompositionRevision %s", rev.GetName())
	}
	return m, nil
}

// Desired is the policy to keep: the derivation of the revision, with the
// defaults the API server would add written out, and annotated with its
// source and the hash of its spec.
func Desired(m *Model, ref string, o Options) (*v1alpha1.AllowancePolicy, error) {
	r, err := Derive(m, o)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot derive a policy from %s", ref)
	}
	p := r.Policy
	p.Spec = Normalized(p.Spec)
	p.Annotations[AnnotationDerivedFrom] = ref
	p.Annotations[AnnotationDerivedHash] = Hash(p.Spec)
	return p, nil
}

// Normalized is spec with the CRD's defaults filled in, so that what the
// provider writes and what the API server stores hash the same.
func Normalized(spec v1alpha1.AllowancePolicySpec) v1alpha1.AllowancePolicySpec {
	s := *spec.DeepCopy()
	if s.Mode == "" {
		s.Mode = v1alpha1.ModeEnforce
	}
	if s.Drift == "" {
		s.Drift = v1alpha1.DriftDeny
	}
	fill := func(ps []v1alpha1.PolicyEntry) {
		for i := range ps {
			if ps[i].Relation == "" {
				ps[i].Relation = v1alpha1.RelationControllerChild
			}
		}
	}
	if s.Initializing != nil {
		fill(s.Initializing.Policies)
	}
	if s.Deleting != nil {
		fill(s.Deleting.Policies)
	}
	for i := range s.Rules {
		fill(s.Rules[i].Policies)
	}
	return s
}

// Hash is a short hash of the normalized spec.
func Hash(spec v1alpha1.AllowancePolicySpec) string {
	b, _ := json.Marshal(Normalized(spec)) // plain structs and string maps: never fails
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}

// Action is what a Decision does to the policy.
type Action string

// Actions.
const (
	// ActionCreate creates the policy.
	ActionCreate Action = "Create"
	// ActionUpdate writes the policy: its spec, when nobody edited it
	// since the provider wrote it, or only its annotations.
	ActionUpdate Action = "Update"
	// ActionNone writes nothing but the Derived condition.
	ActionNone Action = "None"
	// ActionConflict writes nothing but the Derived condition, which
	// reports what the derivation would change.
	ActionConflict Action = "Conflict"
	// ActionForeign leaves a policy of that name alone: it is not derived
	// from this Composition, so it is not the provider's to keep.
	ActionForeign Action = "Foreign"
)

// Decision is what to do with the live policy.
type Decision struct {
	Action Action
	// Policy is what to write for Create and Update.
	Policy *v1alpha1.AllowancePolicy
	// Condition is the Derived condition to set, except for Foreign.
	Condition metav1.Condition
	// Changes are what the desired policy grants that the live one does
	// not ("add: ...") and the reverse ("remove: ...").
	Changes []string
}

// Decide compares the desired policy of m with the live one (nil when
// absent). The live spec is replaced only when its hash is the one the
// provider recorded, so only what the provider wrote is ever rewritten;
// an edited spec that differs from the derivation is reported, whether
// the derivation would widen or narrow it.
func Decide(m *Model, desired, live *v1alpha1.AllowancePolicy, r Resolver) *Decision {
	ref := desired.Annotations[AnnotationDerivedFrom]
	synced := metav1.Condition{Type: ConditionDerived, Status: metav1.ConditionTrue, Reason: ReasonSynced,
		Message: fmt.Sprintf("the spec is what Composition revision %s derives", ref)}
	if live == nil {
		return &Decision{Action: ActionCreate, Policy: desired.DeepCopy(), Condition: synced}
	}
	from := live.GetAnnotations()[AnnotationDerivedFrom]
	if comp, _, _ := strings.Cut(from, "/"); comp != m.Name {
		return &Decision{Action: ActionForeign}
	}
	liveHash := Hash(live.Spec)
	if liveHash == desired.Annotations[AnnotationDerivedHash] {
		d := &Decision{Action: ActionNone, Condition: synced}
		if from != ref || live.GetAnnotations()[AnnotationDerivedHash] != liveHash {
			// Same rules, a new revision (or a policy the CLI derived
			// that matches exactly): record where it now comes from.
			d.Action, d.Policy = ActionUpdate, withAnnotations(live, desired)
		}
		return d
	}
	changes := Changes(m, desired, live, r)
	recorded := live.GetAnnotations()[AnnotationDerivedHash]
	if recorded != "" && recorded == liveHash {
		p := withAnnotations(live, desired)
		p.Spec = *desired.Spec.DeepCopy()
		synced.Message = truncate(fmt.Sprintf("the spec is what Composition revision %s derives; applied from %s: %s", ref, from, strings.Join(changes, "; ")))
		return &Decision{Action: ActionUpdate, Policy: p, Condition: synced, Changes: changes}
	}
	why := fmt.Sprintf("the spec was edited since the provider derived it from %s (its hash is no longer the one in %s)", from, AnnotationDerivedHash)
	if recorded == "" {
		why = fmt.Sprintf("the spec was not written by the provider (no %s) and differs from the derivation", AnnotationDerivedHash)
	}
	c := metav1.Condition{Type: ConditionDerived, Status: metav1.ConditionFalse, Reason: ReasonConflict,
		Message: truncate(fmt.Sprintf("%s, so the derivation of %s is not applied; it would %s. Make the change in the Composition, or delete the policy to have it derived afresh",
			why, ref, strings.Join(changes, "; ")))}
	return &Decision{Action: ActionConflict, Condition: c, Changes: changes}
}

// withAnnotations is live with desired's derived-from and hash.
func withAnnotations(live, desired *v1alpha1.AllowancePolicy) *v1alpha1.AllowancePolicy {
	p := live.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotationDerivedFrom] = desired.Annotations[AnnotationDerivedFrom]
	p.Annotations[AnnotationDerivedHash] = desired.Annotations[AnnotationDerivedHash]
	return p
}

// Changes lists what replacing live's spec with desired's would do: the
// patches live leaves uncovered ("add"), the rules and entries of live no
// patch uses ("remove"), both as Check finds them, and the other sections
// that differ. A live policy Check cannot read (CEL that does not compile)
// is compared by section only.
func Changes(m *Model, desired, live *v1alpha1.AllowancePolicy, r Resolver) []string {
	var add, remove []string
	l := live.DeepCopy()
	l.Spec = Normalized(l.Spec)
	rep, err := Check([]*Model{m}, []v1alpha1.AllowancePolicy{*l}, r)
	if err == nil {
		for _, f := range rep.Findings {
			switch f.Kind {
			case FindingUnused:
				remove = append(remove, fmt.Sprintf("%s (%s)", f.Field, f.Message))
			default:
				add = append(add, fmt.Sprintf("%s (%s)", f.Field, f.Message))
			}
		}
	}
	var out []string
	if len(add) > 0 {
		out = append(out, "add: "+strings.Join(unique(add), ", "))
	}
	if len(remove) > 0 {
		out = append(out, "remove: "+strings.Join(unique(remove), ", "))
	}
	if d := differing(desired.Spec, l.Spec, err != nil); len(d) > 0 {
		out = append(out, "change "+strings.Join(d, ", "))
	}
	if len(out) == 0 {
		// Same coverage, different words (reordered rules, say).
		out = append(out, "rewrite spec.rules with the same coverage")
	}
	return out
}

// differing names the top-level spec fields that differ; rules only when
// Check could not compare them.
func differing(a, b v1alpha1.AllowancePolicySpec, rules bool) []string {
	a, b = Normalized(a), Normalized(b)
	var out []string
	for _, f := range []struct {
		name string
		x, y any
	}{
		{"spec.for", a.For, b.For}, {"spec.subjects", a.Subjects, b.Subjects},
		{"spec.initializing", a.Initializing, b.Initializing}, {"spec.deleting", a.Deleting, b.Deleting},
		{"spec.mode", a.Mode, b.Mode}, {"spec.drift", a.Drift, b.Drift},
		{"spec.priority", a.Priority, b.Priority}, {"spec.deletionProtection", a.DeletionProtection, b.DeletionProtection},
	} {
		if !equality.Semantic.DeepEqual(f.x, f.y) {
			out = append(out, f.name)
		}
	}
	if rules && !equality.Semantic.DeepEqual(a.Rules, b.Rules) {
		out = append(out, "spec.rules")
	}
	return out
}

// truncate cuts s to maxMessage bytes on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	n := maxMessage - len("...")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
