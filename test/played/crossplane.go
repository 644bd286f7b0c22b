package played

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

// Kinds of the scenario chain, as the real control plane names them.
var (
	ClaimGVK  = controlplane.ClaimGVK
	XRGVK     = controlplane.XRGVK
	BucketGVK = controlplane.BucketGVK
)

// Crossplane plays Crossplane's claim and composite controllers with the
// real composition step: the claim's spec synced onto its XR, the XR and
// its observed composed resources fed to `crossplane render`, the output
// applied by server-side apply as Crossplane's service account with
// Crossplane's field manager, composed resources the pipeline dropped
// deleted, and the XR's status written back.
type Crossplane struct {
	cp    *ControlPlane
	kube  client.Client
	admin client.Client
	// Composition is the Composition file rendered; Revision the revision
	// name stamped on XRs (spec.compositionRevisionRef).
	Composition, Revision string
}

// A Pass is what one reconcile of an XR did.
type Pass struct {
	// Changed reports whether the pass wrote anything.
	Changed bool
	// XR is the XR as render returned it (status with Kausality's
	// conditions); Results are the function results.
	XR      *unstructured.Unstructured
	Results []*unstructured.Unstructured
}

// Crossplane returns Crossplane's part for a Composition file and
// revision name.
func (c *ControlPlane) Crossplane(composition, revision string) (*Crossplane, error) {
	kube, err := c.As(CrossplaneUser, "system:serviceaccounts")
	if err != nil {
		return nil, err
	}
	admin, err := c.As("admin")
	if err != nil {
		return nil, err
	}
	return &Crossplane{cp: c, kube: kube, admin: admin, Composition: composition, Revision: revision}, nil
}

func newObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// XRName is the name of the XR of a Claim.
func XRName(claim client.ObjectKey) string { return claim.Namespace + "-" + claim.Name }

// crossplaneOwned are the XR spec fields the claim controller keeps.
var crossplaneOwned = []string{"claimRef", "compositionRef", "compositionRevisionRef", "resourceRefs"}

// SyncClaim writes the Claim's spec onto its XR, creating the XR on first
// sight, and records the Claim's generation as observed once its XR took
// it. An error is what the API server said (a denial, say).
func (x *Crossplane) SyncClaim(ctx context.Context, claimKey client.ObjectKey) (*unstructured.Unstructured, bool, error) {
	claim := newObject(ClaimGVK)
	if err := x.admin.Get(ctx, claimKey, claim); err != nil {
		return nil, false, err
	}
	spec, _, _ := unstructured.NestedMap(claim.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	delete(spec, "resourceRef")
	spec["claimRef"] = map[string]any{"apiVersion": claim.GetAPIVersion(), "kind": claim.GetKind(), "namespace": claim.GetNamespace(), "name": claim.GetName()}
	spec["compositionRef"] = map[string]any{"name": strings.TrimSuffix(x.Revision, revisionSuffix(x.Revision))}
	spec["compositionRevisionRef"] = map[string]any{"name": x.Revision}

	xr := newObject(XRGVK)
	changed := false
	err := x.admin.Get(ctx, client.ObjectKey{Name: XRName(claimKey)}, xr)
	switch {
	case kerrors.IsNotFound(err):
		xr = newObject(XRGVK)
		xr.SetName(XRName(claimKey))
		xr.SetLabels(map[string]string{"crossplane.io/claim-name": claim.GetName(), "crossplane.io/claim-namespace": claim.GetNamespace()})
		xr.Object["spec"] = spec
		if err := x.kube.Create(ctx, xr); err != nil {
			return nil, false, err
		}
		// The Claim points at its composite, as Crossplane's claim
		// controller records it.
		_ = unstructured.SetNestedMap(claim.Object, map[string]any{"apiVersion": xr.GetAPIVersion(), "kind": xr.GetKind(), "name": xr.GetName()}, "spec", "resourceRef")
		if err := x.kube.Update(ctx, claim); err != nil {
			return nil, false, errors.Wrapf(err, "cannot record the composite of Claim %s", claimKey)
		}
		changed = true
	case err != nil:
		return nil, false, err
	default:
		have, _, _ := unstructured.NestedMap(xr.Object, "spec")
		for _, k := range crossplaneOwned {
			if _, ok := spec[k]; !ok && have[k] != nil {
				spec[k] = have[k]
			}
		}
		if !equality.Semantic.DeepEqual(have, spec) {
			stored := xr.DeepCopy()
			xr.Object["spec"] = spec
			if err := x.kube.Update(ctx, xr); err != nil {
				// Crossplane reports a failed sync on the XR's Synced
				// condition; so does this.
				x.reportSyncError(ctx, stored, err)
				return nil, false, err
			}
			changed = true
		}
	}
	if og, ok := allowance.ObservedGeneration(claim.Object); !ok || og != claim.GetGeneration() {
		_ = unstructured.SetNestedField(claim.Object, claim.GetGeneration(), "status", "observedGeneration")
		if err := x.kube.Status().Update(ctx, claim); err != nil {
			return nil, false, errors.Wrapf(err, "cannot record the observed generation of Claim %s", claimKey)
		}
		changed = true
	}
	return xr, changed, nil
}

func (x *Crossplane) reportSyncError(ctx context.Context, xr *unstructured.Unstructured, cause error) {
	conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
	out := []any{map[string]any{"type": "Synced", "status": "False", "reason": "ReconcileError",
		"message": "cannot apply the Claim's change: " + cause.Error(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] != "Synced" {
			out = append(out, c)
		}
	}
	_ = unstructured.SetNestedSlice(xr.Object, out, "status", "conditions")
	_ = x.kube.Status().Update(ctx, xr) // best effort, as a condition is
}

// revisionSuffix is the "-<n>" Crossplane appends to a Composition's name
// to name its revisions.
func revisionSuffix(rev string) string {
	if i := strings.LastIndex(rev, "-"); i > 0 {
		return rev[i:]
	}
	return ""
}

// Composite reconciles one XR: render, apply, delete, status.
func (x *Crossplane) Composite(ctx context.Context, name string) (Pass, error) {
	dir, err := os.MkdirTemp(x.cp.Dir, "render-")
	if err != nil {
		return Pass{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	xr := newObject(XRGVK)
	if err := x.admin.Get(ctx, client.ObjectKey{Name: name}, xr); err != nil {
		return Pass{}, err
	}
	observed := &unstructured.UnstructuredList{}
	observed.SetGroupVersionKind(BucketGVK.GroupVersion().WithKind("BucketList"))
	if err := x.admin.List(ctx, observed, client.MatchingLabels{"crossplane.io/composite": name}); err != nil {
		return Pass{}, err
	}
	var required []*unstructured.Unstructured
	for _, gvk := range []schema.GroupVersionKind{v1alpha1.AllowancePolicyGroupVersionKind, v1alpha1.UpgradeAllowanceGroupVersionKind} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := x.admin.List(ctx, l); err != nil {
			return Pass{}, err
		}
		for i := range l.Items {
			required = append(required, &l.Items[i])
		}
	}
	var obs []*unstructured.Unstructured
	for i := range observed.Items {
		obs = append(obs, &observed.Items[i])
	}
	files := map[string][]*unstructured.Unstructured{"xr.yaml": {xr}, "observed.yaml": obs, "required.yaml": required}
	for f, objs := range files {
		if err := writeObjects(filepath.Join(dir, f), objs); err != nil {
			return Pass{}, err
		}
	}
	args := []string{"render", filepath.Join(dir, "xr.yaml"), x.Composition, x.cp.Functions,
		"--crossplane-binary", x.cp.Tools.CrossplaneCore, "--include-function-results", "--include-full-xr"}
	if len(required) > 0 {
		args = append(args, "--required-resources", filepath.Join(dir, "required.yaml"))
	}
	if len(obs) > 0 {
		args = append(args, "--observed-resources", filepath.Join(dir, "observed.yaml"))
	}
	cmd := exec.CommandContext(ctx, x.cp.Tools.Crossplane, args...) //nolint:gosec // our own tool
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Pass{}, errors.Wrapf(err, "crossplane render: %s", stderr.String())
	}
	objs, err := render.Objects(out)
	if err != nil {
		return Pass{}, err
	}

	p := Pass{}
	desired := map[string]bool{}
	sum := sha256.Sum256([]byte(xr.GetUID()))
	manager := "apiextensions.crossplane.io/composed/" + hex.EncodeToString(sum[:])[:16]
	for _, o := range objs {
		switch {
		case o.GetKind() == "Result":
			p.Results = append(p.Results, o)
			continue
		case o.GroupVersionKind() == XRGVK:
			p.XR = o
			continue
		}
		desired[o.GetName()] = true
		before := newObject(o.GroupVersionKind())
		rv := ""
		if err := x.admin.Get(ctx, client.ObjectKeyFromObject(o), before); err == nil {
			rv = before.GetResourceVersion()
		}
		delete(o.Object, "status")
		if err := x.kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(manager), client.ForceOwnership); err != nil {
			return p, errors.Wrapf(err, "cannot apply %s %s", o.GetKind(), o.GetName())
		}
		after := newObject(o.GroupVersionKind())
		if err := x.admin.Get(ctx, client.ObjectKeyFromObject(o), after); err != nil {
			return p, err
		}
		p.Changed = p.Changed || after.GetResourceVersion() != rv
	}
	for i := range observed.Items {
		o := &observed.Items[i]
		if desired[o.GetName()] || o.GetDeletionTimestamp() != nil {
			continue
		}
		if err := x.kube.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return p, errors.Wrapf(err, "cannot delete %s %s", o.GetKind(), o.GetName())
		}
		p.Changed = true
	}
	if p.XR == nil {
		return p, errors.New("crossplane render returned no XR")
	}
	// Crossplane records the XR's generation as observed after a
	// reconcile; that is what consumes the XR's allowances.
	conds, _, _ := unstructured.NestedSlice(p.XR.Object, "status", "conditions")
	oldStatus, _, _ := unstructured.NestedMap(xr.Object, "status")
	status := map[string]any{"conditions": conds, "observedGeneration": xr.GetGeneration()}
	if !equality.Semantic.DeepEqual(normalizeConditions(oldStatus), normalizeConditions(status)) {
		xr.Object["status"] = status
		if err := x.kube.Status().Update(ctx, xr); err != nil {
			return p, errors.Wrapf(err, "cannot write the status of XR %s", name)
		}
		p.Changed = true
	}
	return p, nil
}

// normalizeConditions drops transition times, which render sets anew.
func normalizeConditions(status map[string]any) map[string]any {
	out := map[string]any{"observedGeneration": status["observedGeneration"]}
	conds, _ := status["conditions"].([]any)
	var cs []any
	for _, c := range conds {
		m, _ := c.(map[string]any)
		cs = append(cs, map[string]any{"type": m["type"], "status": m["status"], "reason": m["reason"], "message": m["message"]})
	}
	out["conditions"] = cs
	return out
}

func writeObjects(path string, objs []*unstructured.Unstructured) error {
	var b bytes.Buffer
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetManagedFields(nil)
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return os.WriteFile(path, b.Bytes(), 0o600)
}

// Settle plays Crossplane until a pass over the Claim and its XR writes
// nothing, waiting after each pass for the provider to reconcile every
// composed resource. It returns the last pass, and the error the API server
// gave the claim sync, if any (Crossplane would retry; so does Settle).
func (x *Crossplane) Settle(ctx context.Context, claimKey client.ObjectKey) (Pass, error) {
	var last Pass
	for i := 0; i < 12; i++ {
		_, synced, err := x.SyncClaim(ctx, claimKey)
		if err != nil {
			return last, errors.Wrapf(err, "cannot sync Claim %s onto its XR", claimKey)
		}
		if last, err = x.Composite(ctx, XRName(claimKey)); err != nil {
			return last, err
		}
		if err := x.WaitReconciled(ctx, XRName(claimKey)); err != nil {
			return last, err
		}
		if !synced && !last.Changed {
			return last, nil
		}
	}
	return last, errors.Errorf("Claim %s did not settle after 12 passes", claimKey)
}

// WaitReconciled waits until the provider has observed the current
// generation of every composed resource of the XR (paused ones excepted)
// and the gate controller has nothing left to close.
func (x *Crossplane) WaitReconciled(ctx context.Context, xr string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(BucketGVK.GroupVersion().WithKind("BucketList"))
		if err := x.admin.List(ctx, l, client.MatchingLabels{"crossplane.io/composite": xr}); err != nil {
			return err
		}
		done := true
		for _, o := range l.Items {
			if o.GetAnnotations()["crossplane.io/paused"] == "true" {
				continue
			}
			og, ok := allowance.ObservedGeneration(o.Object)
			as, _ := allowance.Parse(o.GetAnnotations()[v1alpha1.AnnotationAllowances])
			pending := false
			for _, a := range as {
				// The gate controller marks what the provider consumed.
				pending = pending || (!a.Consumed && a.ConsumedAt(og, ok))
			}
			if !ok || og != o.GetGeneration() || pending {
				done = false
			}
		}
		if done {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Errorf("the composed resources of %s were not reconciled within a minute", xr)
}
