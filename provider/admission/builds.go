package admission

import (
	"context"
	"fmt"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// A Build is the build of a controller that sent a request: the images of
// the pod its service account token is bound to.
type Build struct {
	Images []string
	// Hash is logic.BuildHash of Images.
	Hash string
}

// String names the build for a message.
func (b Build) String() string { return strings.Join(b.Images, ", ") }

// buildOf is the build that sent a request, or nil when the request names
// no pod: a user, or a token not bound to a pod. An AdmissionRequest
// carries no User-Agent, but since Kubernetes 1.32
// every pod's projected service account token names its pod in the user's
// extra (authentication.kubernetes.io/pod-name and pod-uid), and the pod
// names the images it runs. Only the API server sets these: a user would
// need to impersonate the service account and its extra.
func buildOf(ctx context.Context, r client.Reader, u authenticationv1.UserInfo) (*Build, error) {
	ns, _, err := serviceaccount.SplitUsername(u.Username)
	if err != nil {
		return nil, nil //nolint:nilerr // not a service account: no build to know
	}
	names, uids := u.Extra[serviceaccount.PodNameKey], u.Extra[serviceaccount.PodUIDKey]
	if len(names) != 1 || names[0] == "" {
		return nil, nil
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: names[0]}, pod); err != nil {
		return nil, errors.Wrapf(err, errFmtGetPodWhichSentRequest, ns, names[0], u.Username)
	}
	if len(uids) == 1 && string(pod.GetUID()) != uids[0] {
		// The token names a pod that was since replaced by one of the
		// same name; the API server rejects such tokens, so this is a
		// race with the replacement.
		return nil, errors.Errorf(errFmtPodNotPodThatSent, ns, names[0], uids[0], u.Username)
	}
	b := &Build{}
	for _, c := range pod.Spec.Containers {
		b.Images = append(b.Images, c.Image)
	}
	if len(b.Images) == 0 {
		return nil, errors.Errorf(errFmtPodWhichSentRequestHas, ns, names[0], u.Username)
	}
	b.Hash = logic.BuildHash(b.Images)
	return b, nil
}

// build records which build of a controller, Crossplane or a provider,
// writes a managed resource (annotation kausality.io/controller-builds,
// one entry per service account), and decides what a build new to the
// resource may change (docs/UPGRADES.md, controller upgrades). Its changes that no
// allowance ships (gate.Unshipped; for a provider, its late
// initialization) are an upgrade: the write is denied unless an
// UpgradeAllowance for its service account covers every one. Covered, a
// provider's late initialization is approved as before, and Crossplane's
// changes get an External allowance traced to the UpgradeAllowance when it
// grants the external Update (else the gate holds them). A build already
// recorded, or a controller's first write, follows the normal rules.
//
// It returns the allowances to store, a denial, or an error.
func (h *Managed) build(ctx context.Context, u authenticationv1.UserInfo, child policy.Child, old, obj *unstructured.Unstructured, as []allowance.Allowance, lateInit bool) ([]allowance.Allowance, string, error) {
	key := v1alpha1.AnnotationControllerBuilds
	if u.Username != h.Trusted.Crossplane && !h.Trusted.Controller(u.Username) {
		if old != nil && h.Trusted.Has(u.Username) {
			admit.KeepStored(obj, old, key) // Kausality's own writes record no build
		}
		return as, "", nil
	}
	b, err := buildOf(ctx, h.Reader, u)
	if err != nil {
		if old != nil {
			admit.KeepStored(obj, old, key)
		}
		return as, "", err
	}
	var stored string
	if old != nil {
		stored = old.GetAnnotations()[key]
	}
	// Only admission writes the record: one that does not read starts
	// again, which is no change for anyone.
	rec, _ := logic.ParseControllers(stored)
	var change *logic.Change
	if b == nil {
		// A controller whose token is bound to no pod (a long-lived token,
		// one minted for a process outside the cluster) names no build: it
		// counts as one the resource has not recorded, every time, so its
		// uncaused changes need an UpgradeAllowance, as a new build's do.
		// Nothing is recorded for it.
		if old == nil {
			return as, "", nil
		}
		admit.KeepStored(obj, old, key)
		b = &Build{Images: []string{"a token bound to no pod"}, Hash: logic.UnboundBuild}
		change = &logic.Change{Controller: u.Username, From: rec[u.Username], To: logic.UnboundBuild}
	} else {
		var next logic.Controllers
		next, change = rec.Wrote(u.Username, b.Hash)
		admit.SetAnnotation(obj, key, next.Format())
	}
	if change == nil || old == nil {
		return as, "", nil
	}
	var ms []mutation.Mutation
	switch {
	case lateInit:
		ms = mutation.Diff("spec", admit.SpecBeyondGate(old), admit.SpecBeyondGate(obj))
	case u.Username == h.Trusted.Crossplane:
		ms = gate.Unshipped(as, mutation.Diff("spec", admit.SpecBeyondGate(old), admit.SpecBeyondGate(obj)))
	}
	if len(ms) == 0 {
		return as, "", nil
	}
	ul := &v1alpha1.UpgradeAllowanceList{}
	if err := h.Reader.List(ctx, ul); err != nil {
		return nil, "", errors.Wrap(err, errListUpgradeAllowances)
	}
	up := policy.Upgrade{Changes: []logic.Change{*change}}
	bound := policy.UpgradeBound(ul.Items, up)
	for _, m := range ms {
		if !bound.AllowsMutation(child, m) {
			return nil, fmt.Sprintf("%s runs a new build (%s; %s) and its write changes %s of %s, which no allowance covers; an UpgradeAllowance with serviceAccount %s whose policies cover that change lets the new build make it",
				u.Username, b, change, m.Path, admit.Describe(obj), u.Username), nil
		}
	}
	if lateInit || !v1alpha1.GrantsVerb(bound.ExternalVerbs(child), v1alpha1.VerbUpdate) {
		return as, "", nil
	}
	by := policy.UpgradesFor(ul.Items, up)[0]
	gen := allowance.NextGeneration(old.GetGeneration())
	hop := allowance.HopOf(obj, gen).By(u.Username, h.Now())
	hop.Field = ms[0].Path
	t := allowance.Trace{allowance.UpgradeHop(by.GetName(), by.GetGeneration()), hop}
	if old.GetAnnotations()[v1alpha1.AnnotationTrace] == obj.GetAnnotations()[v1alpha1.AnnotationTrace] {
		// No change of the pipeline's is traced in this write: the
		// resource's generation is the upgrade's.
		admit.SetAnnotation(obj, v1alpha1.AnnotationTrace, allowance.FormatTrace(t))
	}
	return append(as, allowance.ExternalGrant(child.APIGroup, child.Kind, v1alpha1.VerbUpdate, gen, t).Shipping(mutation.BoundsFor(ms))), "", nil
}
