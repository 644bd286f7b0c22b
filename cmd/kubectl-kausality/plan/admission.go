package plan

import (
	"context"
	"maps"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/preview"
)

// kausalityPrefix starts the annotations Kausality owns.
const kausalityPrefix = "kausality.io/"

// dryRunResult is what the server-side dry run returned: the live object
// (nil when the change creates it), the object as it would be stored, and
// admission's verdict.
type dryRunResult struct {
	live, result *unstructured.Unstructured
	admission    preview.Admission
}

// dryRun sends the change to the API server as the user with dryRun=All,
// so every admission webhook decides it and nothing is stored: an update
// of the live object when it exists, else a create.
func dryRun(ctx context.Context, o Options, obj *unstructured.Unstructured) (dryRunResult, error) {
	gvk := obj.GroupVersionKind()
	m, err := o.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return dryRunResult{}, errors.Wrapf(err, "cannot find the kind %s of %s", gvk, obj.GetName())
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace && obj.GetNamespace() == "" {
		obj.SetNamespace(o.Namespace)
	}
	var res dryRunResult
	for attempt := 1; ; attempt++ {
		var read error
		if res, read, err = tryDryRun(ctx, o, obj); read != nil {
			return dryRunResult{}, read
		}
		if !kerrors.IsConflict(err) || attempt == maxConflicts {
			break
		}
		// Someone (Crossplane syncing a Claim, a controller writing the
		// status) wrote the object between the read and the dry run: that
		// is no verdict on the change, so read it again, as kubectl does.
	}
	var status kerrors.APIStatus
	if errors.As(err, &status) {
		// Admission's denial, or the API server's (RBAC, validation):
		// either way the change would not be stored.
		res.admission.Message = strings.TrimSpace(status.Status().Message)
		return res, nil
	}
	if err != nil {
		return dryRunResult{}, errors.Wrapf(err, "cannot dry-run %s", admit.Describe(obj))
	}
	res.admission.Allowed = true
	if res.live != nil {
		res.admission.Before = allowancesOf(res.live)
	}
	res.admission.After = allowancesOf(res.result)
	return res, nil
}

// maxConflicts is how often the dry run is read and tried again when the
// object changed under it.
const maxConflicts = 5

// tryDryRun reads obj as it lives and dry-runs the file's change of it:
// creation, or the live object with the file's fields (merged). read is a
// failed read; err is the API server's answer to the dry run.
func tryDryRun(ctx context.Context, o Options, obj *unstructured.Unstructured) (_ dryRunResult, read, err error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err = o.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)
	switch {
	case kerrors.IsNotFound(err):
		live = nil
	case err != nil:
		return dryRunResult{}, errors.Wrapf(err, "cannot get %s", admit.Describe(obj)), nil
	}
	res := dryRunResult{live: live}
	o.Warnings.take()
	if live == nil {
		res.result = obj.DeepCopy()
		err = o.Client.Create(ctx, res.result, client.DryRunAll)
	} else {
		res.result = merged(live, obj)
		err = o.Client.Update(ctx, res.result, client.DryRunAll)
	}
	res.admission.Warnings = o.Warnings.take()
	return res, nil, err
}

// merged is the live object with the file's spec, labels and annotations:
// what `kubectl apply` of a complete manifest amounts to for the fields a
// user changes. Kausality's own annotations the file does not mention stay
// as stored, so a file saved before Kausality stamped its allowances
// plans as the change it is, not as their removal (admission restores
// them anyway).
func merged(live, file *unstructured.Unstructured) *unstructured.Unstructured {
	out := live.DeepCopy()
	out.SetManagedFields(nil)
	if spec, ok := file.Object["spec"].(map[string]any); ok {
		out.Object["spec"] = withCrossplaneFields(spec, live.Object["spec"])
	}
	out.SetLabels(file.GetLabels())
	ann := maps.Clone(file.GetAnnotations())
	for k, v := range live.GetAnnotations() {
		if _, ok := ann[k]; !ok && strings.HasPrefix(k, kausalityPrefix) {
			if ann == nil {
				ann = map[string]string{}
			}
			ann[k] = v
		}
	}
	out.SetAnnotations(ann)
	return out
}

// withCrossplaneFields is the file's spec with the fields Crossplane
// manages (spec.resourceRefs, spec.crossplane.*, a Claim's
// spec.resourceRef, ...) taken from the live spec where the file lacks
// them: a manifest from version control never has them, and applying it
// (a three-way merge) would not remove them either.
func withCrossplaneFields(spec map[string]any, liveSpec any) map[string]any {
	out := maps.Clone(spec)
	live, _ := liveSpec.(map[string]any)
	for k, v := range live {
		if _, ok := out[k]; ok {
			if k == "crossplane" {
				out[k] = withCrossplaneFields(asMap(out[k]), v)
			}
			continue
		}
		if k == "resourceRef" || admit.CrossplaneField("spec."+k) {
			out[k] = v
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// allowancesOf are the allowances an object carries; an unreadable
// annotation counts as none, as everywhere in Kausality.
func allowancesOf(u *unstructured.Unstructured) []allowance.Allowance {
	as, _ := allowance.Parse(u.GetAnnotations()[v1alpha1.AnnotationAllowances])
	return as
}
