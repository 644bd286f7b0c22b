package parents

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

// The chains: a modern namespaced XR team-a/xnop above the NopResource
// team-a/nop, and a legacy cluster-scoped XDatabase orders-x1 with the
// Claim team-a/orders above the cluster-scoped Bucket orders-data.

var errBoom = errors.New("boom")

type option func(*unstructured.Unstructured)

func object(apiVersion, kind, namespace, name string, opts ...option) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	for _, o := range opts {
		o(u)
	}
	return u
}

func frozenBy(v string) option {
	return func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{v1alpha1.AnnotationFreeze: v})
	}
}

func ownedBy(apiVersion, kind, name string, controller bool) option {
	return func(u *unstructured.Unstructured) {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(controller)}})
	}
}

func claimRef(ref map[string]any) option {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(u.Object, ref, "spec", "claimRef")
	}
}

const (
	carolFreeze = `{"user":"carol@example.com","message":"incident 42","at":"2026-11-22T12:00:00Z"}`
	typoFreeze  = `{"user":"carol@example.com",}`
)

func nop(opts ...option) *unstructured.Unstructured {
	return object("nop.example.org/v1alpha1", "NopResource", "team-a", "nop", opts...)
}

func xnop(opts ...option) *unstructured.Unstructured {
	return object("example.org/v1alpha1", "XNop", "team-a", "xnop", opts...)
}

func bucket(opts ...option) *unstructured.Unstructured {
	return object("recorder.kausality.io/v1alpha1", "Bucket", "", "orders-data",
		append([]option{ownedBy("example.com/v1alpha1", "XDatabase", "orders-x1", true)}, opts...)...)
}

var ordersRef = map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "DatabaseClaim", "namespace": "team-a", "name": "orders"}

func xdb(opts ...option) *unstructured.Unstructured {
	return object("example.com/v1alpha1", "XDatabase", "", "orders-x1", append([]option{claimRef(ordersRef)}, opts...)...)
}

func claim(opts ...option) *unstructured.Unstructured {
	return object("example.com/v1alpha1", "DatabaseClaim", "team-a", "orders", opts...)
}

func teamA(opts ...option) *unstructured.Unstructured {
	return object("v1", "Namespace", "", "team-a", opts...)
}

func reader(objs []client.Object, funcs interceptor.Funcs) client.Client {
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

// failGet fails every Get of kind.
func failGet(kind string) interceptor.Funcs {
	return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if obj.GetObjectKind().GroupVersionKind().Kind == kind {
			return errBoom
		}
		return c.Get(ctx, key, obj, opts...)
	}}
}

// strip drops what the fake API server fills in.
func strip(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	u = u.DeepCopy()
	u.SetResourceVersion("")
	return u
}

func TestComposite(t *testing.T) {
	type args struct {
		objs  []client.Object
		funcs interceptor.Funcs
		mr    *unstructured.Unstructured
	}
	type want struct {
		xr  *unstructured.Unstructured
		err error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NoOwner": {
			reason: "A managed resource without a controller reference has no composite.",
			args:   args{mr: nop()},
		},
		"OwnerNotController": {
			reason: "Only the controlling owner is the composite.",
			args:   args{objs: []client.Object{xnop()}, mr: nop(ownedBy("example.org/v1alpha1", "XNop", "xnop", false))},
		},
		"Namespaced": {
			reason: "A namespaced composite is looked up in the managed resource's namespace.",
			args:   args{objs: []client.Object{xnop(frozenBy(carolFreeze))}, mr: nop(ownedBy("example.org/v1alpha1", "XNop", "xnop", true))},
			want:   want{xr: xnop(frozenBy(carolFreeze))},
		},
		"ClusterScoped": {
			reason: "A legacy cluster-scoped composite is found from a cluster-scoped managed resource.",
			args:   args{objs: []client.Object{xdb()}, mr: bucket()},
			want:   want{xr: xdb()},
		},
		"Gone": {
			reason: "A composite that is gone is no composite, and no error.",
			args:   args{mr: nop(ownedBy("example.org/v1alpha1", "XNop", "xnop", true))},
		},
		"Unreadable": {
			reason: "A composite that cannot be read is an error naming it.",
			args:   args{funcs: failGet("XNop"), mr: nop(ownedBy("example.org/v1alpha1", "XNop", "xnop", true))},
			want:   want{err: errors.Wrap(errBoom, "cannot get XNop team-a/xnop")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Composite(context.Background(), reader(tc.args.objs, tc.args.funcs), tc.args.mr)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nComposite(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.xr, strip(got)); diff != "" {
				t.Errorf("%s\nComposite(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestClaim(t *testing.T) {
	type args struct {
		objs  []client.Object
		funcs interceptor.Funcs
		xr    *unstructured.Unstructured
	}
	type want struct {
		claim *unstructured.Unstructured
		err   error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Found": {
			reason: "spec.claimRef names the Claim, in its own namespace.",
			args:   args{objs: []client.Object{claim()}, xr: xdb()},
			want:   want{claim: claim()},
		},
		"NoClaimRef": {
			reason: "A composite without spec.claimRef (a modern XR) has no Claim.",
			args:   args{objs: []client.Object{claim()}, xr: xnop()},
		},
		"ClaimRefWithoutKind": {
			reason: "A claimRef without a kind names nothing.",
			args: args{objs: []client.Object{claim()}, xr: object("example.com/v1alpha1", "XDatabase", "", "orders-x1",
				claimRef(map[string]any{"apiVersion": "example.com/v1alpha1", "namespace": "team-a", "name": "orders"}))},
		},
		"ClaimRefWithoutName": {
			reason: "A claimRef without a name names nothing.",
			args: args{objs: []client.Object{claim()}, xr: object("example.com/v1alpha1", "XDatabase", "", "orders-x1",
				claimRef(map[string]any{"apiVersion": "example.com/v1alpha1", "kind": "DatabaseClaim", "namespace": "team-a"}))},
		},
		"Gone": {
			reason: "A Claim that is gone is no Claim, and no error.",
			args:   args{xr: xdb()},
		},
		"Unreadable": {
			reason: "A Claim that cannot be read is an error naming it.",
			args:   args{funcs: failGet("DatabaseClaim"), xr: xdb()},
			want:   want{err: errors.Wrap(errBoom, "cannot get DatabaseClaim team-a/orders")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Claim(context.Background(), reader(tc.args.objs, tc.args.funcs), tc.args.xr)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nClaim(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.claim, strip(got)); diff != "" {
				t.Errorf("%s\nClaim(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFrozen(t *testing.T) {
	controlled := ownedBy("example.org/v1alpha1", "XNop", "xnop", true)
	type args struct {
		objs  []client.Object
		funcs interceptor.Funcs
		mr    *unstructured.Unstructured
	}
	type want struct {
		by  string
		err error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NothingFrozen": {
			reason: "Nobody froze the resource or its parents.",
			args:   args{objs: []client.Object{xdb(), claim()}, mr: bucket()},
		},
		"NoParents": {
			reason: "A managed resource without a composite is frozen only by its own annotation.",
			args:   args{mr: nop()},
		},
		"ManagedResource": {
			reason: "The resource's own freeze names its user.",
			args:   args{mr: nop(frozenBy(carolFreeze))},
			want:   want{by: "carol@example.com"},
		},
		"ManagedResourceUnreadable": {
			reason: "A freeze that cannot be parsed still freezes.",
			args:   args{mr: nop(frozenBy(typoFreeze))},
			want:   want{by: allowance.UnreadableFreeze},
		},
		"ManagedResourceWithoutUser": {
			reason: "A freeze that names no user still freezes.",
			args:   args{mr: nop(frozenBy(`{"message":"hold"}`))},
			want:   want{by: allowance.UnreadableFreeze},
		},
		"ManagedResourceWinsOverParents": {
			reason: "The resource's own freeze is reported without reading its parents.",
			args:   args{funcs: failGet("XNop"), mr: nop(controlled, frozenBy(carolFreeze))},
			want:   want{by: "carol@example.com"},
		},
		"Composite": {
			reason: "A freeze on the controlling composite names its user and the composite.",
			args:   args{objs: []client.Object{xnop(frozenBy(carolFreeze))}, mr: nop(controlled)},
			want:   want{by: "carol@example.com on XNop xnop"},
		},
		"CompositeUnreadable": {
			reason: "An unparseable freeze on the composite still freezes.",
			args:   args{objs: []client.Object{xnop(frozenBy(typoFreeze))}, mr: nop(controlled)},
			want:   want{by: allowance.UnreadableFreeze + " on XNop xnop"},
		},
		"Claim": {
			reason: "A freeze on the composite's Claim names its user and the Claim.",
			args:   args{objs: []client.Object{xdb(), claim(frozenBy(carolFreeze))}, mr: bucket()},
			want:   want{by: "carol@example.com on DatabaseClaim team-a/orders"},
		},
		"ClaimUnreadable": {
			reason: "An unparseable freeze on the Claim still freezes.",
			args:   args{objs: []client.Object{xdb(), claim(frozenBy(typoFreeze))}, mr: bucket()},
			want:   want{by: allowance.UnreadableFreeze + " on DatabaseClaim team-a/orders"},
		},
		"CompositeWinsOverClaim": {
			reason: "The nearest freeze is reported.",
			args:   args{objs: []client.Object{xdb(frozenBy(`{"user":"dave@example.com"}`)), claim(frozenBy(carolFreeze))}, mr: bucket()},
			want:   want{by: "dave@example.com on XDatabase orders-x1"},
		},
		"CompositeGone": {
			reason: "A composite that is gone freezes nothing.",
			args:   args{mr: nop(controlled)},
		},
		"ClaimGone": {
			reason: "A Claim that is gone freezes nothing.",
			args:   args{objs: []client.Object{xdb()}, mr: bucket()},
		},
		"NamespaceOfClaim": {
			reason: "A freeze on the Namespace of a cluster-scoped composite's Claim names its user and the Namespace.",
			args:   args{objs: []client.Object{xdb(), claim(), teamA(frozenBy(carolFreeze))}, mr: bucket()},
			want:   want{by: "carol@example.com on Namespace team-a"},
		},
		"NamespaceOfResource": {
			reason: "A freeze on the namespaced resource's Namespace freezes it, composite or not.",
			args:   args{objs: []client.Object{teamA(frozenBy(carolFreeze))}, mr: nop()},
			want:   want{by: "carol@example.com on Namespace team-a"},
		},
		"ClaimWinsOverNamespace": {
			reason: "The nearest freeze is reported.",
			args:   args{objs: []client.Object{xdb(), claim(frozenBy(`{"user":"dave@example.com"}`)), teamA(frozenBy(carolFreeze))}, mr: bucket()},
			want:   want{by: "dave@example.com on DatabaseClaim team-a/orders"},
		},
		"NamespaceCannotBeRead": {
			reason: "A Namespace that cannot be read is an error; the caller fails closed.",
			args:   args{objs: []client.Object{xdb(), claim()}, funcs: failGet("Namespace"), mr: bucket()},
			want:   want{err: errors.Wrap(errBoom, "cannot get Namespace team-a")},
		},
		"CompositeCannotBeRead": {
			reason: "A composite that cannot be read is an error; the caller fails closed.",
			args:   args{funcs: failGet("XNop"), mr: nop(controlled)},
			want:   want{err: errors.Wrap(errBoom, "cannot get XNop team-a/xnop")},
		},
		"ClaimCannotBeRead": {
			reason: "A Claim that cannot be read is an error; the caller fails closed.",
			args:   args{objs: []client.Object{xdb()}, funcs: failGet("DatabaseClaim"), mr: bucket()},
			want:   want{err: errors.Wrap(errBoom, "cannot get DatabaseClaim team-a/orders")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			by, err := Frozen(context.Background(), reader(tc.args.objs, tc.args.funcs), tc.args.mr)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nFrozen(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.by, by); diff != "" {
				t.Errorf("%s\nFrozen(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeleting(t *testing.T) {
	deleting := func(u *unstructured.Unstructured) {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{"example.org/finalizer"})
	}
	cases := map[string]struct {
		reason string
		objs   []client.Object
		funcs  interceptor.Funcs
		want   bool
		err    bool
	}{
		"Standing":         {reason: "Composite and Claim stand: a deletion above the bucket was refused or never happened.", objs: []client.Object{xdb(), claim()}},
		"CompositeGone":    {reason: "The composite is gone: the deletion is final.", objs: []client.Object{claim()}, want: true},
		"CompositeDeleted": {reason: "The composite is being deleted.", objs: []client.Object{xdb(deleting), claim()}, want: true},
		"ClaimDeleted":     {reason: "The Claim is being deleted; Crossplane deletes the composite next.", objs: []client.Object{xdb(), claim(deleting)}, want: true},
		"ClaimGone":        {reason: "The composite claims a Claim that is gone.", objs: []client.Object{xdb()}, want: true},
		"Unreadable":       {reason: "A composite that cannot be read is an error, never a final deletion.", objs: []client.Object{xdb(), claim()}, funcs: failGet("XDatabase"), err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Deleting(context.Background(), reader(tc.objs, tc.funcs), bucket())
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("%s\nDeleting() = %t, %v; want %t, error %t", tc.reason, got, err, tc.want, tc.err)
			}
		})
	}
}

// The nested chain: the XPlatform team-a/platform composed the XNop
// team-a/xnop, which composes the NopResource team-a/nop.

func platform(opts ...option) *unstructured.Unstructured {
	return object("example.org/v1alpha1", "XPlatform", "team-a", "platform", append([]option{uid("uid-platform")}, opts...)...)
}

func uid(u string) option { return func(o *unstructured.Unstructured) { o.SetUID(types.UID(u)) } }

// composes sets spec.crossplane.resourceRefs, which only Crossplane writes.
func composes(refs ...map[string]any) option {
	return func(u *unstructured.Unstructured) {
		l := make([]any, 0, len(refs))
		for _, r := range refs {
			l = append(l, r)
		}
		_ = unstructured.SetNestedSlice(u.Object, l, "spec", "crossplane", "resourceRefs")
	}
}

var xnopRef = map[string]any{"apiVersion": "example.org/v1alpha1", "kind": "XNop", "name": "xnop"}

func TestParent(t *testing.T) {
	composedXNop := xnop(ownedBy("example.org/v1alpha1", "XPlatform", "platform", true))
	cases := map[string]struct {
		reason string
		objs   []client.Object
		xr     *unstructured.Unstructured
		want   *unstructured.Unstructured
		err    error
	}{
		"Claim": {reason: "A legacy composite's parent is its Claim.",
			objs: []client.Object{claim()}, xr: xdb(), want: claim()},
		"ComposingComposite": {reason: "A nested XR's parent is the composite that controls it and references it among its composed resources.",
			objs: []client.Object{platform(composes(xnopRef))}, xr: composedXNop, want: platform(composes(xnopRef))},
		"NotReferenced": {reason: "An owner reference anyone may set on their own XR is no proof: the parent must reference it.",
			objs: []client.Object{platform()}, xr: composedXNop},
		"OtherUID": {reason: "A parent of the same name but another UID (recreated) is not the owner.",
			objs: []client.Object{platform(composes(xnopRef), uid("uid-other"))}, xr: composedXNop},
		"NotController": {reason: "Only the controlling owner composed it.",
			objs: []client.Object{platform(composes(xnopRef))}, xr: xnop(ownedBy("example.org/v1alpha1", "XPlatform", "platform", false))},
		"TopLevel": {reason: "A top-level XR has no parent.", xr: xnop()},
		"Unreadable": {reason: "A parent that cannot be read is an error naming it.",
			xr: composedXNop, err: errors.Wrap(errBoom, "cannot get XPlatform team-a/platform")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			funcs := interceptor.Funcs{}
			if tc.err != nil {
				funcs = failGet("XPlatform")
			}
			got, err := Parent(context.Background(), reader(tc.objs, funcs), tc.xr)
			if diff := cmp.Diff(tc.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nParent(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, strip(got)); diff != "" {
				t.Errorf("%s\nParent(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestFrozenNested: a freeze on the XR that composed the resource's XR
// holds the resource's gate too.
func TestFrozenNested(t *testing.T) {
	objs := []client.Object{
		platform(composes(xnopRef), frozenBy(carolFreeze)),
		xnop(ownedBy("example.org/v1alpha1", "XPlatform", "platform", true), uid("uid-xnop")),
		teamA(),
	}
	got, err := Frozen(context.Background(), reader(objs, interceptor.Funcs{}), nop(ownedBy("example.org/v1alpha1", "XNop", "xnop", true)))
	if err != nil {
		t.Fatal(err)
	}
	if want := "carol@example.com on XPlatform platform"; got != want {
		t.Errorf("Frozen(...) = %q, want %q", got, want)
	}
}

func TestDeletingNested(t *testing.T) {
	deleting := func(u *unstructured.Unstructured) {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{"example.org/finalizer"})
	}
	composed := func(opts ...option) *unstructured.Unstructured {
		return xnop(append([]option{ownedBy("example.org/v1alpha1", "XPlatform", "platform", true), uid("uid-xnop")}, opts...)...)
	}
	cases := map[string]struct {
		reason string
		objs   []client.Object
		want   bool
	}{
		"TreeStanding": {reason: "Nothing above the nop is being deleted.",
			objs: []client.Object{platform(composes(xnopRef)), composed()}},
		"ParentDeleted": {reason: "The XPlatform that composed the XNop is being deleted: the garbage collector deletes the XNop and the nop next.",
			objs: []client.Object{platform(composes(xnopRef), deleting), composed()}, want: true},
		"ParentGone": {reason: "The XPlatform is gone.",
			objs: []client.Object{composed()}, want: true},
		"ParentRecreated": {reason: "An XPlatform of the same name but another UID is not the one that composed the XNop, which is gone.",
			objs: []client.Object{platform(composes(xnopRef), uid("uid-other")), composed()}, want: true},
		"TopLevel": {reason: "An XNop nothing composed, standing.",
			objs: []client.Object{xnop(uid("uid-xnop"))}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Deleting(context.Background(), reader(tc.objs, interceptor.Funcs{}), nop(ownedBy("example.org/v1alpha1", "XNop", "xnop", true)))
			if err != nil || got != tc.want {
				t.Errorf("%s\nDeleting() = %t, %v; want %t", tc.reason, got, err, tc.want)
			}
		})
	}
}
