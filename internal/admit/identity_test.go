package admit

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// identified is a gated Bucket acting on the cloud resource named and
// controlled by the composite whose UID is given ("" for none).
func identified(externalName, controller string) *unstructured.Unstructured {
	u := bucket(nil)
	if externalName != "" {
		u.SetAnnotations(map[string]string{AnnotationExternalName: externalName})
	}
	if controller != "" {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "xr-" + controller,
			UID: types.UID(controller), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
	}
	return u
}

func TestIdentity(t *testing.T) {
	stored := identified("orders-data", "orders")
	user := func(name string, groups ...string) policy.Identity {
		return policy.Identity{Username: name, Groups: append(groups, "system:authenticated")}
	}
	cases := map[string]struct {
		reason   string
		user     policy.Identity
		old, obj *unstructured.Unstructured
		want     string // a part of the refusal, "" when allowed
	}{
		"UserRetargetsExternalName": {reason: "The next gate that opens would act on the victim's cloud resource.",
			user: user(bob), old: stored, obj: identified("payments-data", "orders"), want: `annotation crossplane.io/external-name (from "orders-data" to "payments-data")`},
		"UserSetsUnsetExternalName": {reason: "A resource not yet created would observe, then update, the victim's resource.",
			user: user(bob), old: identified("", "orders"), obj: identified("payments-data", "orders"), want: "crossplane.io/external-name"},
		"UserRemovesExternalName": {reason: "Without it, some providers create a second resource, others adopt by name.",
			user: user(bob), old: stored, obj: identified("", "orders"), want: "crossplane.io/external-name"},
		"CrossplaneRetargets": {reason: "A Composition that retargets a gated resource is refused like a hand edit.",
			user: user(crossplane), old: stored, obj: identified("payments-data", "orders"), want: "crossplane.io/external-name"},
		"ProviderRecordsExternalName": {reason: "crossplane-runtime records the name the cloud assigned: the provider's bookkeeping.",
			user: user(recorder), old: identified("", "orders"), obj: stored},
		"UserRepointsController": {reason: "Pointing away from a frozen composite would lift the freeze.",
			user: user(bob), old: stored, obj: identified("orders-data", "scratch"), want: "controller reference (from XDatabase xr-orders to XDatabase xr-scratch)"},
		"UserDropsController": {reason: "Without a controller the deletion above counts as final.",
			user: user(bob), old: stored, obj: identified("orders-data", ""), want: "controller reference (from XDatabase xr-orders to none)"},
		"CrossplaneAdopts": {reason: "Crossplane composes a resource with its controller reference in the write that creates it; adding one later adopts a resource made by hand under the name Crossplane gives one not yet composed, external name and all.",
			user: user(crossplane), old: identified("payments-data", ""), obj: identified("payments-data", "orders"), want: "controller reference (from none to XDatabase xr-orders: Crossplane may not adopt"},
		"CrossplaneUpdatesWhatItComposed": {reason: "Crossplane writing a resource it composed keeps its controller reference.",
			user: user(crossplane), old: stored, obj: stored},
		"GarbageCollectorOrphans": {reason: "An orphaning deletion of the composite removes its owner references.",
			user: user("system:serviceaccount:kube-system:generic-garbage-collector"), old: stored, obj: identified("orders-data", "")},
		"GarbageCollectorDoesNotRepoint": {reason: "The garbage collector only removes references.",
			user: user("system:kube-controller-manager"), old: stored, obj: identified("orders-data", "scratch"), want: "controller reference"},
		"Administrator": {reason: "Cluster administrators are outside the threat model.",
			user: user("admin", GroupMasters), old: stored, obj: identified("payments-data", "scratch")},
		"Creation": {reason: "Importing a resource names it at creation; creation is gated by other rules.",
			user: user(bob), obj: identified("orders-data", "")},
		"UserCreatesControlledResource": {reason: "Crossplane would adopt a hand-made resource naming its composite, and open it with the composite's next change.",
			user: user(bob), obj: stored, want: "may not create a gated managed resource controlled by a composite"},
		"CrossplaneCreatesControlledResource": {reason: "Crossplane composes.",
			user: user(crossplane), obj: stored},
		"UserSwapsCompositionResourceName": {reason: "Crossplane matches observed resources to the pipeline's by it: swapped while the composite is paused, Alice's permitted change reaches the other bucket.",
			user: user(bob), old: named(stored, "data"), obj: named(stored, "logs"), want: `annotation crossplane.io/composition-resource-name (from "data" to "logs")`},
		"UserCreatesComposedLookingResource": {reason: "Crossplane adopts an uncontrolled resource its composite references under the name it carries.",
			user: user(bob), obj: named(identified("payments-data", ""), "data"), want: "may not create a gated managed resource as a composed one"},
		"CrossplaneNamesWhatItComposes": {reason: "Crossplane sets the name when it composes.",
			user: user(crossplane), obj: named(stored, "data")},
		"OtherEdits": {reason: "Writes that leave the identity alone are for the other rules.",
			user: user(bob), old: stored, obj: func() *unstructured.Unstructured {
				u := stored.DeepCopy()
				u.SetLabels(map[string]string{"team": "a"})
				return u
			}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkVerdict(t, tc.reason, "Identity("+tc.user.Username+")", writers.Identity(tc.user, tc.old, tc.obj), metrics.ReasonIdentity, tc.want)
		})
	}
}

func TestStatus(t *testing.T) {
	cases := map[string]struct {
		reason string
		user   policy.Identity
		want   bool // refused
	}{
		"User":          {reason: "crossplane-edit grants users /status; Kausality reads it as fact.", user: policy.Identity{Username: bob, Groups: []string{"system:authenticated"}}, want: true},
		"Crossplane":    {reason: "Crossplane writes composites' and Claims' status.", user: policy.Identity{Username: crossplane}},
		"Provider":      {reason: "A provider writes its managed resources' status.", user: policy.Identity{Username: recorder}},
		"Kausality":     {reason: "The gate controller writes the GateOpen condition.", user: policy.Identity{Username: kausality}},
		"Administrator": {reason: "Cluster administrators are outside the threat model.", user: policy.Identity{Username: "admin", Groups: []string{GroupMasters}}},
		"OtherServiceAccount": {reason: "A service account outside Crossplane's namespace is a user.",
			user: policy.Identity{Username: "system:serviceaccount:team-a:ci"}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := ""
			if tc.want {
				want = "status of Bucket orders-data"
			}
			checkVerdict(t, tc.reason, "Status("+tc.user.Username+")", writers.Status(tc.user, bucket(nil)), metrics.ReasonStatusWriter, want)
		})
	}
}

// controlled is u with a controller reference to an XPlatform.
func controlled(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1alpha1", Kind: "XPlatform", Name: "shop", UID: "p1", Controller: ptr.To(true)}})
	return u
}

func TestComposedDeletion(t *testing.T) {
	gc := "system:serviceaccount:kube-system:generic-garbage-collector"
	xr := &unstructured.Unstructured{}
	cases := map[string]struct {
		user string
		obj  *unstructured.Unstructured
		want bool
	}{
		"GarbageCollectorDeletesComposed": {user: gc, obj: controlled(xr.DeepCopy()), want: true},
		"GarbageCollectorDeletesTopLevel": {user: gc, obj: xr.DeepCopy()},
		"AliceDeletesComposed":            {user: alice, obj: controlled(xr.DeepCopy())},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ComposedDeletion(tc.user, tc.obj); got != tc.want {
				t.Errorf("ComposedDeletion(%s) = %t, want %t", tc.user, got, tc.want)
			}
		})
	}
}

func TestReferences(t *testing.T) {
	xr := func(refs ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		u.SetAPIVersion("example.com/v1alpha1")
		u.SetKind("XDatabase")
		u.SetName("orders-x1")
		if len(refs) > 0 {
			l := make([]any, 0, len(refs))
			for _, r := range refs {
				l = append(l, map[string]any{"apiVersion": "recorder.kausality.io/v1alpha1", "kind": "Bucket", "name": r})
			}
			_ = unstructured.SetNestedSlice(u.Object, l, "spec", "crossplane", "resourceRefs")
		}
		return u
	}
	cases := map[string]struct {
		reason   string
		user     policy.Identity
		old, obj *unstructured.Unstructured
		want     string
	}{
		"BobAddsHisBucket": {reason: "A reference Bob adds would be read as proof of composition when a deletion opens Delete gates.",
			user: policy.Identity{Username: bob}, old: xr("orders-data"), obj: xr("orders-data", "bobs-bucket"), want: "spec.crossplane.resourceRefs of XDatabase orders-x1"},
		"BobCreatesWithReferences": {reason: "At creation too.",
			user: policy.Identity{Username: bob}, obj: xr("orders-data"), want: "spec.crossplane.resourceRefs"},
		"BobMakesHisXRLookComposed": {reason: "A controller reference would let the garbage collector delete a protected XR once its fake controller is gone.",
			user: policy.Identity{Username: bob}, old: xr(), obj: controlled(xr()), want: "controller reference (from none to XPlatform shop)"},
		"BobCreatesAComposedLookingXR": {reason: "At creation too.",
			user: policy.Identity{Username: bob}, obj: controlled(xr()), want: "only Crossplane composes a composite into another"},
		"CrossplaneComposesAnXR": {reason: "Crossplane composes a nested XR.",
			user: policy.Identity{Username: crossplane}, obj: controlled(xr())},
		"GarbageCollectorOrphans": {reason: "An orphaning deletion of the parent removes the controller reference.",
			user: policy.Identity{Username: "system:serviceaccount:kube-system:generic-garbage-collector"}, old: controlled(xr()), obj: xr()},
		"CrossplaneRecords": {reason: "Crossplane records what it composed.",
			user: policy.Identity{Username: crossplane}, old: xr(), obj: xr("orders-data")},
		"BobRepointsAClaim": {reason: "A Claim's spec.resourceRef is what the claim controller follows: repointed, it takes over another composite or has Crossplane create one.",
			user: policy.Identity{Username: bob}, old: boundClaim("orders-x1"), obj: boundClaim("ghost"), want: "spec.resourceRef of DatabaseClaim team-a/orders"},
		"BobBindsAtCreation": {reason: "A Claim created bound to an existing composite takes it over.",
			user: policy.Identity{Username: bob}, obj: boundClaim("orders-x1"), want: "only Crossplane binds a Claim and its composite"},
		"BobRepointsAComposite": {reason: "A composite's spec.claimRef is the other half of the binding.",
			user: policy.Identity{Username: bob}, old: xr(), obj: func() *unstructured.Unstructured {
				u := xr()
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"namespace": "team-b", "name": "bobs"}, "spec", "claimRef")
				return u
			}(), want: "spec.claimRef of XDatabase orders-x1"},
		"CrossplaneBinds": {reason: "The claim controller binds a Claim.",
			user: policy.Identity{Username: crossplane}, old: boundClaim(""), obj: boundClaim("orders-x1")},
		"AdministratorBinds": {reason: "A platform administrator may bind a Claim to an existing composite (static provisioning).",
			user: policy.Identity{Username: "admin", Groups: []string{GroupMasters}}, obj: boundClaim("orders-x1")},
		"BobSwapsANestedXRsName": {reason: "A nested composite's composition resource name is its parent's to give: swapped, a change permitted for one reaches the other.",
			user: policy.Identity{Username: bob}, old: named(xr(), "network"), obj: named(xr(), "database"), want: `annotation crossplane.io/composition-resource-name (from "network" to "database") of XDatabase orders-x1`},
		"BobCreatesANamedXR": {reason: "At creation too.",
			user: policy.Identity{Username: bob}, obj: named(xr(), "network"), want: "only Crossplane names what a composite composed"},
		"CrossplaneNamesANestedXR": {reason: "Crossplane names what it composes.",
			user: policy.Identity{Username: crossplane}, obj: controlled(named(xr(), "network"))},
		"AliceEditsSpec": {reason: "Other spec changes are the policies' business.",
			user: policy.Identity{Username: alice}, old: xr("orders-data"), obj: func() *unstructured.Unstructured {
				u := xr("orders-data")
				_ = unstructured.SetNestedField(u.Object, "large", "spec", "size")
				return u
			}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkVerdict(t, tc.reason, "References("+tc.user.Username+")", writers.References(tc.user, tc.old, tc.obj), metrics.ReasonReferences, tc.want)
		})
	}
}

// boundClaim is the Claim team-a/orders bound to the composite xr, or
// unbound for "".
func boundClaim(xr string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "small"}}}
	u.SetAPIVersion("example.com/v1alpha1")
	u.SetKind("DatabaseClaim")
	u.SetNamespace("team-a")
	u.SetName("orders")
	if xr != "" {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "XDatabase", "name": xr}, "spec", "resourceRef")
	}
	return u
}

// named is u with the composition resource name n.
func named(u *unstructured.Unstructured, n string) *unstructured.Unstructured {
	out := u.DeepCopy()
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationCompositionResourceName] = n
	out.SetAnnotations(ann)
	return out
}
