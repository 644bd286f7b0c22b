package controlplane

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Kinds of the scenario chain: DatabaseClaim → XDatabase → Bucket.
var (
	ClaimGVK  = schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "DatabaseClaim"}
	XRGVK     = schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "XDatabase"}
	BucketGVK = schema.GroupVersionKind{Group: "recorder.kausality.io", Version: "v1alpha1", Kind: "Bucket"}
)

// ClosedGate is the gate of a Bucket no allowance opens.
var ClosedGate = []string{"Observe", "LateInitialize"}

// Composition applies the Composition in file under name (each scenario
// composes with its own, so one scenario's new revision never reaches
// another's XRs). Applying another file under the same name makes a new
// CompositionRevision, as editing a Composition does.
func (c *ControlPlane) Composition(ctx context.Context, file, name string) error {
	raw, err := os.ReadFile(file) //nolint:gosec // the suite's own test data
	if err != nil {
		return err
	}
	objs, err := decodeAll(raw)
	if err != nil || len(objs) != 1 {
		return errors.Errorf("%s must hold one Composition (%v)", file, err)
	}
	objs[0].SetName(name)
	return c.Apply(ctx, objs[0])
}

// Object reads an object as the administrator; nil when it does not exist.
func (c *ControlPlane) Object(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.admin.Get(ctx, key, u); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return u, nil
}

// XR is the composite of a Claim (spec.resourceRef; Crossplane generates
// its name); nil while there is none.
func (c *ControlPlane) XR(ctx context.Context, claim client.ObjectKey) (*unstructured.Unstructured, error) {
	cl, err := c.Object(ctx, ClaimGVK, claim)
	if err != nil || cl == nil {
		return nil, err
	}
	name, _ := fieldpath.Pave(cl.Object).GetString("spec.resourceRef.name")
	if name == "" {
		return nil, nil
	}
	return c.Object(ctx, XRGVK, client.ObjectKey{Name: name})
}

// Buckets are the Buckets composed for a Claim's XR, by composition
// resource name.
func (c *ControlPlane) Buckets(ctx context.Context, claim client.ObjectKey) (map[string]*unstructured.Unstructured, error) {
	xr, err := c.XR(ctx, claim)
	if err != nil || xr == nil {
		return nil, err
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(BucketGVK.GroupVersion().WithKind("BucketList"))
	if err := c.admin.List(ctx, l, client.MatchingLabels{"crossplane.io/composite": xr.GetName()}); err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range l.Items {
		out[l.Items[i].GetAnnotations()["crossplane.io/composition-resource-name"]] = &l.Items[i]
	}
	return out, nil
}

// Condition is an object's condition of type t.
func Condition(o *unstructured.Unstructured, t string) xpv2.Condition {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(o.Object).GetValueInto("status", cs)
	return cs.GetCondition(xpv2.ConditionType(t))
}

// Gate is a managed resource's spec.managementPolicies.
func Gate(o *unstructured.Unstructured) []string {
	p, _ := fieldpath.Pave(o.Object).GetStringArray("spec.managementPolicies")
	return p
}

// Settled says whether Crossplane, Kausality and the provider are done with
// a Claim: the Claim's last change reached its XR or was refused (the
// Claim says which), the XR was reconciled at its generation, and every
// Bucket was observed at its generation with its gate closed and no
// allowance left open. why says what is still going on.
func (c *ControlPlane) Settled(ctx context.Context, claim client.ObjectKey) (ok bool, why string, err error) {
	return c.SettledClosed(ctx, claim, ClosedGate)
}

// SettledClosed is Settled for a Composition whose closed gate is closed.
func (c *ControlPlane) SettledClosed(ctx context.Context, claim client.ObjectKey, closed []string) (ok bool, why string, err error) {
	cl, err := c.Object(ctx, ClaimGVK, claim)
	if err != nil || cl == nil {
		return false, "no Claim", err
	}
	synced := Condition(cl, "Synced")
	if synced.Status != "True" && synced.Status != "False" {
		return false, "Claim not synced yet", nil
	}
	if synced.ObservedGeneration != 0 && synced.ObservedGeneration != cl.GetGeneration() {
		return false, fmt.Sprintf("Claim synced at generation %d of %d", synced.ObservedGeneration, cl.GetGeneration()), nil
	}
	xr, err := c.XR(ctx, claim)
	if err != nil || xr == nil {
		return false, "no XR", err
	}
	if s := Condition(xr, "Synced"); s.Status != "True" || s.ObservedGeneration != xr.GetGeneration() {
		return false, fmt.Sprintf("XR Synced %s at generation %d of %d: %s", s.Status, s.ObservedGeneration, xr.GetGeneration(), s.Message), nil
	}
	bs, err := c.Buckets(ctx, claim)
	if err != nil {
		return false, "", err
	}
	// A legacy (claimable) XR keeps them at spec.resourceRefs.
	refs, _ := fieldpath.Pave(xr.Object).GetValue("spec.resourceRefs")
	if n, ok := refs.([]any); !ok || len(n) != len(bs) {
		return false, fmt.Sprintf("XR references %v, %d Buckets exist", refs, len(bs)), nil
	}
	why, err = bucketsSettled(bs, closed)
	return why == "" && err == nil, why, err
}

// Describe is a one-line summary of a Claim's chain, for failure messages.
func (c *ControlPlane) Describe(ctx context.Context, claim client.ObjectKey) string {
	var b strings.Builder
	if cl, _ := c.Object(ctx, ClaimGVK, claim); cl != nil {
		fmt.Fprintf(&b, "Claim gen %d %s; ", cl.GetGeneration(), Conditions(cl))
	}
	if xr, _ := c.XR(ctx, claim); xr != nil {
		spec, _ := xr.Object["spec"].(map[string]any)
		fmt.Fprintf(&b, "XR %s gen %d size %v allowances %s %s; ", xr.GetName(), xr.GetGeneration(), spec["size"], xr.GetAnnotations()[v1alpha1.AnnotationAllowances], Conditions(xr))
	}
	bs, _ := c.Buckets(ctx, claim)
	for res, bk := range bs {
		size, _, _ := unstructured.NestedFieldNoCopy(bk.Object, "spec", "forProvider", "size")
		fmt.Fprintf(&b, "Bucket %s gen %d size %v gate %v %s; ", res, bk.GetGeneration(), size, Gate(bk), Conditions(bk))
	}
	return b.String()
}

// Conditions summarises an object's conditions on one line.
func Conditions(o *unstructured.Unstructured) string {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(o.Object).GetValueInto("status", cs)
	parts := make([]string, 0, len(cs.Conditions))
	for _, c := range cs.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%d %s %q)", c.Type, c.Status, c.ObservedGeneration, c.Reason, c.Message))
	}
	return strings.Join(parts, " ")
}
