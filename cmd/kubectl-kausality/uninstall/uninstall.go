// Package uninstall hands the managed resources Kausality gated back to
// Crossplane and their providers once provider-kausality is gone: the last
// step of taking Kausality out of a cluster (docs/OPERATIONS.md, "Taking it
// out").
package uninstall

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
)

// Options say what Release does.
type Options struct {
	// Yes releases the resources; without it Release only lists them.
	Yes bool
	// ManagementPolicies narrow what a released resource gets: the
	// policies its pipeline asks for (kausality.io/requested-policies, or
	// the providers' default ["*"] where it asks for none), cut down to
	// these when set. Release never gives more than the pipeline asks.
	ManagementPolicies []string
}

// Release hands every gated managed resource back: the kausality.io/gated label
// and the kausality.io annotations go, and spec.managementPolicies becomes
// what the resource's pipeline asks for (Returned), never wider: an
// observe-only import stays observe-only, a resource its Composition keeps
// on deletion is not deleted by its provider. It refuses while provider-kausality's webhook
// configurations exist: they would gate each resource again on its next
// write. It names the Compositions that still run function-kausality,
// which would gate what they compose again.
func Release(ctx context.Context, kube client.Client, o Options, w io.Writer) error {
	for _, c := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		err := kube.Get(ctx, client.ObjectKey{Name: policycontroller.DynamicName}, c)
		switch {
		case err == nil:
			return errors.Errorf("provider-kausality is still installed (%T %s exists): delete its package first (docs/OPERATIONS.md, \"Taking it out\"); its webhooks would gate each resource again", c, policycontroller.DynamicName)
		case !kerrors.IsNotFound(err):
			return errors.Wrapf(err, "cannot read %s %s", strings.TrimPrefix(fmt.Sprintf("%T", c), "*v1."), policycontroller.DynamicName)
		}
	}
	kinds, err := managedKinds(ctx, kube)
	if err != nil {
		return err
	}
	n := 0
	for _, gvk := range kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := kube.List(ctx, l, client.MatchingLabels{v1alpha1.LabelGated: "true"}); err != nil {
			return errors.Wrapf(err, "cannot list gated %s", gvk.GroupKind())
		}
		for i := range l.Items {
			mr := &l.Items[i]
			was, _, _ := unstructured.NestedStringSlice(mr.Object, "spec", "managementPolicies")
			mps, err := Returned(mr.Object, o.ManagementPolicies)
			if err != nil {
				return errors.Wrapf(err, "cannot release %s %s", mr.GetKind(), key(mr))
			}
			verb := "would release"
			if o.Yes {
				verb = "released"
				if err := release(ctx, kube, mr, mps); err != nil {
					return err
				}
			}
			n++
			fmt.Fprintf(w, "%s %s %s: managementPolicies %v → %v\n", verb, mr.GetKind(), key(mr), was, mps)
		}
	}
	if !o.Yes {
		fmt.Fprintf(w, "%d gated managed resources; run again with --yes to release them\n", n)
	}
	return composing(ctx, kube, w)
}

// Returned is the managementPolicies a released resource gets: what its
// pipeline asked for, as the function recorded it (["*"], the providers'
// default, where it asked for none), narrowed to narrow when that is set.
// A narrowing crossplane-runtime does not support gives the closed gate
// the pipeline asked for; a record that does not read is an error, and
// the resource is left as it is.
func Returned(mr map[string]any, narrow []string) ([]string, error) {
	asked, err := gate.RequestedOf(mr)
	if err != nil {
		return nil, err
	}
	if len(narrow) == 0 {
		if asked == nil {
			return []string{gate.All}, nil
		}
		return asked, nil
	}
	var ro, verbs []string
	for _, p := range narrow {
		if p == gate.Observe || p == gate.LateInitialize {
			ro = append(ro, p)
		} else {
			verbs = append(verbs, p)
		}
	}
	if !gate.Supported(narrow) {
		return nil, errors.Errorf("--management-policies %v is not a combination crossplane-runtime supports", narrow)
	}
	out, _ := gate.Compute(ro, asked, verbs) // an unsupported cut falls back to the closed gate asked for
	return out, nil
}

// release removes Kausality's label and annotations from mr and sets its
// management policies, in one merge patch.
func release(ctx context.Context, kube client.Client, mr *unstructured.Unstructured, mps []string) error {
	ann := map[string]any{}
	for k := range mr.GetAnnotations() {
		if strings.HasPrefix(k, "kausality.io/") {
			ann[k] = nil
		}
	}
	patch := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{v1alpha1.LabelGated: nil}, "annotations": ann},
		"spec":     map[string]any{"managementPolicies": mps},
	}
	p := &unstructured.Unstructured{Object: patch}
	b, err := p.MarshalJSON()
	if err != nil {
		return errors.Wrapf(err, "cannot encode the patch of %s %s", mr.GetKind(), key(mr))
	}
	return errors.Wrapf(kube.Patch(ctx, mr, client.RawPatch(types.MergePatchType, b)), "cannot release %s %s", mr.GetKind(), key(mr))
}

// managedKinds are the kinds of the CRDs in Crossplane's managed category,
// each at its storage version.
func managedKinds(ctx context.Context, kube client.Client) ([]schema.GroupVersionKind, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
	if err := kube.List(ctx, l); err != nil {
		return nil, errors.Wrap(err, "cannot list CustomResourceDefinitions")
	}
	var out []schema.GroupVersionKind
	for _, crd := range l.Items {
		cats, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories")
		if !slices.Contains(cats, "managed") {
			continue
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if storage, _ := vm["storage"].(bool); storage {
				name, _ := vm["name"].(string)
				out = append(out, schema.GroupVersionKind{Group: group, Version: name, Kind: kind})
			}
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// composing names the Compositions whose pipeline still has a step running
// function-kausality.
func composing(ctx context.Context, kube client.Client, w io.Writer) error {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositionList"})
	if err := kube.List(ctx, l); err != nil {
		if kerrors.IsNotFound(err) || strings.Contains(err.Error(), "no matches for kind") {
			return nil
		}
		return errors.Wrap(err, "cannot list Compositions")
	}
	for _, c := range l.Items {
		steps, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
		for _, s := range steps {
			sm, _ := s.(map[string]any)
			ref, _ := sm["functionRef"].(map[string]any)
			if name, _ := ref["name"].(string); strings.Contains(name, "kausality") {
				fmt.Fprintf(w, "Composition %s still runs %s (step %v): remove the step, or it gates what it composes again\n", c.GetName(), name, sm["step"])
			}
		}
	}
	return nil
}

func key(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}
