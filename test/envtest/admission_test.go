package envtest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// object builds an unstructured example.com object.
func object(kind, namespace, name string, spec map[string]any, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("example.com/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

// reconciled marks o as reconciled at its current generation, as
// Crossplane's claim and composite controllers do: until then the default
// initializing.when holds and policies bound creation, not changes.
func reconciled(t testing.TB, o *unstructured.Unstructured) {
	t.Helper()
	kube := as(t, crossplane, "system:serviceaccounts")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := kube.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		_ = unstructured.SetNestedField(o.Object, o.GetGeneration(), "status", "observedGeneration")
		return kube.Status().Update(context.Background(), o)
	}); err != nil {
		t.Fatalf("cannot mark %s reconciled: %v", o.GetName(), err)
	}
}

func namespace(t testing.TB, name string) {
	t.Helper()
	if err := as(t, "admin").Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestAllowancePolicyValidation(t *testing.T) {
	ctx := context.Background()
	// Policies are an administrator's to write; Alice may not.
	if err := as(t, alice, "platform-team").Create(ctx, &v1alpha1.AllowancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "alices"},
		Spec: v1alpha1.AllowancePolicySpec{For: v1alpha1.ObjectKind{APIGroup: "example.com", Kind: "DatabaseClaim"}}}); !kerrors.IsForbidden(err) {
		t.Errorf("alice creates an AllowancePolicy: got %v, want Forbidden", err)
	}
	kube := as(t, "admin")

	bad := &v1alpha1.AllowancePolicy{}
	if err := yaml.Unmarshal([]byte(`
metadata: {name: broken}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: DatabaseClaim}
  rules:
  - trigger: spec.size
    conditions: ["object.spec.size =="]
`), bad); err != nil {
		t.Fatal(err)
	}
	err := kube.Create(ctx, bad)
	fixture.ErrorContains(t, err, "denied", "AllowancePolicy broken", "object.spec.size ==")

	badPath := bad.DeepCopy()
	badPath.Spec.Rules[0].Conditions = nil
	badPath.Spec.Rules[0].Trigger = "spec.size[["
	fixture.ErrorContains(t, kube.Create(ctx, badPath), "denied", "spec.size[[")

	// The suite's policies compiled, and say so.
	fixture.Eventually(t, 20e9, "Ready condition of AllowancePolicy claims", func() (bool, string) {
		p := &v1alpha1.AllowancePolicy{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "claims"}, p); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.GetGeneration(), c.Message
	})
}

func TestClaimChangesNeedPermission(t *testing.T) {
	ctx := context.Background()
	namespace(t, "team-a")
	waitForRules(t, "databaseclaims")
	aliceC := as(t, alice, "platform-team")
	bobC := as(t, bob)

	claim := object("DatabaseClaim", "team-a", "orders", map[string]any{"size": "small"}, map[string]string{"jira": "INFRA-1"})
	if err := aliceC.Create(ctx, claim); err != nil {
		t.Fatalf("alice creates the Claim: %v", err)
	}
	reconciled(t, claim)
	tr, err := allowance.ParseTrace(claim.GetAnnotations()[v1alpha1.AnnotationTrace])
	if err != nil || len(tr) != 1 || tr[0].User != alice {
		t.Fatalf("trace of a new Claim = %v (%v), want one hop naming %s", tr, err, alice)
	}

	t.Run("DeniedWithoutMayInitiate", func(t *testing.T) {
		c := claim.DeepCopy()
		err := controlplane.Update(bobC, c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") })
		fixture.ErrorContains(t, err, "denied", "spec.size", "AllowancePolicy claims", `user "bob@example.com" is not a subject with mayInitiate`)
	})
	t.Run("DeniedWithoutJira", func(t *testing.T) {
		c := object("DatabaseClaim", "team-a", "no-jira", map[string]any{"size": "small"}, nil)
		if err := aliceC.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		reconciled(t, c)
		err := controlplane.Update(aliceC, c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") })
		fixture.ErrorContains(t, err, "denied", "spec.size", "AllowancePolicy claims", "is false")
	})
	t.Run("ModeOnClaimIgnored", func(t *testing.T) {
		c := object("DatabaseClaim", "team-a", "self-logged", map[string]any{"size": "small"}, map[string]string{v1alpha1.AnnotationMode: "Log"})
		if err := aliceC.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		reconciled(t, c)
		bobW, w := warningsAs(t, bob)
		err := controlplane.Update(bobW, c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") })
		fixture.ErrorContains(t, err, "denied", "spec.size", `user "bob@example.com" is not a subject with mayInitiate`)
		if !strings.Contains(strings.Join(w.got, "\n"), "annotation kausality.io/mode=\"Log\" on DatabaseClaim team-a/self-logged is ignored") {
			t.Errorf("warnings %q do not say the Claim's mode is ignored", w.got)
		}
	})
	t.Run("NamespaceLogModeWarns", func(t *testing.T) {
		namespace(t, "team-logged")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-logged"}}
		if err := controlplane.Update(as(t, "admin"), ns, func() { metav1.SetMetaDataAnnotation(&ns.ObjectMeta, v1alpha1.AnnotationMode, "Log") }); err != nil {
			t.Fatal(err)
		}
		c := object("DatabaseClaim", "team-logged", "logged", map[string]any{"size": "small"}, nil)
		if err := aliceC.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		reconciled(t, c)
		bobW, w := warningsAs(t, bob)
		if err := controlplane.Update(bobW, c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
			t.Fatalf("Log mode denied: %v", err)
		}
		if !strings.Contains(strings.Join(w.got, "\n"), "spec.size") {
			t.Errorf("warnings %q do not name spec.size", w.got)
		}
		if as := fixture.Allowances(t, c); len(as) != 0 {
			t.Errorf("an unpermitted change earned allowances: %v", as)
		}
	})
	t.Run("PermittedChangeCarriesInitiator", func(t *testing.T) {
		c := claim.DeepCopy()
		if err := controlplane.Update(aliceC, c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
			t.Fatalf("alice's permitted change: %v", err)
		}
		as := fixture.Allowances(t, c)
		if len(as) != 1 {
			t.Fatalf("allowances = %v, want one", as)
		}
		a := as[0]
		if a.Initiator != alice || a.Target.Resource != "xdatabases" || a.Generation != c.GetGeneration() {
			t.Errorf("allowance = %+v, want initiator %s for xdatabases at generation %d", a, alice, c.GetGeneration())
		}
		if got := a.Trace[0].Attestations["metadata.annotations[jira]"]; got != "INFRA-1" {
			t.Errorf("jira attestation = %q, want INFRA-1", got)
		}
	})
	t.Run("AllowancesAreProtected", func(t *testing.T) {
		c := claim.DeepCopy()
		err := controlplane.Update(aliceC, c, func() {
			ann := c.GetAnnotations()
			ann[v1alpha1.AnnotationAllowances] = `[{"relation":"External","target":{"external":{"kind":"*"}},"verbs":["*"],"generation":99}]`
			c.SetAnnotations(ann)
		})
		fixture.ErrorContains(t, err, "denied", "annotation kausality.io/allowances", "only Kausality and Crossplane may change")
	})
	t.Run("UsersMaySetTheirAnnotations", func(t *testing.T) {
		c := claim.DeepCopy()
		if err := controlplane.Update(bobC, c, func() {
			ann := c.GetAnnotations()
			ann[v1alpha1.AnnotationTraceLabelPrefix+"ticket"] = "T-1"
			ann[v1alpha1.AnnotationFreeze] = `{"user":"alice@example.com","message":"incident"}`
			c.SetAnnotations(ann)
		}); err != nil {
			t.Errorf("bob sets freeze and a trace label: %v", err)
		}
		if f, err := allowance.ParseFreeze(c.GetAnnotations()[v1alpha1.AnnotationFreeze]); err != nil || f.User != bob || f.Message != "incident" {
			t.Errorf("stored freeze = %+v (%v), want bob's, whatever he claimed", f, err)
		}
	})
	t.Run("OnlyTheSetterOrASubjectLiftsAFreeze", func(t *testing.T) {
		carol := as(t, "carol@example.com")
		c := claim.DeepCopy()
		unfreeze := func() {
			ann := c.GetAnnotations()
			delete(ann, v1alpha1.AnnotationFreeze)
			c.SetAnnotations(ann)
		}
		fixture.ErrorContains(t, controlplane.Update(carol, c, unfreeze), "denied", "was set by bob@example.com")
		if err := controlplane.Update(aliceC, c, unfreeze); err != nil {
			t.Errorf("alice, a subject who may initiate, lifts bob's freeze: %v", err)
		}
	})
}

func TestXRContinuesTheClaimsChain(t *testing.T) {
	ctx := context.Background()
	namespace(t, "team-b")
	waitForRules(t, "xdatabases")
	aliceC, cp := as(t, alice, "platform-team"), as(t, crossplane, "system:serviceaccounts")

	claim := object("DatabaseClaim", "team-b", "billing", map[string]any{"size": "small"}, map[string]string{"jira": "INFRA-2"})
	if err := aliceC.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	reconciled(t, claim)
	claimRef := map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "DatabaseClaim", "namespace": "team-b", "name": "billing"}
	xr := object("XDatabase", "", "billing-x1", map[string]any{"size": "small", "claimRef": claimRef}, nil)
	if err := cp.Create(ctx, xr); err != nil {
		t.Fatalf("Crossplane creates the XR: %v", err)
	}
	if tr, _ := allowance.ParseTrace(xr.GetAnnotations()[v1alpha1.AnnotationTrace]); len(tr) != 2 || tr[0].User != alice || tr[1].Kind != "XDatabase" {
		t.Errorf("XR trace = %v, want the Claim's hop by %s then the XR's", tr, alice)
	}
	reconciled(t, xr)

	// Without an allowance on the Claim, Crossplane may not change a
	// watched field: it may only propagate.
	x := xr.DeepCopy()
	err := controlplane.Update(cp, x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") })
	fixture.ErrorContains(t, err, "denied", "spec.size", "AllowancePolicy xdatabases", "no unconsumed allowance on DatabaseClaim team-b/billing covers spec.size")

	c := claim.DeepCopy()
	if err := controlplane.Update(aliceC, c, func() { _ = unstructured.SetNestedField(c.Object, "large", "spec", "size") }); err != nil {
		t.Fatal(err)
	}
	x = xr.DeepCopy()
	if err := controlplane.Update(cp, x, func() { _ = unstructured.SetNestedField(x.Object, "large", "spec", "size") }); err != nil {
		t.Fatalf("Crossplane propagates the Claim's permitted change: %v", err)
	}
	as := fixture.Allowances(t, x)
	if len(as) != 2 {
		t.Fatalf("XR allowances = %v, want the rule's two", as)
	}
	for _, a := range as {
		if a.Initiator != alice || len(a.Trace) != 2 || a.Trace[0].Kind != "DatabaseClaim" || a.Trace[1].Kind != "XDatabase" || a.Trace[1].User != crossplane {
			t.Errorf("XR allowance %+v: want initiator %s and trace Claim → XR (by Crossplane)", a, alice)
		}
	}
}

func TestDeletionProtection(t *testing.T) {
	ctx := context.Background()
	waitForRules(t, "xdatabases")
	aliceC := as(t, alice, "platform-team")
	fixture.Eventually(t, 20e9, "the deletion protection ValidatingAdmissionPolicy", func() (bool, string) {
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		err := as(t, "admin-reader").Get(ctx, client.ObjectKey{Name: "kausality-protect-xdatabases.example.com"}, vap)
		return err == nil, errString(err)
	})

	xr := object("XDatabase", "", "precious", map[string]any{"size": "small"}, nil)
	if err := aliceC.Create(ctx, xr); err != nil {
		t.Fatal(err)
	}
	// The policy may take a moment to bind; until then the webhook denies.
	err := aliceC.Delete(ctx, xr.DeepCopy())
	fixture.ErrorContains(t, err, "XDatabase precious is protected from deletion by AllowancePolicy xdatabases", `kausality.io/allow-delete: "true"`)

	x := xr.DeepCopy()
	if err := controlplane.Update(aliceC, x, func() {
		ann := x.GetAnnotations()
		ann[v1alpha1.AnnotationAllowDelete] = "true"
		x.SetAnnotations(ann)
	}); err != nil {
		t.Fatalf("alice sets allow-delete: %v", err)
	}
	if err := aliceC.Delete(ctx, x); err != nil {
		t.Fatalf("deleting with allow-delete: %v", err)
	}
	if err := aliceC.Get(ctx, client.ObjectKeyFromObject(x), x); !kerrors.IsNotFound(err) {
		t.Errorf("XR still there after delete: %v", err)
	}

	// A composite another composed (nested XRs): the garbage collector
	// deletes it once its controller is gone, carrying out that deletion;
	// Alice deleting it by hand is refused like any other.
	nested := object("XDatabase", "", "nested", map[string]any{"size": "small"}, nil)
	nested.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "gone", UID: "00000000-0000-4000-8000-0000000000aa", Controller: ptr.To(true)}})
	if err := as(t, crossplane, "system:serviceaccounts").Create(ctx, nested); err != nil {
		t.Fatalf("Crossplane composes a nested XDatabase: %v", err)
	}
	err = aliceC.Delete(ctx, nested.DeepCopy())
	fixture.ErrorContains(t, err, "XDatabase nested is protected from deletion")
	gc := as(t, "system:serviceaccount:kube-system:generic-garbage-collector", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	if err := gc.Delete(ctx, nested.DeepCopy()); err != nil {
		t.Fatalf("the garbage collector deletes the nested XDatabase: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
