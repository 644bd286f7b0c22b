package admission

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// The fixtures follow the chain of the e2e scenarios: Alice (platform team)
// resizes the DatabaseClaim team-a/orders, Crossplane carries the change to
// the XDatabase orders-x1 and on to its Buckets orders-data and orders-logs.

// Users as the API server authenticates them.
const (
	alice      = "alice@example.com"
	bob        = "bob@example.com"
	crossplane = "system:serviceaccount:crossplane-system:crossplane"
	provider   = "system:serviceaccount:crossplane-system:provider-kausality"
)

var (
	// fixed is the handlers' clock.
	fixed = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	now   = func() time.Time { return fixed }

	trusted = admit.Writers{Provider: provider, Crossplane: crossplane}

	asAlice      = authenticationv1.UserInfo{Username: alice, Groups: []string{"platform-team", "system:authenticated"}}
	asBob        = authenticationv1.UserInfo{Username: bob, Groups: []string{"system:authenticated"}}
	asCrossplane = authenticationv1.UserInfo{Username: crossplane, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:crossplane-system", "system:authenticated"}}
	asProvider   = authenticationv1.UserInfo{Username: provider, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	// asRecorder is the managed resources' own provider.
	asRecorder = authenticationv1.UserInfo{Username: "system:serviceaccount:crossplane-system:provider-recorder", Groups: []string{"system:serviceaccounts", "system:authenticated"}}

	bucketGVK = schema.GroupVersionKind{Group: "recorder.kausality.io", Version: "v1alpha1", Kind: "Bucket"}
)

// ts is an RFC 3339 hop timestamp d from the fixed clock.
func ts(d time.Duration) string { return allowance.Timestamp(fixed.Add(d)) }

// The scenario suite's policies (test/e2e/testdata/policies.yaml), read
// from that file so the unit tests and the scenarios agree on them.
var (
	claimsPolicy     = e2ePolicy("claims")
	xdatabasesPolicy = e2ePolicy("xdatabases")
)

// e2ePolicy is the YAML of the AllowancePolicy named name in the scenario
// suite's policies.
func e2ePolicy(name string) string {
	raw, err := os.ReadFile(filepath.Join("..", "..", "test", "e2e", "testdata", "policies.yaml"))
	if err != nil {
		panic(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		p := v1alpha1.AllowancePolicy{}
		if err := yaml.Unmarshal([]byte(doc), &p); err == nil && p.GetName() == name {
			return doc
		}
	}
	panic("test/e2e/testdata/policies.yaml has no AllowancePolicy " + name)
}

const (
	upgradeAllowance = `
apiVersion: kausality.io/v1alpha1
kind: UpgradeAllowance
metadata: {name: xdatabases-buckets-2, generation: 1}
spec:
  compositionRevisions: [xdatabases-buckets-2]
  policies:
  - target: {apiGroup: recorder.kausality.io, apiVersion: v1alpha1, resource: buckets}
    relation: ControllerChild
    verbs: [Update]
    mutations:
    - {jsonPath: "spec.forProvider.tags[*]", verbs: [Mutate]}
  - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
    relation: External
    verbs: [Update]
`
)

// decode reads a YAML fixture into a T.
func decode[T any](t testing.TB, y string) *T {
	t.Helper()
	out := new(T)
	if err := yaml.UnmarshalStrict([]byte(y), out); err != nil {
		t.Fatalf("bad fixture: %v\n%s", err, y)
	}
	return out
}

// allowancePolicy decodes an AllowancePolicy fixture and applies mods to it.
func allowancePolicy(t testing.TB, y string, mods ...func(*v1alpha1.AllowancePolicy)) *v1alpha1.AllowancePolicy {
	t.Helper()
	p := decode[v1alpha1.AllowancePolicy](t, y)
	for _, m := range mods {
		m(p)
	}
	return p
}

// kube is a fake API server holding objs, read and written as the
// provider reads and writes them.
func kube(t testing.TB, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	// The fake client stamps what it stores; fixtures shared between cases
	// stay as they are.
	copies := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		copies = append(copies, o.DeepCopyObject().(client.Object))
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(copies...).Build()
}

// mod changes an object fixture.
type mod func(*unstructured.Unstructured)

// build is base with mods applied, its numbers decoded the way the API
// server decodes JSON (whole numbers int64).
func build(t testing.TB, base string, mods ...mod) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: jsonObject(t, base)}
	for _, m := range mods {
		m(u)
	}
	return &unstructured.Unstructured{Object: normal(t, u.Object)}
}

func jsonObject(t testing.TB, y string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(j, &out); err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return out
}

// normal round-trips o through JSON as an admission request would.
func normal(t testing.TB, o map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Object fixtures: a reconciled Claim, its XR and one of its Buckets.
const (
	claimYAML = `
apiVersion: example.com/v1alpha1
kind: DatabaseClaim
metadata:
  name: orders
  namespace: team-a
  uid: 00000000-0000-4000-8000-0000000000c1
  generation: 1
  annotations: {jira: INFRA-23232}
spec:
  size: small
  resourceRef: {apiVersion: example.com/v1alpha1, kind: XDatabase, name: orders-x1}
status:
  observedGeneration: 1
`
	xrYAML = `
apiVersion: example.com/v1alpha1
kind: XDatabase
metadata:
  name: orders-x1
  uid: 00000000-0000-4000-8000-0000000000a1
  generation: 3
  labels:
    crossplane.io/claim-name: orders
    crossplane.io/claim-namespace: team-a
spec:
  size: small
  claimRef: {apiVersion: example.com/v1alpha1, kind: DatabaseClaim, namespace: team-a, name: orders}
  compositionRevisionRef: {name: xdatabases-buckets-1}
  resourceRefs:
  - {apiVersion: recorder.kausality.io/v1alpha1, kind: Bucket, name: orders-data}
status:
  conditions:
  - {type: Synced, status: "True", reason: ReconcileSuccess, observedGeneration: 3}
`
	// bucketYAML is a composed Bucket as crossplane-runtime v2.4 reports
	// it: its observed generation on the Synced condition.
	bucketYAML = `
apiVersion: recorder.kausality.io/v1alpha1
kind: Bucket
metadata:
  name: orders-data
  generation: 5
  labels:
    crossplane.io/composite: orders-x1
    crossplane.io/claim-name: orders
    crossplane.io/claim-namespace: team-a
    kausality.io/gated: "true"
  annotations:
    kausality.io/composition-revision: xdatabases-buckets-1
  ownerReferences:
  - {apiVersion: example.com/v1alpha1, kind: XDatabase, name: orders-x1, uid: 00000000-0000-4000-8000-0000000000a1, controller: true, blockOwnerDeletion: true}
spec:
  forProvider: {size: small, tags: [tier-1]}
  managementPolicies: [Observe, LateInitialize]
status:
  conditions:
  - {type: Synced, status: "True", reason: ReconcileSuccess, observedGeneration: 5}
  - {type: Ready, status: "True", reason: Available, observedGeneration: 5}
`
)

func claim(t testing.TB, mods ...mod) *unstructured.Unstructured {
	return build(t, claimYAML, mods...)
}

func xr(t testing.TB, mods ...mod) *unstructured.Unstructured { return build(t, xrYAML, mods...) }

func bucket(t testing.TB, mods ...mod) *unstructured.Unstructured {
	return build(t, bucketYAML, mods...)
}

// set sets a field (fieldpath syntax) to v.
func set(path string, v any) mod {
	return func(u *unstructured.Unstructured) {
		if err := fieldpath.Pave(u.Object).SetValue(path, v); err != nil {
			panic(err)
		}
	}
}

// unset removes a field.
func unset(path string) mod {
	return func(u *unstructured.Unstructured) {
		if err := fieldpath.Pave(u.Object).DeleteField(path); err != nil {
			panic(err)
		}
	}
}

func name(n string) mod { return func(u *unstructured.Unstructured) { u.SetName(n) } }

// inTeamA puts a namespaced object in the Namespace team-a.
func inTeamA(u *unstructured.Unstructured) { u.SetNamespace("team-a") }

func generation(g int64) mod { return func(u *unstructured.Unstructured) { u.SetGeneration(g) } }

// observed sets status.observedGeneration.
func observed(g int64) mod { return set("status.observedGeneration", g) }

// synced replaces the conditions with a Synced condition at generation g.
func synced(status string, g int64) mod {
	return set("status.conditions", []any{map[string]any{"type": "Synced", "status": status, "reason": "ReconcileSuccess", "observedGeneration": g}})
}

func annotate(k, v string) mod {
	return func(u *unstructured.Unstructured) {
		a := maps.Clone(u.GetAnnotations())
		if a == nil {
			a = map[string]string{}
		}
		a[k] = v
		u.SetAnnotations(a)
	}
}

func unannotate(k string) mod {
	return func(u *unstructured.Unstructured) {
		a := maps.Clone(u.GetAnnotations())
		delete(a, k)
		u.SetAnnotations(a)
	}
}

func label(k, v string) mod {
	return func(u *unstructured.Unstructured) {
		l := maps.Clone(u.GetLabels())
		if l == nil {
			l = map[string]string{}
		}
		l[k] = v
		u.SetLabels(l)
	}
}

func unlabel(k string) mod {
	return func(u *unstructured.Unstructured) {
		l := maps.Clone(u.GetLabels())
		delete(l, k)
		u.SetLabels(l)
	}
}

func allowances(as ...allowance.Allowance) mod {
	return annotate(v1alpha1.AnnotationAllowances, allowance.Format(as))
}

func trace(hops ...allowance.Hop) mod {
	return annotate(v1alpha1.AnnotationTrace, allowance.FormatTrace(hops))
}

func policies(ps ...string) mod { return set("spec.managementPolicies", anys(ps)) }

func anys(ss []string) []any {
	out := make([]any, 0, len(ss))
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}

// Hops and allowances of the chain: Alice changed the Claim's spec.size at
// its generation 2, Crossplane carried it to the XR's generation 4 and the
// function to the Bucket's generation 6.

func claimHop() allowance.Hop {
	return allowance.Hop{
		APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 2,
		Field: "spec.size", User: alice, Timestamp: ts(-10 * time.Minute),
		Attestations: map[string]string{"metadata.annotations[jira]": "INFRA-23232"},
	}
}

func xrHop() allowance.Hop {
	return allowance.Hop{
		APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 4,
		Field: "spec.size", User: crossplane, Timestamp: ts(-9 * time.Minute),
	}
}

func bucketHop() allowance.Hop {
	return allowance.Hop{
		APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "orders-data", Generation: 6,
		Field: "spec.forProvider.size", Timestamp: ts(-8 * time.Minute),
	}
}

// claimAllowance is what Alice's change earned the Claim.
func claimAllowance() allowance.Allowance { return claimAllowanceFor(claimHop()) }

// claimAllowanceFor is what a change of spec.size by h earns the Claim.
func claimAllowanceFor(h allowance.Hop) allowance.Allowance {
	return allowance.Allowance{
		Relation: v1alpha1.RelationControllerChild,
		Target:   v1alpha1.Target{APIGroup: "example.com", APIVersion: "v1alpha1", Resource: "xdatabases"},
		Verbs:    []string{v1alpha1.VerbUpdate},
		Mutations: []v1alpha1.MutationBound{
			{JSONPath: "spec.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}},
		},
		Generation: h.Generation, Initiator: h.User, Trace: allowance.Trace{h},
	}
}

// xrAllowances are what Crossplane's propagation earned the XR.
func xrAllowances() []allowance.Allowance {
	return xrAllowancesFor(allowance.Trace{claimHop(), xrHop()})
}

// xrAllowancesFor are what a change of spec.size earns the XR, traced by
// tr, whose last hop is the XR's.
func xrAllowancesFor(tr allowance.Trace) []allowance.Allowance {
	gen, initiator := tr.Last().Generation, tr.Initiator()
	return []allowance.Allowance{{
		Relation: v1alpha1.RelationControllerChild,
		Target:   v1alpha1.Target{APIGroup: "recorder.kausality.io", APIVersion: "v1alpha1", Resource: "buckets"},
		Verbs:    []string{v1alpha1.VerbUpdate},
		Mutations: []v1alpha1.MutationBound{
			{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}},
		},
		Generation: gen, Initiator: initiator, Trace: slices.Clone(tr),
	}, {
		Relation:   v1alpha1.RelationExternal,
		Target:     v1alpha1.Target{External: map[string]string{"apiGroup": "recorder.kausality.io", "kind": "Bucket"}},
		Verbs:      []string{v1alpha1.VerbUpdate},
		Generation: gen, Initiator: initiator, Trace: slices.Clone(tr),
	}}
}

// bucketAllowance is the External Update the function stamps on the
// Bucket for the XR's allowance: its trace continues the XR's.
func bucketAllowance() allowance.Allowance {
	return allowance.Allowance{
		Relation:   v1alpha1.RelationExternal,
		Target:     v1alpha1.Target{External: map[string]string{"apiGroup": "recorder.kausality.io", "kind": "Bucket"}},
		Verbs:      []string{v1alpha1.VerbUpdate},
		Mutations:  sizeShipped,
		Generation: 6, Initiator: alice, Trace: allowance.Trace{claimHop(), xrHop(), bucketHop()},
	}
}

// sizeShipped is what the resize's External allowance ships.
var sizeShipped = []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}}

// approvalAt is the approval of u's spec at generation gen.
func approvalAt(u *unstructured.Unstructured, gen int64) *gate.Approval {
	return &gate.Approval{Spec: gate.SpecRecord(u.Object), Generation: gen}
}

// approvedAs records u's spec as approved at generation gen.
func approvedAs(u *unstructured.Unstructured, gen int64) mod {
	return func(o *unstructured.Unstructured) {
		for k, v := range approvalAt(u, gen).Annotations() {
			annotate(k, v)(o)
		}
	}
}

// approvalOf takes the approval annotations off a result's object: nil
// when it has none.
func approvalOf(t testing.TB, obj map[string]any) *gate.Approval {
	t.Helper()
	if obj == nil {
		return nil
	}
	u := &unstructured.Unstructured{Object: obj}
	ann := u.GetAnnotations()
	rec, ok := ann[v1alpha1.AnnotationApproved]
	if !ok {
		return nil
	}
	spec, err := mutation.ParseApplied(rec)
	if err != nil {
		t.Fatalf("annotation %s: %v", v1alpha1.AnnotationApproved, err)
	}
	gen, _ := allowance.ApprovedGeneration(obj)
	before, err := mutation.ParseApplied(ann[v1alpha1.AnnotationApprovedBefore])
	if err != nil {
		t.Fatalf("annotation %s: %v", v1alpha1.AnnotationApprovedBefore, err)
	}
	if before == nil {
		before = mutation.Applied{} // none recorded: a case may assert that
	}
	delete(ann, v1alpha1.AnnotationApproved)
	delete(ann, v1alpha1.AnnotationApprovedGeneration)
	delete(ann, v1alpha1.AnnotationApprovedBefore)
	u.SetAnnotations(ann)
	return &gate.Approval{Spec: spec, Generation: gen, Before: before}
}

// at is h stamped d from the fixed clock.
func at(h allowance.Hop, d time.Duration) allowance.Hop {
	h.Timestamp = ts(d)
	return h
}

func consumed(a allowance.Allowance) allowance.Allowance {
	a.Consumed = true
	return a
}

// Requests, as the API server sends them to a webhook.

func request(op admissionv1.Operation, user authenticationv1.UserInfo, old, obj *unstructured.Unstructured) admission.Request {
	r := admissionv1.AdmissionRequest{UID: "request-uid", Operation: op, UserInfo: user}
	named := obj
	if named == nil {
		named = old
	}
	if named != nil {
		gvk := named.GroupVersionKind()
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		r.Kind = metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
		r.Resource = metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}
		r.RequestKind, r.RequestResource = &r.Kind, &r.Resource
		r.Name, r.Namespace = named.GetName(), named.GetNamespace()
	}
	if obj != nil {
		r.Object = runtime.RawExtension{Raw: raw(obj)}
	}
	if old != nil {
		r.OldObject = runtime.RawExtension{Raw: raw(old)}
	}
	r.DryRun = ptr.To(false)
	return admission.Request{AdmissionRequest: r}
}

func create(user authenticationv1.UserInfo, obj *unstructured.Unstructured) admission.Request {
	return request(admissionv1.Create, user, nil, obj)
}

func update(user authenticationv1.UserInfo, old, obj *unstructured.Unstructured) admission.Request {
	return request(admissionv1.Update, user, old, obj)
}

func remove(user authenticationv1.UserInfo, old *unstructured.Unstructured) admission.Request {
	return request(admissionv1.Delete, user, old, nil)
}

// orphan asks for r's deletion with propagationPolicy Orphan.
func orphan(r admission.Request) admission.Request {
	r.Options.Raw = []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Orphan"}`)
	return r
}

func dryRun(r admission.Request) admission.Request {
	r.DryRun = ptr.To(true)
	return r
}

func raw(u *unstructured.Unstructured) []byte {
	b, err := json.Marshal(u.Object)
	if err != nil {
		panic(err)
	}
	return b
}

// result is what a response does to a request, in the terms the tests
// assert: whether it is admitted, the status code and message of a
// refusal, warnings, audit annotations, and the object as the response's
// JSON patch leaves it (nil when the response patches nothing; see
// admitted for mutating webhooks).
type result struct {
	Allowed  bool
	Code     int32
	Message  string
	Warnings []string
	Audit    map[string]string
	Object   map[string]any
}

func outcome(t testing.TB, req admission.Request, rsp admission.Response) result {
	t.Helper()
	r := result{Allowed: rsp.Allowed, Warnings: rsp.Warnings, Audit: rsp.AuditAnnotations}
	if rsp.Result != nil {
		r.Message = rsp.Result.Message
		if !rsp.Allowed {
			r.Code = rsp.Result.Code
		}
	}
	if len(rsp.Patches) == 0 {
		return r
	}
	if !rsp.Allowed {
		t.Fatalf("a refusal carries patches %v", rsp.Patches)
	}
	ops, err := json.Marshal(rsp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("response patch %s: %v", ops, err)
	}
	doc, err := p.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("response patch %s does not apply: %v", ops, err)
	}
	r.Object = map[string]any{}
	if err := utiljson.Unmarshal(doc, &r.Object); err != nil {
		t.Fatal(err)
	}
	return r
}

// admitted is outcome for a mutating webhook: Object is the object the API
// server goes on with when the request is admitted, patched or not.
func admitted(t testing.TB, req admission.Request, rsp admission.Response) result {
	t.Helper()
	r := outcome(t, req, rsp)
	if r.Allowed && r.Object == nil && len(req.Object.Raw) > 0 {
		r.Object = map[string]any{}
		if err := utiljson.Unmarshal(req.Object.Raw, &r.Object); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// namespace is the Claim's Namespace team-a with the given annotations
// (key, value pairs).
func namespace(kv ...string) *unstructured.Unstructured {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName("team-a")
	ann := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		ann[kv[i]] = kv[i+1]
	}
	ns.SetAnnotations(ann)
	return ns
}

// pod is a controller's pod in crossplane-system running image, and as is
// user acting from it: the API server names a pod-bound token's pod in the
// user's extra.
func pod(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: name, UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
}

// fromPod is u acting with a token bound to the pod named name.
func fromPod(u authenticationv1.UserInfo, name string) authenticationv1.UserInfo {
	u.Extra = map[string]authenticationv1.ExtraValue{
		"authentication.kubernetes.io/pod-name": {name},
		"authentication.kubernetes.io/pod-uid":  {name + "-uid"},
	}
	return u
}
