package admission

// The deletion of a managed resource: a Delete reaches the cloud only for
// the deletion a deleting rule permitted (DESIGN §4a).

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/provider/parents"
)

// managedDeleted decides the deletion of a managed resource. A Delete
// reaches the cloud only for the deletion a deleting rule permitted
// (DESIGN §4a), so any gate that opens Delete and was not opened for this
// deletion is revoked before it goes on, and the resource is orphaned:
//   - an allowance granting Delete among other verbs (a rule granting the
//     External verbs "*") was opened for a change, not a deletion, and is
//     revoked by any deletion;
//   - a Delete gate opened for a deletion above the resource (its Claim's
//     or composite's) is that deletion's only: when that deletion is not
//     final (another admission check refused it, or it is still being
//     admitted) the gate is revoked. The gate controller revokes such a
//     gate anyway once a grace has passed; this closes the window before;
//   - an ungated resource of a kind the policies restrict (created before a
//     policy named its kind, never written since) is gated closed first.
func (h *Deletion) managedDeleted(ctx context.Context, req admission.Request, old *unstructured.Unstructured) admission.Response {
	if old.GetLabels()[v1alpha1.LabelGated] != "true" {
		return h.ungatedDeleted(ctx, req, old)
	}
	live := slices.DeleteFunc(storedAllowances(old), func(a allowance.Allowance) bool { return !grantsDelete(a) })
	if len(live) == 0 {
		return admission.Allowed("")
	}
	dry := (req.DryRun != nil && *req.DryRun) || h.Kube == nil
	var warnings []string
	if slices.ContainsFunc(live, func(a allowance.Allowance) bool { return !a.OpensDelete() }) {
		if !dry {
			if err := h.revoke(ctx, old.DeepCopy(), func(a allowance.Allowance) bool { return grantsDelete(a) && !a.OpensDelete() }); err != nil {
				return deny(ctx, metrics.ReasonDeletionUndecided, fmt.Sprintf("cannot close the gate of %s, open for a change that includes Delete, so it is not deleted: %v", admit.Describe(old), err))
			}
		}
		warnings = append(warnings, fmt.Sprintf("the gate of %s was open for a change that includes Delete; a deletion closes it, so deleting %s does not delete its cloud resource unless a deleting rule permits it", admit.Describe(old), admit.Describe(old)))
		live = slices.DeleteFunc(live, func(a allowance.Allowance) bool { return !a.OpensDelete() })
		if len(live) == 0 {
			return admission.Allowed("").WithWarnings(warnings...)
		}
	}
	if req.UserInfo.Username == h.Trusted.Crossplane && !slices.ContainsFunc(live, func(a allowance.Allowance) bool { return !a.FromUpgrade() }) {
		// New logic dropped the resource and an UpgradeAllowance granted
		// its deletion: the function opened the Delete gate for exactly
		// this, Crossplane deleting it.
		return admission.Allowed("").WithWarnings(warnings...)
	}
	final, err := parents.Deleting(ctx, h.Reader, old)
	if err != nil {
		return deny(ctx, metrics.ReasonDeletionUndecided, fmt.Sprintf("cannot tell whether the deletion above %s is final, so it is not deleted: %v", admit.Describe(old), err))
	}
	if final || dry {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	if err := h.revokeDelete(ctx, old.DeepCopy()); err != nil {
		return deny(ctx, metrics.ReasonDeletionUndecided, fmt.Sprintf("cannot close the Delete gate of %s, opened for a deletion above it that is not final, so it is not deleted: %v", admit.Describe(old), err))
	}
	warnings = append(warnings, fmt.Sprintf("the Delete gate of %s was opened for a deletion above it that has not happened; deleting %s by itself orphans its cloud resource", admit.Describe(old), admit.Describe(old)))
	return admission.Allowed("").WithWarnings(warnings...)
}

// ungatedDeleted gates an ungated managed resource of a restricted kind
// closed before its deletion goes on: its managementPolicies may well be
// ["*"], and its deletion would otherwise delete the cloud resource
// without any cause. Deleting it orphans the cloud resource, as deleting a
// gated one by itself does.
func (h *Deletion) ungatedDeleted(ctx context.Context, req admission.Request, old *unstructured.Unstructured) admission.Response {
	ps, err := listPolicies(ctx, h.Policies)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if restricted, _ := h.Cache.Restricting(ps, requestChild(req)); !restricted {
		return admission.Allowed("")
	}
	if audit, err := audited(ctx, h.Policies, h.Cache, requestChild(req), old); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	} else if audit {
		return admission.Allowed("")
	}
	if (req.DryRun != nil && *req.DryRun) || h.Kube == nil {
		return admission.Allowed("")
	}
	mr := old.DeepCopy()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(mr), mr); err != nil {
			return err
		}
		admit.SetLabel(mr, v1alpha1.LabelGated, "true")
		d := h.Gate.For(mr.Object).Decide(mr.Object, mr.Object, nil, h.Now(), "")
		if err := fieldpath.Pave(mr.Object).SetValue(gate.PathManagementPolicies, d.Policies); err != nil {
			return errors.Wrapf(err, errFmtSet, gate.PathManagementPolicies, admit.Describe(mr))
		}
		return h.Kube.Update(ctx, mr)
	})
	if err != nil {
		return deny(ctx, metrics.ReasonDeletionUndecided, fmt.Sprintf("cannot close the gate of %s, whose kind AllowancePolicies restrict, so it is not deleted: %v", admit.Describe(old), err))
	}
	return admission.Allowed("").WithWarnings(fmt.Sprintf("%s is of a kind AllowancePolicies restrict and was not gated: its gate was closed first, so deleting it orphans its cloud resource", admit.Describe(old)))
}

// grantsDelete reports whether a is an unconsumed External allowance whose
// verbs include Delete, alone or among others.
func grantsDelete(a allowance.Allowance) bool {
	return !a.Consumed && a.Relation == v1alpha1.RelationExternal && a.HasVerb(v1alpha1.VerbDelete)
}
