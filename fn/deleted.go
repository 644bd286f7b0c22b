package main

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/function-sdk-go/resource/composed"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
)

// deleted decides about a composed resource the pipeline no longer wants. It
// returns the resource to keep, or nil to let Crossplane delete it.
func (r *run) deleted(resName string, observed map[string]any) *composed.Unstructured {
	m := metaOf(resName, observed)
	r.from = allowance.ComposedGeneration(observed)
	d := r.permitChild(m.child, v1alpha1.VerbDelete)
	if d.ok {
		return nil
	}
	if r.log {
		r.wouldWithhold(m, v1alpha1.VerbDelete, "", d.reason)
		return nil
	}
	r.withhold(m, v1alpha1.VerbDelete, "", d.reason)
	// Emit the resource as observed so Crossplane keeps it; close its gate.
	kept := composed.New()
	kept.SetAPIVersion(m.obj.GetAPIVersion())
	kept.SetKind(m.obj.GetKind())
	kept.SetName(m.obj.GetName())
	kept.SetNamespace(m.obj.GetNamespace())
	kept.SetLabels(m.obj.GetLabels())
	kept.SetAnnotations(m.obj.GetAnnotations())
	if spec, ok := observed["spec"]; ok {
		kept.Object["spec"] = runtimeCopy(map[string]any{"spec": spec})["spec"]
	}
	if r.restrictAll || r.set.RestrictsExternal(m.child) {
		_ = fieldpath.Pave(kept.Object).SetValue(gate.PathManagementPolicies, r.cfg.gate.ReadOnly)
	}
	return kept
}
