package compose

import (
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// A deletion is what the function decided about a composed resource the
// pipeline no longer wants: one more kind of decision beside an item's
// change. The run applies it in one place (decideAll): what it reports
// joins the run's, and a kept resource is emitted so Crossplane keeps it.
type deletion struct {
	// kept is the resource to emit, or nil to let Crossplane delete it.
	kept *composed.Unstructured
	// withheld is the Delete kept from it, or in Log mode the one that
	// would have been (logOnly); nil when the deletion is permitted.
	withheld *withheld
	// problems are the malformed input it met, one line each.
	problems []string
}

// deleted decides about a composed resource the pipeline no longer wants.
func (r *run) deleted(resName string, observed map[string]any) deletion {
	m := r.observedMetaOf(resName, observed)
	d := r.permitChild(m.child, m.from, v1alpha1.VerbDelete)
	if d.ok {
		return deletion{}
	}
	if r.log {
		w := withheldOf(m, v1alpha1.VerbDelete, "", d.code, d.reason)
		w.logOnly, w.audit = true, r.audit
		return deletion{withheld: &w}
	}
	// Parsed once for both questions below; unreadable, neither holds.
	have, perr := allowance.Parse(m.ann[v1alpha1.AnnotationAllowances])
	if perr == nil && upgradeDeleteOpen(observed, have) {
		// The Delete gate an UpgradeAllowance granted is open (dropped, in
		// an earlier run): the deletion may go.
		return deletion{}
	}
	var problems []string
	up, err := r.upgradeOf(m.ann)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if up != nil {
		d.reason, d.code = upgradeReason(up), metrics.ReasonLogicChanged
		if up.bound.AllowsChild(m.child, v1alpha1.VerbDelete) {
			ok, why, ps := r.turn(up)
			problems = append(problems, ps...)
			if ok {
				kept, err := r.dropped(m, observed, up, have, perr)
				if err != nil {
					problems = append(problems, err.Error())
				}
				return deletion{kept: kept, problems: problems}
			}
			d.reason, d.code = why, up.turnCode
		}
	}
	w := withheldOf(m, v1alpha1.VerbDelete, "", d.code, d.reason)
	// Emit the resource as observed so Crossplane keeps it; close its gate.
	kept := keptAsObserved(m, observed)
	del := deletion{kept: kept, withheld: &w, problems: problems}
	if r.gated(m) {
		if err := setManagementPolicies(kept.Object, r.gateOf(observed).Closed()); err != nil {
			del.problems = append(del.problems, errors.Wrapf(err, errFmtSetField, gate.PathManagementPolicies, ref(observed)).Error())
		}
	}
	return del
}

// dropped decides a resource new logic drops under an UpgradeAllowance
// that grants deleting it. Where the UpgradeAllowance also grants the
// external Delete of a gated resource, the deletion reaches the cloud in
// two steps: this run keeps the resource one more time, with an External
// Delete allowance traced to the UpgradeAllowance and its Delete gate open
// (admission checks the allowance names the logic change the write
// records); once the resource is observed with that gate open, the next run
// lets Crossplane delete it (deleted), and the provider deletes the cloud
// resource.
// Without the external grant Crossplane deletes it behind its closed gate,
// which orphans the cloud resource. have are its allowances, or perr why
// they cannot be read. An error names the malformed input met.
func (r *run) dropped(m childMeta, observed map[string]any, up *upgrade, have []allowance.Allowance, perr error) (*composed.Unstructured, error) {
	if !r.gated(m) || !v1alpha1.GrantsVerb(up.bound.ExternalVerbs(m.child), v1alpha1.VerbDelete) {
		return nil, nil
	}
	if perr != nil {
		return nil, errors.Wrapf(perr, errFmtParseAllowancesGateClosed, v1alpha1.AnnotationAllowances, ref(observed))
	}
	gen := allowance.NextGeneration(m.generation)
	hop := allowance.HopOf(m.obj, gen)
	hop.Name, hop.Timestamp = m.name, r.stampedAt
	del := allowance.ExternalGrant(m.child.APIGroup, m.child.Kind, v1alpha1.VerbDelete, gen, up.base.Then(hop))
	if !slices.ContainsFunc(have, upgradeDelete) {
		have = append(have, del)
	}
	kept := keptAsObserved(m, observed)
	g := r.gateOf(observed).Decide(kept.Object, observed, have, r.now, r.frozen)
	if err := setManagementPolicies(kept.Object, g.Policies); err != nil {
		return nil, errors.Wrapf(err, errFmtSetField, gate.PathManagementPolicies, ref(observed))
	}
	ann := kept.GetAnnotations()
	ann[v1alpha1.AnnotationAllowances] = allowance.Format(allowance.Unconsumed(g.Allowances, observed))
	ann[v1alpha1.AnnotationTrace] = allowance.FormatTrace(del.Trace)
	r.stampLogic(ann, childMeta{}, change{})
	kept.SetAnnotations(ann)
	return kept, nil
}

// gateOf is the function's gate configuration for a resource the
// pipeline no longer composes: the request its last run recorded on it.
func (r *run) gateOf(observed map[string]any) gate.Config {
	c := r.cfg.gate
	c.Requested, c.RequestedErr = gate.RequestedOf(observed)
	return c
}

// upgradeDeleteOpen reports whether the resource is observed with its Delete
// gate open for an UpgradeAllowance's Delete allowance among have.
func upgradeDeleteOpen(observed map[string]any, have []allowance.Allowance) bool {
	current, _ := fieldpath.Pave(observed).GetStringArray(gate.PathManagementPolicies)
	return slices.Contains(current, gate.Delete) && slices.ContainsFunc(have, upgradeDelete)
}

// upgradeDelete reports whether a is an unconsumed External Delete
// allowance an UpgradeAllowance roots.
func upgradeDelete(a allowance.Allowance) bool {
	return a.OpensDelete() && !a.Consumed && a.FromUpgrade()
}

// keptAsObserved is the resource as observed, for Crossplane to keep.
func keptAsObserved(m childMeta, observed map[string]any) *composed.Unstructured {
	kept := composed.New()
	kept.SetAPIVersion(m.obj.GetAPIVersion())
	kept.SetKind(m.obj.GetKind())
	kept.SetName(m.obj.GetName())
	kept.SetNamespace(m.obj.GetNamespace())
	kept.SetLabels(m.obj.GetLabels())
	ann := m.obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	kept.SetAnnotations(ann)
	if m.child.Class == policy.ClassUnmanaged {
		// Its content, whatever it is called (a Secret's data): what
		// Crossplane's apply leaves out, it removes.
		for k, v := range policy.Body(observed) {
			kept.Object[k] = runtime.DeepCopyJSONValue(v)
		}
		return kept
	}
	if spec, ok := observed["spec"]; ok {
		kept.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	return kept
}
