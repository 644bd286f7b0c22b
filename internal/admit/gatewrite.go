package admit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
)

// AgainstStored corrects a write's allowances (as) against those of the
// stored managed resource (old, nil on CREATE): a stale writer re-sending
// an allowance the provider marked consumed does not reopen it, even while
// the stored status says nothing was observed (a failed reconcile, a
// freeze); one it dropped that is still unconsumed is kept; a pending one
// keeps the values propagation control pinned, and a hand edit's the
// values of the edit. changed says whether as was corrected.
func AgainstStored(as []allowance.Allowance, old *unstructured.Unstructured) (out []allowance.Allowance, changed bool) {
	if old == nil {
		return as, false
	}
	was, _ := allowance.Parse(old.GetAnnotations()[v1alpha1.AnnotationAllowances])
	as, consumed := allowance.KeepConsumed(as, was)
	as, kept := allowance.KeepUnconsumed(as, was, old.Object)
	as, pinned := allowance.KeepPending(as, was)
	as, repinned := allowance.KeepValues(as, was)
	return as, consumed || kept || pinned || repinned
}

// GateWrite is one write of a gated managed resource, as the gate decides
// it.
type GateWrite struct {
	// Obj is the resource as written, Old as stored (nil on CREATE).
	Obj, Old *unstructured.Unstructured
	// Allowances are the write's, corrected against the stored ones.
	Allowances []allowance.Allowance
	// Rewrite says the allowances annotation must be written even when
	// the decision changes none of them: they were corrected or gained
	// one.
	Rewrite bool
	// LateInitialized says the write is the provider's late
	// initialization, which moves the approval along with it.
	LateInitialized bool
	// Trusted says a Kausality-aware writer (Crossplane, the provider,
	// the gate controller) made it: a user is warned when the gate they
	// sent is replaced.
	Trusted bool
	Now     time.Time
	// Frozen names who froze the resource or a parent, "" when none.
	Frozen string
}

// Decide applies the gate formula to the write (DESIGN §4.6): the stored
// object decides what is consumed, the gate is set from the allowances as
// they will be stored, only the decision writes the approval, and a
// changed allowance list is written back. It edits w.Obj and returns the
// warnings for the writer.
func (w GateWrite) Decide(cfg gate.Config) ([]string, error) {
	var stored map[string]any
	if w.Old != nil {
		stored = w.Old.Object
	}
	obj := w.Obj
	var d gate.Decision
	if w.LateInitialized {
		d = cfg.DecideFrom(obj.Object, stored, gate.ApprovalOf(stored).LateInitialized(w.Old.Object, obj.Object), w.Allowances, w.Now, w.Frozen)
	} else {
		d = cfg.Decide(obj.Object, stored, w.Allowances, w.Now, w.Frozen)
	}
	var warnings []string
	current, _ := fieldpath.Pave(obj.Object).GetStringArray(gate.PathManagementPolicies)
	if !slices.Equal(current, d.Policies) {
		if err := fieldpath.Pave(obj.Object).SetValue(gate.PathManagementPolicies, d.Policies); err != nil {
			return nil, errors.Wrapf(err, "cannot set %s on %s", gate.PathManagementPolicies, Describe(obj))
		}
		if !w.Trusted {
			warnings = append(warnings, fmt.Sprintf("%s of %s is kept at %v by Kausality: it opens only for unconsumed allowances", gate.PathManagementPolicies, Describe(obj), d.Policies))
		}
	}
	if d.Err != nil {
		warnings = append(warnings, fmt.Sprintf("the gate of %s stays closed: %v", Describe(obj), d.Err))
	}
	if len(d.Held) > 0 && len(d.Uncovered) > 0 {
		warnings = append(warnings, fmt.Sprintf("the gate of %s stays closed: %s changed since generation %d was let through to the cloud and no open allowance covers it",
			Describe(obj), strings.Join(d.Uncovered, ", "), d.Approved.Generation))
	}
	w.approve(d)
	if d.Changed || w.Rewrite {
		SetAnnotation(obj, v1alpha1.AnnotationAllowances, allowance.Format(d.Allowances))
	}
	return warnings, nil
}

// approve writes the approval the decision leaves, whatever the writer
// sent: a new one when it approves, nothing approved for a resource
// created without a Create gate, the provider's late initialization
// added; else the stored one stays.
func (w GateWrite) approve(d gate.Decision) {
	switch {
	case d.Approves || d.Withdraws || w.Old == nil || w.LateInitialized:
		// What came before stays as stored unless this approval records
		// it anew: whatever the writer sent is not taken.
		KeepStored(w.Obj, w.Old, v1alpha1.AnnotationApprovedBefore)
		for k, v := range d.Approved.Annotations() {
			SetAnnotation(w.Obj, k, v)
		}
	case !HasAnnotation(w.Old, v1alpha1.AnnotationApproved):
		// Gated before the record existed: pin what counts as approved
		// now (the stored spec), or it would move with every write.
		for k, v := range gate.ApprovalOf(w.Old.Object).Annotations() {
			SetAnnotation(w.Obj, k, v)
		}
	default:
		KeepStored(w.Obj, w.Old, v1alpha1.AnnotationApproved, v1alpha1.AnnotationApprovedGeneration, v1alpha1.AnnotationApprovedBefore)
	}
}
