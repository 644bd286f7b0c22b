package controlplane

// Who acts on the control plane: Crossplane's RBAC as its chart installs
// it, and Alice's and Bob's roles as a real install gives them.

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

// installRBAC applies the chart's RBAC and gives the users theirs.
func (c *ControlPlane) installRBAC(ctx context.Context) error {
	if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}); err != nil && !kerrors.IsAlreadyExists(err) {
		return err
	}
	objs, err := renderChart(c.module, SystemNamespace)
	if err != nil {
		return err
	}
	return c.Apply(ctx, objs...)
}

// bindProviderEdit gives Alice and Bob, cluster-wide, the edit role
// Crossplane's RBAC manager generates for the recording provider's
// revision (crossplane:provider:<revision>:aggregate-to-edit, the part of
// crossplane-edit that covers the provider's kinds): how a real install
// lets users edit cluster-scoped managed resources (the legacy shape)
// without crossplane-edit's packages, Compositions and Secrets, which
// would make them Crossplane's administrators. No role is written by hand.
func (c *ControlPlane) bindProviderEdit(ctx context.Context) error {
	return until(ctx, time.Minute, func() error {
		p := &pkgv1.Provider{}
		if err := c.admin.Get(ctx, client.ObjectKey{Name: ProviderRecorder}, p); err != nil {
			return err
		}
		rev := p.Status.CurrentRevision
		if rev == "" {
			return errors.Errorf("provider %s has no current revision yet", ProviderRecorder)
		}
		role := "crossplane:provider:" + rev + ":aggregate-to-edit"
		if err := c.admin.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{}); err != nil {
			return errors.Wrapf(err, "the RBAC manager has not generated %s yet", role)
		}
		return c.Apply(ctx, mustUnstructured(&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: ProviderRecorder + "-edit"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: Alice}, {APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: Bob}},
		}))
	})
}

func mustUnstructured(o runtime.Object) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// As is a client acting as user, through impersonation.
func (c *ControlPlane) As(user string, groups ...string) (client.Client, error) {
	cfg := c.Admin
	if user != "admin" {
		cfg = fixture.As(c.Admin, user, groups...)
	}
	return client.New(cfg, client.Options{Scheme: c.Scheme})
}

// Namespace creates a namespace and gives Alice and Bob Crossplane's edit
// role in it (crossplane-edit, to which the RBAC manager aggregates every
// XRD's Claims).
func (c *ControlPlane) Namespace(ctx context.Context, name string) error {
	if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !kerrors.IsAlreadyExists(err) {
		return err
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "crossplane-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "crossplane-edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: Alice}, {APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: Bob}},
	}
	if err := c.admin.Create(ctx, rb); err != nil && !kerrors.IsAlreadyExists(err) {
		return err
	}
	// The API server's authorizer learns of the binding from its own watch,
	// a moment after the write: a user acting at once can be refused.
	for _, u := range []string{Alice, Bob} {
		if err := c.mayCreate(ctx, u, name, "", "secrets"); err != nil {
			return err
		}
	}
	return nil
}

// mayCreate waits until the API server lets user create resource of group
// in namespace ns.
func (c *ControlPlane) mayCreate(ctx context.Context, user, ns, group, resource string) error {
	return until(ctx, 30*time.Second, func() error {
		r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: group, Resource: resource},
		}}
		if err := c.admin.Create(ctx, r); err != nil {
			return errors.Wrapf(err, "cannot review whether %s may create %s.%s in %s", user, resource, group, ns)
		}
		if !r.Status.Allowed {
			return errors.Errorf("%s may not create %s.%s in namespace %s yet: %s", user, resource, group, ns, r.Status.Reason)
		}
		return nil
	})
}
