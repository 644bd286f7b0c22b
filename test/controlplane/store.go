package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// Kinds of the Crossplane v2 chain: a namespaced XStore (no Claim) →
// namespaced Buckets of the recorder's ".m." API group.
var (
	StoreGVK   = schema.GroupVersionKind{Group: "v2.example.com", Version: "v1alpha1", Kind: "XStore"}
	MBucketGVK = schema.GroupVersionKind{Group: "recorder.m.kausality.io", Version: "v1alpha1", Kind: "Bucket"}
)

// InstallStore installs the Crossplane v2 chain from dir: the XStore XRD
// (xrd.yaml), once Crossplane has established its CRD the
// AllowancePolicies (policies.yaml), and waits until the provider's
// webhooks cover XStores and namespaced Buckets.
func (c *ControlPlane) InstallStore(ctx context.Context, dir string) error {
	if err := c.ApplyFile(ctx, filepath.Join(dir, "xrd.yaml")); err != nil {
		return err
	}
	if err := c.Established(ctx, 60*time.Second, "xstores.v2.example.com"); err != nil {
		return err
	}
	if err := c.ApplyFile(ctx, filepath.Join(dir, "policies.yaml")); err != nil {
		return err
	}
	return WaitForRules(ctx, c.admin, "xstores", "buckets")
}

// Established waits until Crossplane established each named CRD of an XRD
// and its kinds are aggregated into crossplane-edit, so that users bound to
// that role may use them.
func (c *ControlPlane) Established(ctx context.Context, timeout time.Duration, crds ...string) error {
	if err := c.established(ctx, timeout, crds...); err != nil {
		return err
	}
	for _, crd := range crds {
		resource, group, _ := strings.Cut(crd, ".")
		if err := until(ctx, timeout, func() error { return c.aggregated(ctx, "crossplane-edit", group, resource) }); err != nil {
			return err
		}
	}
	return nil
}

// aggregated says whether ClusterRole role grants resource of group.
func (c *ControlPlane) aggregated(ctx context.Context, role, group, resource string) error {
	r := &rbacv1.ClusterRole{}
	if err := c.admin.Get(ctx, client.ObjectKey{Name: role}, r); err != nil {
		return errors.Wrapf(err, "cannot get ClusterRole %s", role)
	}
	for _, rule := range r.Rules {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) {
			return nil
		}
	}
	return errors.Errorf("ClusterRole %s does not grant %s.%s yet", role, resource, group)
}

func (c *ControlPlane) established(ctx context.Context, timeout time.Duration, crds ...string) error {
	deadline := time.Now().Add(timeout)
	for _, crd := range crds {
		for {
			o := &apiextensionsv1.CustomResourceDefinition{}
			err := c.admin.Get(ctx, client.ObjectKey{Name: crd}, o)
			if err == nil && slices.ContainsFunc(o.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				break
			}
			if time.Now().After(deadline) {
				return errors.Wrapf(err, "crossplane did not establish %s", crd)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// StoreBuckets are the namespaced Buckets composed for an XStore, by
// composition resource name: those it controls. (Crossplane labels what a
// nested XR composes with the name of the tree's root, not its own.)
func (c *ControlPlane) StoreBuckets(ctx context.Context, xr client.ObjectKey) (map[string]*unstructured.Unstructured, error) {
	x, err := c.Object(ctx, StoreGVK, xr)
	if err != nil || x == nil {
		return nil, err
	}
	root := x.GetLabels()["crossplane.io/composite"]
	if root == "" {
		root = xr.Name
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(MBucketGVK.GroupVersion().WithKind("BucketList"))
	if err := c.admin.List(ctx, l, client.InNamespace(xr.Namespace), client.MatchingLabels{"crossplane.io/composite": root}); err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range l.Items {
		if o := metav1.GetControllerOf(&l.Items[i]); o == nil || o.UID != x.GetUID() {
			continue
		}
		out[l.Items[i].GetAnnotations()["crossplane.io/composition-resource-name"]] = &l.Items[i]
	}
	return out, nil
}

// StoreSettled says whether Crossplane, Kausality and the provider are done
// with an XStore: it was reconciled at its generation, and every Bucket
// it references was observed at its generation with its gate closed and no
// allowance left open. why says what is still going on.
func (c *ControlPlane) StoreSettled(ctx context.Context, key client.ObjectKey) (ok bool, why string, err error) {
	xr, err := c.Object(ctx, StoreGVK, key)
	if err != nil || xr == nil {
		return false, "no XStore", err
	}
	if s := Condition(xr, "Synced"); s.Status != "True" || s.ObservedGeneration != xr.GetGeneration() {
		return false, fmt.Sprintf("XStore Synced %s at generation %d of %d: %s", s.Status, s.ObservedGeneration, xr.GetGeneration(), s.Message), nil
	}
	bs, err := c.StoreBuckets(ctx, key)
	if err != nil {
		return false, "", err
	}
	// A modern XR keeps them at spec.crossplane.resourceRefs.
	refs, _ := fieldpath.Pave(xr.Object).GetValue("spec.crossplane.resourceRefs")
	if n, ok := refs.([]any); !ok || len(n) != len(bs) {
		return false, fmt.Sprintf("XStore references %v, %d Buckets exist", refs, len(bs)), nil
	}
	why, err = bucketsSettled(bs, ClosedGate)
	return why == "" && err == nil, why, err
}

// bucketsSettled says what keeps Buckets from having settled: one not
// observed at its generation, with its gate open or an allowance open; ""
// when none.
func bucketsSettled(bs map[string]*unstructured.Unstructured, closed []string) (string, error) {
	for res, b := range bs {
		if s := Condition(b, "Synced"); s.Status != "True" || s.ObservedGeneration != b.GetGeneration() {
			return fmt.Sprintf("Bucket %s Synced %s at generation %d of %d", res, s.Status, s.ObservedGeneration, b.GetGeneration()), nil
		}
		if !slices.Equal(Gate(b), closed) {
			return fmt.Sprintf("Bucket %s gate %v", res, Gate(b)), nil
		}
		as, err := allowance.Parse(b.GetAnnotations()[v1alpha1.AnnotationAllowances])
		if err != nil {
			return "", err
		}
		if open := allowance.Unconsumed(as, b.Object); len(open) > 0 {
			return fmt.Sprintf("Bucket %s has %d open allowances", res, len(open)), nil
		}
	}
	return "", nil
}

// DescribeStore is a one-line summary of an XStore's chain, for failure
// messages.
func (c *ControlPlane) DescribeStore(ctx context.Context, key client.ObjectKey) string {
	var b strings.Builder
	if xr, _ := c.Object(ctx, StoreGVK, key); xr != nil {
		spec, _ := xr.Object["spec"].(map[string]any)
		fmt.Fprintf(&b, "XStore gen %d size %v tier %v allowances %s %s; ", xr.GetGeneration(), spec["size"], spec["tier"], xr.GetAnnotations()[v1alpha1.AnnotationAllowances], Conditions(xr))
	}
	bs, _ := c.StoreBuckets(ctx, key)
	for res, bk := range bs {
		size, _, _ := unstructured.NestedFieldNoCopy(bk.Object, "spec", "forProvider", "size")
		fmt.Fprintf(&b, "Bucket %s gen %d size %v gate %v allowances %s %s; ", res, bk.GetGeneration(), size, Gate(bk), bk.GetAnnotations()[v1alpha1.AnnotationAllowances], Conditions(bk))
	}
	return b.String()
}

// NewStore is an XStore of size, composed by the Composition comp.
func NewStore(ns, name, size, comp string) *unstructured.Unstructured {
	x := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size, "crossplane": map[string]any{"compositionRef": map[string]any{"name": comp}}}}}
	x.SetGroupVersionKind(StoreGVK)
	x.SetNamespace(ns)
	x.SetName(name)
	return x
}

// WaitStoreSettled waits up to d until the XStore settled (StoreSettled),
// and otherwise says what was still going on.
func (c *ControlPlane) WaitStoreSettled(ctx context.Context, key client.ObjectKey, d time.Duration) error {
	return until(ctx, d, func() error {
		ok, why, err := c.StoreSettled(ctx, key)
		if err != nil {
			return err
		}
		if !ok {
			return errors.Errorf("XStore %s has not settled: %s", key, why)
		}
		return nil
	})
}
