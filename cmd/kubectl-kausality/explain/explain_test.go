package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/report"
	"github.com/kausality-io/kausality-crossplane/internal/why"
	"github.com/kausality-io/kausality-crossplane/test/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func obj(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// cluster: a Claim of an XDatabase whose instance's size change is
// withheld (a rule covers it; bob, who made the change, may not start
// it), and whose bucket's creation no rule covers.
func cluster(t *testing.T) client.WithWatch {
	t.Helper()
	lines := []string{
		report.Withheld{Resource: "db", Kind: "Instance", Name: "shop-db", Verb: "Mutate", Path: "spec.forProvider.instanceType", Reason: "no unconsumed allowance on XDatabase/shop grants Update of instances; policies: db"}.String(),
		report.Withheld{Resource: "backups", Kind: "Bucket", Name: "shop-backups", Verb: "Create", Reason: "no unconsumed allowance on XDatabase/shop grants Create of buckets; policies: db"}.String(),
	}
	xr := obj("example.org/v1alpha1", "XDatabase", "", "shop-x7", map[string]any{
		"spec": map[string]any{"compositionRef": map[string]any{"name": "c"}, "resourceRefs": []any{
			map[string]any{"apiVersion": "rds.aws.upbound.io/v1beta1", "kind": "Instance", "name": "shop-db"},
		}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": v1alpha1.ConditionAllowed, "status": "False", "message": strings.Join(lines, "; ")},
		}},
	})
	xr.SetAnnotations(map[string]string{v1alpha1.AnnotationTrace: allowance.FormatTrace(allowance.Trace{{APIVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "shop-x7", Generation: 3, User: "bob"}})})
	claim := obj("example.org/v1alpha1", "Database", "team-a", "shop", map[string]any{
		"spec": map[string]any{"compositionRef": map[string]any{"name": "c"}, "resourceRef": map[string]any{"apiVersion": "example.org/v1alpha1", "kind": "XDatabase", "name": "shop-x7"}},
	})
	db := obj("rds.aws.upbound.io/v1beta1", "Instance", "", "shop-db", map[string]any{"spec": map[string]any{"forProvider": map[string]any{}}})
	db.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "shop-x7", Controller: ptr.To(true)}})
	db.SetAnnotations(map[string]string{"crossplane.io/composition-resource-name": "db"})
	lone := obj("rds.aws.upbound.io/v1beta1", "Instance", "", "lone", map[string]any{"spec": map[string]any{"forProvider": map[string]any{}}})
	p := &v1alpha1.AllowancePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: v1alpha1.AllowancePolicySpec{
			For:      v1alpha1.ObjectKind{APIGroup: "example.org", Kind: "XDatabase"},
			Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: "alice", MayInitiate: true}, {Kind: v1alpha1.SubjectGroup, Name: "dba", MayInitiate: true}},
			Rules: []v1alpha1.Rule{{Trigger: "spec.parameters.size", Policies: []v1alpha1.PolicyEntry{{
				Target: v1alpha1.Target{APIGroup: "rds.aws.upbound.io", Resource: "instances"}, Verbs: []string{v1alpha1.VerbUpdate},
				Mutations: []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.instanceType", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}},
			}}}},
		},
		Status: v1alpha1.PolicyStatus{Targets: []v1alpha1.ResolvedTarget{{APIGroup: "s3.aws.upbound.io", Resource: "buckets", Kind: "Bucket"}}},
	}
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(xr, claim, db, lone, p).Build()
}

func mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XDatabase"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Database"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "rds.aws.upbound.io", Version: "v1beta1", Kind: "Instance"}, meta.RESTScopeRoot)
	return m
}

func TestExplain(t *testing.T) {
	cases := map[string]struct {
		reason   string
		resource string
		field    string
		format   printer.Format
		golden   string
		err      string
		// forbid makes listing AllowancePolicies forbidden, as for a
		// user with namespace rights alone.
		forbid bool
	}{
		"NoPolicyReads": {reason: "A user who may not list AllowancePolicies still learns what was withheld and why, with no rule or suggestion.", resource: "databases/shop", format: printer.FormatDefault, golden: "forbidden.txt", forbid: true},
		"Claim":         {reason: "A Claim is explained by its XR.", resource: "databases/shop", format: printer.FormatDefault, golden: "claim.txt"},
		"XR":            {reason: "An XR as JSON.", resource: "xdatabases/shop-x7", format: printer.FormatJSON, golden: "xr.json"},
		"Managed":       {reason: "A managed resource: only its own changes, here filtered by a field above the changed one.", resource: "instances/shop-db", field: "spec.forProvider", format: printer.FormatYAML, golden: "managed.yaml"},
		"OtherField":    {reason: "A field no change concerns leaves nothing.", resource: "instances/shop-db", field: "spec.forProvider.engine", format: printer.FormatDefault, golden: "other-field.txt"},
		"NoOwner":       {reason: "A managed resource no XR composes.", resource: "instances/lone", format: printer.FormatDefault, err: "has no controller owner"},
		"NoObject":      {reason: "A missing object is named.", resource: "instances/gone", format: printer.FormatDefault, err: "cannot get Instance"},
		"BadFormat":     {reason: "An unknown format is refused.", resource: "instances/shop-db", format: "table", err: `unknown output format "table": use one of default, json, yaml`},
		"Text":          {reason: "The former text format is the default now, and no alias.", resource: "instances/shop-db", format: "text", err: `unknown output format "text": use one of default, json, yaml`},
		"Dot":           {reason: "An explanation is no tree to draw.", resource: "instances/shop-db", format: printer.FormatDot, err: `output format "dot" does not apply to this command: use one of default, json, yaml`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			var r client.Reader = cluster(t)
			if tc.forbid {
				r = interceptor.NewClient(cluster(t), interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
					if _, ok := l.(*v1alpha1.AllowancePolicyList); ok {
						return kerrors.NewForbidden(schema.GroupResource{Group: "kausality.io", Resource: "allowancepolicies"}, "", errors.New("no"))
					}
					return c.List(ctx, l, o...)
				}})
			}
			err := Explain(context.Background(), r, mapper(), "team-a", tc.resource, tc.field, tc.format, &out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s\nExplain(...) = %v, want an error containing %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nExplain(...): %v", tc.reason, err)
			}
			golden(t, filepath.Join("testdata", tc.golden), out.String())
		})
	}
}

// TestRunJSON reads the JSON back: it is the Explanation.
func TestRunJSON(t *testing.T) {
	var out bytes.Buffer
	if err := Explain(context.Background(), cluster(t), mapper(), "team-a", "xdatabases/shop-x7", "", printer.FormatJSON, &out); err != nil {
		t.Fatal(err)
	}
	var e why.Explanation
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatalf("output is not an Explanation: %v\n%s", err, out.String())
	}
	if len(e.Changes) != 2 || len(e.Changes[0].Permits) != 1 || e.Changes[0].Permits[0].Initiator != why.InitiatorGroup || e.Changes[1].Suggest == "" {
		t.Errorf("decoded %+v: want two changes, the first covered by one rule bob may start only through a group, the second with a suggestion", e)
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	fixture.Golden(t, path, []byte(got), *update)
}
