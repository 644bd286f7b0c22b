// Package report says what Kausality holds for one object of a chain
// (Claim → XR → XR → MR), as stored: the facts `kubectl kausality` shows.
// It reads the object alone and does no I/O; the CLI walks the tree.
package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Role is what an object is in a chain.
type Role string

// Roles.
const (
	RoleClaim     Role = "Claim"
	RoleComposite Role = "Composite"
	RoleManaged   Role = "Managed"
)

// Object is what Kausality holds for one object.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Resource is the composition resource name (crossplane.io/
	// composition-resource-name) of a composed object.
	Resource string `json:"resource,omitempty"`
	Role     Role   `json:"role"`
	// Synced and Ready are the statuses of Crossplane's conditions.
	Synced string `json:"synced"`
	Ready  string `json:"ready"`
	// Gate is a gated managed resource's spec.managementPolicies.
	Gate  []string `json:"gate,omitempty"`
	Gated bool     `json:"gated,omitempty"`
	// Open are the unconsumed External allowances that open the gate (or
	// would, but for a freeze or a pending change), Pending those
	// propagation control holds back, and Consumed how many are used up.
	Open     []string `json:"open,omitempty"`
	Pending  []string `json:"pending,omitempty"`
	Consumed int      `json:"consumed,omitempty"`
	// GateMessage is why the gate controller keeps the gate shut against
	// an allowance, or revoked it; empty while the gate does what its
	// allowances say.
	GateMessage string `json:"gateMessage,omitempty"`
	// Frozen names who froze the object itself ("" when nobody did).
	Frozen string `json:"frozen,omitempty"`
	// Withheld and Held are a composite's KausalityAllowed and
	// Propagated conditions when False: what the function withheld or
	// propagation control holds back, and why.
	Withheld string `json:"withheld,omitempty"`
	Held     string `json:"held,omitempty"`
	// WouldWithhold is a composite's KausalityAllowed condition when Log
	// or Audit mode let through what Enforce would withhold.
	WouldWithhold string `json:"wouldWithhold,omitempty"`
	// Unrestricted is a composite's KausalityRestricted condition when
	// False: the managed resources it composes that no policy names, whose
	// changes reach the cloud without a cause.
	Unrestricted string `json:"unrestricted,omitempty"`
	// Creating is true for a composite Kausality still counts as being
	// created (no KausalityCreated condition yet).
	Creating bool `json:"creating,omitempty"`
	// Trace is the object's causal trace, Initiator who started it.
	Trace     allowance.Trace `json:"trace,omitempty"`
	Initiator string          `json:"initiator,omitempty"`
	// Problems are annotations Kausality cannot read on the object.
	Problems []string `json:"problems,omitempty"`
}

// Of reports what Kausality holds for u, an object in the given role.
func Of(u *unstructured.Unstructured, role Role) Object {
	o := Object{
		APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Role: role,
		Resource: u.GetAnnotations()["crossplane.io/composition-resource-name"],
		Synced:   string(condition(u, xpv2.TypeSynced).Status), Ready: string(condition(u, xpv2.TypeReady).Status),
	}
	ann := u.GetAnnotations()
	if by, err := allowance.FrozenBy(ann); by != "" {
		o.Frozen = by
		if err != nil {
			o.Problems = append(o.Problems, fmt.Sprintf("%s: %v", v1alpha1.AnnotationFreeze, err))
		}
	}
	if raw := ann[v1alpha1.AnnotationTrace]; raw != "" {
		tr, err := allowance.ParseTrace(raw)
		if err != nil {
			o.Problems = append(o.Problems, fmt.Sprintf("%s: %v", v1alpha1.AnnotationTrace, err))
		} else {
			o.Trace, o.Initiator = tr, tr.Initiator()
		}
	}
	as, err := allowance.Parse(ann[v1alpha1.AnnotationAllowances])
	if err != nil {
		o.Problems = append(o.Problems, fmt.Sprintf("%s: %v", v1alpha1.AnnotationAllowances, err))
	}
	if role == RoleManaged {
		o.Gated = u.GetLabels()[v1alpha1.LabelGated] == "true"
		o.Gate, _ = fieldpath.Pave(u.Object).GetStringArray("spec.managementPolicies")
		o.GateMessage = condition(u, v1alpha1.ConditionGateOpen).Message
		live := allowance.Unconsumed(as, u.Object)
		o.Consumed = len(as) - len(live)
		for _, a := range live {
			switch {
			case a.Relation != v1alpha1.RelationExternal:
			case a.IsPending():
				o.Pending = append(o.Pending, Describe(a))
			default:
				o.Open = append(o.Open, Describe(a))
			}
		}
		return o
	}
	switch c := condition(u, v1alpha1.ConditionAllowed); {
	case c.Status == "False":
		o.Withheld = c.Message
	case c.Reason == v1alpha1.ReasonWouldWithhold || c.Reason == v1alpha1.ReasonAuditWouldWithhold:
		o.WouldWithhold = c.Message
	}
	if c := condition(u, v1alpha1.ConditionPropagated); c.Status == "False" {
		o.Held = c.Message
	}
	if c := condition(u, v1alpha1.ConditionRestricted); c.Status == "False" {
		o.Unrestricted = c.Message
	}
	o.Creating = role == RoleComposite && !policy.Created(u.Object)
	return o
}

// Describe is one allowance as a person reads it: its verbs, the
// generation it is for and who started it.
func Describe(a allowance.Allowance) string {
	s := fmt.Sprintf("%s at generation %d", strings.Join(a.Verbs, "+"), a.Generation)
	if a.Initiator != "" {
		s += " by " + a.Initiator
	} else if a.FromUpgrade() {
		s += " by UpgradeAllowance " + a.Trace[0].Name
	}
	return s
}

// Summary is one line saying what Kausality holds for o, the most
// pressing first: what keeps a change from the cloud, then what is on its
// way.
func (o Object) Summary() string {
	var parts []string
	if len(o.Problems) > 0 {
		parts = append(parts, "unreadable "+strings.Join(o.Problems, "; "))
	}
	if o.Frozen != "" {
		parts = append(parts, "frozen by "+o.Frozen)
	}
	if o.Withheld != "" {
		parts = append(parts, "withheld: "+o.Withheld)
	}
	if o.Held != "" {
		parts = append(parts, "held: "+o.Held)
	}
	if o.WouldWithhold != "" {
		parts = append(parts, "Enforce would withhold: "+o.WouldWithhold)
	}
	if o.Unrestricted != "" {
		parts = append(parts, "unrestricted: "+o.Unrestricted)
	}
	if len(o.Pending) > 0 {
		parts = append(parts, "pending "+strings.Join(o.Pending, ", "))
	}
	switch o.Role {
	case RoleManaged:
		switch {
		case !o.Gated:
			parts = append(parts, "not gated")
		case len(o.Open) > 0 && open(o.Gate):
			parts = append(parts, "gate open for "+strings.Join(o.Open, ", "))
		case len(o.Open) > 0:
			parts = append(parts, "waiting: "+strings.Join(o.Open, ", ")+gateReason(o.GateMessage))
		default:
			parts = append(parts, "gate closed")
		}
	case RoleComposite:
		if o.Creating {
			parts = append(parts, "being created")
		}
	}
	if len(parts) == 0 {
		return "nothing held"
	}
	return strings.Join(parts, "; ")
}

// GateOpen reports whether o's gate lets the provider write to the
// cloud, whatever opened it.
func (o Object) GateOpen() bool { return open(o.Gate) }

// open reports whether a gate lets the provider write to the cloud.
func open(gate []string) bool {
	return slices.ContainsFunc(gate, func(p string) bool { return p == "*" || p == "Create" || p == "Update" || p == "Delete" })
}

func gateReason(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

func condition(u *unstructured.Unstructured, t xpv2.ConditionType) xpv2.Condition {
	cs := &xpv2.ConditionedStatus{}
	_ = fieldpath.Pave(u.Object).GetValueInto("status", cs)
	return cs.GetCondition(t)
}
