package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
)

const alice = "alice@example.com"

var byAlice = allowance.Trace{
	{APIVersion: "example.org/v1alpha1", Kind: "XNetwork", Name: "shop", Generation: 2, Field: "spec.parameters.costCenter", User: alice, Timestamp: "2026-11-22T12:00:00Z"},
	{APIVersion: "ec2.aws.m.upbound.io/v1beta1", Kind: "VPC", Name: "shop-vpc", Generation: 3, Timestamp: "2026-11-22T12:00:00Z"},
}

type mod func(*unstructured.Unstructured)

func vpc(mods ...mod) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": "VPC",
		"metadata": map[string]any{"namespace": "team-a", "name": "shop-vpc", "generation": int64(3),
			"labels":      map[string]any{v1alpha1.LabelGated: "true"},
			"annotations": map[string]any{"crossplane.io/composition-resource-name": "vpc"}},
		"spec": map[string]any{"managementPolicies": []any{"Observe", "LateInitialize"}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True", "observedGeneration": int64(2)},
			map[string]any{"type": "Ready", "status": "True"},
		}},
	}}
	for _, m := range mods {
		m(u)
	}
	return u
}

func xnetwork(conds ...map[string]any) *unstructured.Unstructured {
	cs := []any{map[string]any{"type": "Synced", "status": "True"}, map[string]any{"type": "Ready", "status": "False"}}
	for _, c := range conds {
		cs = append(cs, c)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.org/v1alpha1", "kind": "XNetwork",
		"metadata": map[string]any{"namespace": "team-a", "name": "shop"},
		"spec":     map[string]any{"crossplane": map[string]any{}},
		"status":   map[string]any{"conditions": cs},
	}}
}

func annotate(k, v string) mod {
	return func(u *unstructured.Unstructured) {
		ann := u.GetAnnotations()
		ann[k] = v
		u.SetAnnotations(ann)
	}
}

func gate(p ...any) mod {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, p, "spec", "managementPolicies")
	}
}

func TestOf(t *testing.T) {
	update := allowance.ExternalGrant("ec2.aws.m.upbound.io", "VPC", v1alpha1.VerbUpdate, 3, byAlice)
	pending := update
	pending.Pending = map[string]string{"spec.forProvider.tags.CostCenter": "h1"}
	consumed := update
	consumed.Generation = 1
	freeze := allowance.FormatFreeze(allowance.Freeze{User: "carol@example.com", Message: "incident 42", At: "2026-11-22T12:00:00Z"})

	cases := map[string]struct {
		reason  string
		obj     *unstructured.Unstructured
		role    Role
		summary string
		check   func(t *testing.T, o Object)
	}{
		"ClosedGate": {
			reason: "A gated managed resource with nothing open: its gate is closed.",
			obj:    vpc(), role: RoleManaged, summary: "gate closed",
		},
		"OpenGate": {
			reason: "An unconsumed External Update allowance, and the gate lets the provider update: open, naming who started the change.",
			obj:    vpc(annotate(v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{update})), annotate(v1alpha1.AnnotationTrace, allowance.FormatTrace(byAlice)), gate("Observe", "Update", "LateInitialize")),
			role:   RoleManaged, summary: "gate open for Update at generation 3 by " + alice,
			check: func(t *testing.T, o Object) {
				if o.Initiator != alice || len(o.Trace) != 2 {
					t.Errorf("initiator %q, trace %v; want %s and two hops", o.Initiator, o.Trace, alice)
				}
			},
		},
		"WaitingBehindClosedGate": {
			reason: "An unconsumed allowance whose gate has not opened: waiting, with the gate controller's reason.",
			obj: vpc(annotate(v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{update})), func(u *unstructured.Unstructured) {
				cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				cs = append(cs, map[string]any{"type": v1alpha1.ConditionGateOpen, "status": "False", "message": "gate held: spec.forProvider.cidrBlock is pending"})
				_ = unstructured.SetNestedSlice(u.Object, cs, "status", "conditions")
			}),
			role: RoleManaged, summary: "waiting: Update at generation 3 by " + alice + " (gate held: spec.forProvider.cidrBlock is pending)",
		},
		"Pending": {
			reason: "Propagation control holds the change back.",
			obj:    vpc(annotate(v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{pending}))),
			role:   RoleManaged, summary: "pending Update at generation 3 by " + alice + "; gate closed",
		},
		"Consumed": {
			reason: "An allowance the provider observed is used up and counted, not shown as open.",
			obj:    vpc(annotate(v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{consumed}))),
			role:   RoleManaged, summary: "gate closed",
			check: func(t *testing.T, o Object) {
				if o.Consumed != 1 {
					t.Errorf("Consumed = %d, want 1", o.Consumed)
				}
			},
		},
		"Frozen": {
			reason: "A freeze names who set it.",
			obj:    vpc(annotate(v1alpha1.AnnotationFreeze, freeze)),
			role:   RoleManaged, summary: "frozen by carol@example.com; gate closed",
		},
		"Ungated": {
			reason: "A managed resource Kausality does not gate says so.",
			obj:    vpc(func(u *unstructured.Unstructured) { u.SetLabels(nil) }),
			role:   RoleManaged, summary: "not gated",
		},
		"Unreadable": {
			reason: "An allowances annotation that does not parse is named, nothing else read from it.",
			obj:    vpc(annotate(v1alpha1.AnnotationAllowances, `[{"relation":`)),
			role:   RoleManaged,
			check: func(t *testing.T, o Object) {
				if len(o.Problems) != 1 || o.Summary() == "gate closed" {
					t.Errorf("problems %v, summary %q; want the annotation named", o.Problems, o.Summary())
				}
			},
		},
		"CompositeWithheld": {
			reason: "A composite's False KausalityAllowed says what was withheld; one without KausalityCreated is being created.",
			obj:    xnetwork(map[string]any{"type": v1alpha1.ConditionAllowed, "status": "False", "message": "resource vpc: withheld Mutate spec.forProvider.cidrBlock"}),
			role:   RoleComposite, summary: "withheld: resource vpc: withheld Mutate spec.forProvider.cidrBlock; being created",
		},
		"CompositeCreatedAndHeld": {
			reason: "A created composite whose propagation holds a change back.",
			obj: xnetwork(map[string]any{"type": v1alpha1.ConditionCreated, "status": "True"},
				map[string]any{"type": v1alpha1.ConditionPropagated, "status": "False", "message": "2 of 6 pools hold the change"}),
			role: RoleComposite, summary: "held: 2 of 6 pools hold the change",
		},
		"CompositeUnrestricted": {
			reason: "A created composite that composes a managed resource no policy names says so: its changes reach the cloud without a cause.",
			obj: xnetwork(map[string]any{"type": v1alpha1.ConditionCreated, "status": "True"},
				map[string]any{"type": v1alpha1.ConditionRestricted, "status": "False", "message": "gateway (InternetGateway ec2.aws.m.upbound.io) is a managed resource of a kind no AllowancePolicy names"}),
			role: RoleComposite, summary: "unrestricted: gateway (InternetGateway ec2.aws.m.upbound.io) is a managed resource of a kind no AllowancePolicy names",
		},
		"CompositeAudited": {
			reason: "In Audit mode a True KausalityAllowed still names what Enforce would withhold, which status lists.",
			obj: xnetwork(map[string]any{"type": v1alpha1.ConditionCreated, "status": "True"},
				map[string]any{"type": v1alpha1.ConditionAllowed, "status": "True", "reason": v1alpha1.ReasonAuditWouldWithhold, "message": "resource vpc: withheld Mutate spec.forProvider.cidrBlock (Audit mode, let through)"}),
			role: RoleComposite, summary: "Enforce would withhold: resource vpc: withheld Mutate spec.forProvider.cidrBlock (Audit mode, let through)",
		},
		"CompositeQuiet": {
			reason: "Nothing withheld or held on a created composite.",
			obj:    xnetwork(map[string]any{"type": v1alpha1.ConditionCreated, "status": "True"}, map[string]any{"type": v1alpha1.ConditionAllowed, "status": "True"}),
			role:   RoleComposite, summary: "nothing held",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Of(tc.obj, tc.role)
			if tc.summary != "" {
				if diff := cmp.Diff(tc.summary, o.Summary()); diff != "" {
					t.Errorf("%s\nSummary(): -want, +got:\n%s", tc.reason, diff)
				}
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}
