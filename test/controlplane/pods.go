package controlplane

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CrossplaneImage is the image the harness's Crossplane pod names: the
// version of Crossplane core the suite runs, read off its module directory
// (…/crossplane/v2@v2.3.4).
func (c *ControlPlane) CrossplaneImage() string {
	_, version, _ := strings.Cut(filepath.Base(c.module), "@")
	return "xpkg.crossplane.io/crossplane/crossplane:" + version
}

// controllerPod creates the pod a controller process stands for, as a
// cluster has it: in crossplane-system, under the controller's service
// account, running image. Nothing runs it (there is no kubelet); the
// process acts with its identity (podExtra), so admission sees the build
// a real install's pod-bound token shows it, and reads the images here.
func (c *ControlPlane) controllerPod(ctx context.Context, name, serviceAccount, image string) (*corev1.Pod, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: serviceAccount}}
	if err := c.admin.Create(ctx, sa); err != nil && !kerrors.IsAlreadyExists(err) {
		return nil, errors.Wrapf(err, "cannot create service account %s", serviceAccount)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: serviceAccount, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
	err := c.admin.Create(ctx, p)
	if kerrors.IsAlreadyExists(err) {
		err = c.admin.Get(ctx, client.ObjectKeyFromObject(p), p)
	}
	return p, errors.Wrapf(err, "cannot create pod %s", name)
}
