package controlplane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/render"
)

// externalRuntime plays Crossplane's External package runtime, what a
// platform team running packages outside the cluster would run: for each
// active FunctionRevision and ProviderRevision it issues a TLS server
// secret signed by Crossplane's CA, runs the package's process with it,
// and reports the endpoint, the secret and RuntimeHealthy on the revision.
// For a provider it also creates the Deployment the Deployment runtime
// would (scaled to zero; the RBAC manager binds the provider's service
// account through it) and the webhook Service.
type externalRuntime struct {
	c  *ControlPlane
	ca *authority
	// functions are the function processes, by Function name.
	functions *render.Functions
	fnCerts   map[string][]byte

	mu       sync.Mutex
	certs    map[string]map[string][]byte // provider secrets by Provider name
	started  map[string]bool
	provider *providerProcess
	recorder context.CancelFunc
}

// providerProcess is provider-kausality's replicas, the balancer in
// front of them and how to start them again.
type providerProcess struct {
	bin, kubeconfig, certs string
	replicas               []*replica
	lb                     *balancer
}

// replica is one provider-kausality process, as one pod of its Deployment.
type replica struct {
	backend
	// log names its log: provider-kausality, provider-kausality-1, ...
	log  string
	cmd  *exec.Cmd
	done <-chan struct{} // closed when cmd exits
	down bool            // killed on purpose: not restarted
	// logFrom is the size of its log when it last started: what it
	// logged in this life comes after.
	logFrom int64
}

func (c *ControlPlane) startRuntime(ctx, rctx context.Context) error {
	s := &corev1.Secret{}
	if err := c.admin.Get(ctx, client.ObjectKey{Namespace: SystemNamespace, Name: secretCA}, s); err != nil {
		return errors.Wrapf(err, "cannot read secret %s", secretCA)
	}
	ca, err := parseAuthority(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		return err
	}
	r := &externalRuntime{c: c, ca: ca, certs: map[string]map[string][]byte{}, started: map[string]bool{}}
	c.runtime = r

	// Functions serve mTLS with a certificate for the endpoint's host.
	if r.fnCerts, err = ca.serving("localhost", "127.0.0.1"); err != nil {
		return err
	}
	certs := filepath.Join(c.Dir, "tls", "functions")
	if err := writeCerts(certs, r.fnCerts); err != nil {
		return err
	}
	fns, err := render.StartFunctions(ctx, c.sources.FunctionSource, c.Dir, c.Tools, render.FunctionOptions{CertsDir: certs, LogDir: c.Dir, Race: true})
	if err != nil {
		return err
	}
	c.stop = append(c.stop, fns.Stop)
	r.functions = fns

	bin := filepath.Join(c.Dir, "provider-kausality")
	// With the race detector: the scenarios (concurrent writers among them)
	// are where the provider's concurrency is exercised; Races reads its
	// reports from the logs.
	build := exec.CommandContext(ctx, "go", "build", "-race", "-o", bin, "./provider")
	build.Dir = c.sources.ProviderSource
	if out, err := build.CombinedOutput(); err != nil {
		return errors.Wrapf(err, "cannot build provider-kausality: %s", out)
	}
	if r.provider, err = newProviderProcess(rctx, bin, Replicas, c.egress); err != nil {
		return err
	}
	c.stop = append(c.stop, r.provider.lb.close)

	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if err := r.sync(rctx); err != nil && rctx.Err() == nil {
				appendLog(c.Log("runtime"), err.Error())
			}
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	c.stop = append(c.stop, r.stopAll)
	return nil
}

// sync brings every active revision's runtime in line.
func (r *externalRuntime) sync(ctx context.Context) error {
	fl := &pkgv1.FunctionRevisionList{}
	if err := r.c.admin.List(ctx, fl); err != nil {
		return err
	}
	for i := range fl.Items {
		rev := &fl.Items[i]
		name := rev.GetLabels()[pkgv1.LabelParentPackage]
		addr := r.functions.Address(name)
		if addr == "" || rev.Spec.DesiredState != pkgv1.PackageRevisionActive {
			continue
		}
		if err := r.secret(ctx, name, r.fnCerts); err != nil {
			return err
		}
		if rev.Status.Endpoint != "dns:///"+addr || !r.reported(rev.Status.TLSServerSecretName, rev.GetCondition(pkgv1.TypeRuntimeHealthy).Status) {
			rev.Status.Endpoint = "dns:///" + addr
			rev.Status.TLSServerSecretName = ptr.To(name + "-tls-server")
			rev.SetConditions(pkgv1.RuntimeHealthy())
			if err := r.c.admin.Status().Update(ctx, rev); err != nil && !kerrors.IsConflict(err) {
				return errors.Wrapf(err, "cannot report the runtime of %s", rev.GetName())
			}
		}
	}
	pl := &pkgv1.ProviderRevisionList{}
	if err := r.c.admin.List(ctx, pl); err != nil {
		return err
	}
	for i := range pl.Items {
		if err := r.syncProvider(ctx, &pl.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *externalRuntime) reported(secret *string, healthy corev1.ConditionStatus) bool {
	return secret != nil && healthy == corev1.ConditionTrue
}

func (r *externalRuntime) syncProvider(ctx context.Context, rev *pkgv1.ProviderRevision) error {
	name := rev.GetLabels()[pkgv1.LabelParentPackage]
	if rev.Spec.DesiredState != pkgv1.PackageRevisionActive || (name != ProviderKausality && name != ProviderRecorder) {
		return nil
	}
	sa, err := r.serviceAccount(ctx, name, rev)
	if err != nil {
		return err
	}
	if err := r.deployment(ctx, name, sa, rev); err != nil {
		return err
	}
	r.mu.Lock()
	certs, ok := r.certs[name]
	r.mu.Unlock()
	if !ok {
		svc := name + "." + SystemNamespace + ".svc"
		if certs, err = r.ca.serving(svc, name, name+"."+SystemNamespace, svc+".cluster.local"); err != nil {
			return err
		}
		r.mu.Lock()
		r.certs[name] = certs
		r.mu.Unlock()
	}
	if err := r.secret(ctx, name, certs); err != nil {
		return err
	}
	if name == ProviderKausality {
		if err := r.service(ctx, name); err != nil {
			return err
		}
	}
	if !r.reported(rev.Status.TLSServerSecretName, rev.GetCondition(pkgv1.TypeRuntimeHealthy).Status) {
		rev.Status.TLSServerSecretName = ptr.To(name + "-tls-server")
		rev.SetConditions(pkgv1.RuntimeHealthy())
		if err := r.c.admin.Status().Update(ctx, rev); err != nil && !kerrors.IsConflict(err) {
			return errors.Wrapf(err, "cannot report the runtime of %s", rev.GetName())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started[name] {
		return nil
	}
	user := "system:serviceaccount:" + SystemNamespace + ":" + sa
	switch name {
	case ProviderKausality:
		certsDir := filepath.Join(r.c.Dir, "tls", name)
		if err := writeCerts(certsDir, certs); err != nil {
			return err
		}
		kc, err := r.c.kubeconfig(name, user, nil)
		if err != nil {
			return err
		}
		r.provider.kubeconfig, r.provider.certs = kc, certsDir
		if err := r.startProvider(); err != nil {
			return err
		}
		go r.supervise(ctx)
	case ProviderRecorder:
		// The recording provider is the managed resources' own: it acts
		// from a pod running its package, so admission records its build.
		pod, err := r.c.controllerPod(ctx, rev.GetName()+"-0", sa, rev.Spec.Package)
		if err != nil {
			return err
		}
		if err := r.startRecorder(user, pod); err != nil {
			return err
		}
	}
	r.started[name] = true
	return nil
}

// serviceAccount is the provider's service account as the Deployment
// runtime names it: the runtime config's serviceAccountTemplate, else the
// revision's name.
func (r *externalRuntime) serviceAccount(ctx context.Context, name string, rev *pkgv1.ProviderRevision) (string, error) {
	p := &pkgv1.Provider{}
	if err := r.c.admin.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		return "", err
	}
	if ref := p.Spec.RuntimeConfigReference; ref != nil {
		drc := &pkgv1beta1.DeploymentRuntimeConfig{}
		if err := r.c.admin.Get(ctx, client.ObjectKey{Name: ref.Name}, drc); err != nil {
			return "", errors.Wrapf(err, "cannot get DeploymentRuntimeConfig %s", ref.Name)
		}
		if t := drc.Spec.ServiceAccountTemplate; t != nil && t.Metadata != nil && t.Metadata.Name != nil {
			return *t.Metadata.Name, nil
		}
	}
	return rev.GetName(), nil
}

// deployment is the revision's Deployment as the Deployment runtime would
// create it, scaled to zero: the RBAC manager binds the provider's
// ClusterRole to the service account of the Deployments a revision owns.
func (r *externalRuntime) deployment(ctx context.Context, name, sa string, rev *pkgv1.ProviderRevision) error {
	labels := map[string]string{"pkg.crossplane.io/revision": rev.GetName()}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: rev.GetName(), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: pkgv1.SchemeGroupVersion.String(), Kind: pkgv1.ProviderRevisionKind, Name: rev.GetName(), UID: rev.GetUID()}}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{
					Name: "package-runtime", Image: name + ":external",
				}}},
			},
		},
	}
	if err := r.c.admin.Create(ctx, d); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create the Deployment of %s", rev.GetName())
	}
	return nil
}

func (r *externalRuntime) secret(ctx context.Context, name string, data map[string][]byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: name + "-tls-server"}, Data: data}
	if err := r.c.admin.Create(ctx, s); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create secret %s", s.Name)
	}
	return nil
}

func (r *externalRuntime) service(ctx context.Context, name string) error {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: serviceHost},
	}
	if err := r.c.admin.Create(ctx, s); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create Service %s", name)
	}
	return nil
}

func (r *externalRuntime) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recorder != nil {
		r.recorder()
	}
	if r.provider != nil {
		for _, rep := range r.provider.replicas {
			if rep.cmd != nil {
				// Down on purpose: supervise must not start it again.
				rep.down = true
				_ = rep.cmd.Process.Kill()
			}
		}
	}
}

func appendLog(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	_, _ = f.WriteString(time.Now().Format(time.RFC3339) + " " + line + "\n")
}
