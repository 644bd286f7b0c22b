// Package gate holds the gate formula of DESIGN §5: which
// spec.managementPolicies a managed resource gets for the external verbs its
// unconsumed allowances grant. The function and the gate controller both use
// it, so they never disagree about a gate.
package gate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// The management actions of crossplane-runtime, as they appear in
// spec.managementPolicies.
const (
	Observe        = "Observe"
	Create         = "Create"
	Update         = "Update"
	Delete         = "Delete"
	LateInitialize = "LateInitialize"
	All            = "*"
)

// order is the canonical order of a computed set, so repeated applies emit
// the same list and never flap.
var order = []string{Observe, Create, Update, Delete, LateInitialize}

// DefaultReadOnly is a closed gate: the provider observes the external
// resource and fills in defaults, but never writes to it.
var DefaultReadOnly = []string{Observe, LateInitialize}

// supported lists the sets crossplane-runtime's default resolver accepts
// (pkg/reconciler/managed/policies.go, defaultSupportedManagementPolicies),
// each in canonical order. "*" alone is supported too but Compute never
// returns it: a gate is always spelled out.
var supported = [][]string{
	{Observe, Create, Update, Delete, LateInitialize},
	{Observe},
	{},
	{Observe, Create, Update, Delete},
	{Observe, Create, Update, LateInitialize},
	{Observe, Create, Update},
	{Observe, Create, Delete, LateInitialize},
	{Observe, Create, LateInitialize},
	{Observe, Create, Delete},
	{Observe, Create},
	{Observe, Delete},
	{Observe, Update},
	{Observe, LateInitialize},
	{Observe, Update, LateInitialize},
}

// Supported reports whether crossplane-runtime's default resolver accepts the
// set, in any order and with duplicates ignored.
//
// It compares sets of actions, not canonical lists: the function asks it
// several times of every gated resource, and a set allocates nothing. Its
// answer is that of comparing canonical(set) with supported.
func Supported(set []string) bool {
	s, all, ok := actionsOf(set)
	switch {
	case !ok:
		return false
	case all:
		// "*" is supported on its own and combines with nothing.
		return s == 0
	}
	return slices.Contains(supportedSets, s)
}

// supportedSets are the sets of supported, for Supported.
var supportedSets = func() []actions {
	out := make([]actions, 0, len(supported))
	for _, s := range supported {
		a, _, _ := actionsOf(s)
		out = append(out, a)
	}
	return out
}()

// actionsOf is the set of the actions in set other than "*", whether set
// holds "*", and false when it holds something that is no management
// action (canonical's error).
func actionsOf(set []string) (s actions, all, ok bool) {
	for _, a := range set {
		if a == All {
			all = true
			continue
		}
		i := slices.Index(order, a)
		if i < 0 {
			return 0, false, false
		}
		s |= 1 << i
	}
	return s, all, true
}

// ValidateReadOnly checks a closed-gate set from the function input: it must
// be supported, must observe, and must not write to the external resource.
func ValidateReadOnly(set []string) error {
	c, err := canonical(set)
	if err != nil {
		return errors.Wrap(err, "invalid readOnlyPolicies")
	}
	for _, a := range c {
		if a == Create || a == Update || a == Delete || a == All {
			return errors.Errorf("invalid readOnlyPolicies %v: %q writes to the external resource; a closed gate may only hold %s and %s", set, a, Observe, LateInitialize)
		}
	}
	if !slices.Contains(c, Observe) {
		return errors.Errorf("invalid readOnlyPolicies %v: a closed gate must include %s", set, Observe)
	}
	if !Supported(c) {
		return errors.Errorf("invalid readOnlyPolicies %v: crossplane-runtime does not support this combination", set)
	}
	return nil
}

// Compute is the gate formula of DESIGN §5:
//
//	supported(asked ∩ (readOnly ∪ verbs))
//
// where verbs are the external verbs (Create, Update, Delete or "*") of the
// unconsumed External allowances and asked is the spec.managementPolicies
// the pipeline's steps before Kausality asked for (nil: none, which a
// managed resource reads as "*"). Kausality only ever narrows what the
// Composition asks: an observe-only import is never created, a resource
// kept on deletion never deleted, and a closed gate keeps of Observe and
// LateInitialize only what was asked.
//
// When the result is not a combination crossplane-runtime supports,
// LateInitialize is dropped; if that is still unsupported, Compute fails
// closed: it returns the closed gate (Closed) and an error naming the
// combination.
func Compute(readOnly, asked, verbs []string) ([]string, error) {
	ro, err := canonical(readOnly)
	if err != nil {
		return Closed(DefaultReadOnly, asked), errors.Wrap(err, "invalid read-only policies")
	}
	want, err := askedSet(asked)
	if err != nil {
		return []string{}, err
	}
	closed := closedOf(slices.Clone(ro), want)
	union := slices.Clone(ro)
	for _, v := range verbs {
		switch v {
		case Create, Update, Delete:
			union = append(union, v)
		case All:
			union = append(union, order...)
		default:
			return closed, errors.Errorf("cannot open gate: %q is not an external verb (want %s, %s, %s or %s)", v, Create, Update, Delete, All)
		}
	}
	union, _ = canonical(union)
	union = slices.DeleteFunc(union, func(a string) bool { return !want.has(a) })
	if Supported(union) {
		return union, nil
	}
	dropped := slices.DeleteFunc(slices.Clone(union), func(a string) bool { return a == LateInitialize })
	if Supported(dropped) {
		return dropped, nil
	}
	return closed, errors.Errorf("cannot open gate for verbs [%s]: managementPolicies [%s] is not a combination crossplane-runtime supports; the gate stays closed",
		strings.Join(verbsOf(union), ", "), strings.Join(union, ", "))
}

// Closed is the closed gate of a resource whose pipeline asked for asked
// (nil: "*"): the read-only set narrowed to what was asked, and without
// LateInitialize where crossplane-runtime does not support it alone. It
// is always a supported combination; an asked set that does not read
// closes the gate to [] (crossplane-runtime pauses the resource).
func Closed(readOnly, asked []string) []string {
	want, err := askedSet(asked)
	if err != nil {
		return []string{}
	}
	ro, err := canonical(readOnly)
	if err != nil {
		ro = slices.Clone(DefaultReadOnly)
	}
	return closedOf(ro, want)
}

// closedOf is Closed for a canonical read-only set ro, which it edits, and
// the actions asked for.
func closedOf(ro []string, want actions) []string {
	out := slices.DeleteFunc(ro, func(a string) bool { return !want.has(a) })
	if !Supported(out) {
		out = slices.DeleteFunc(out, func(a string) bool { return a == LateInitialize })
	}
	return out
}

// Asks reports whether a pipeline that asked for requested (nil: "*")
// asked for action.
func Asks(requested []string, action string) bool {
	want, err := askedSet(requested)
	return err == nil && want.has(action)
}

// AsksWrite reports whether a pipeline that asked for requested (nil: "*")
// asked for any action that writes to the cloud (Create, Update, Delete).
func AsksWrite(requested []string) bool {
	want, err := askedSet(requested)
	return err == nil && want.writes()
}

// actions is a set of management actions, a bit each in the order of
// order: the function asks about it for every gated resource, so it is
// no map.
type actions uint8

// every is the set of all five actions.
const every = actions(1<<5 - 1)

// has reports whether the set holds action ("*" is no member).
func (s actions) has(action string) bool {
	i := slices.Index(order, action)
	return i >= 0 && s&(1<<i) != 0
}

// writes reports whether the set holds an action that writes to the
// cloud.
func (s actions) writes() bool {
	return s.has(Create) || s.has(Update) || s.has(Delete)
}

// askedSet is the set of actions asked names, every action when asked is
// nil or "*".
func askedSet(asked []string) (actions, error) {
	if asked == nil {
		return every, nil
	}
	c, err := canonical(asked)
	if err != nil {
		return 0, errors.Wrap(err, "invalid managementPolicies asked by the pipeline")
	}
	if slices.Equal(c, []string{All}) {
		return every, nil
	}
	var out actions
	for _, a := range c {
		out |= 1 << slices.Index(order, a)
	}
	return out, nil
}

func verbsOf(set []string) []string {
	return slices.DeleteFunc(slices.Clone(set), func(a string) bool { return a == Observe || a == LateInitialize })
}

// canonical sorts a set into canonical order and removes duplicates. "*" is
// kept only on its own.
func canonical(set []string) ([]string, error) {
	out := make([]string, 0, len(set))
	all := false
	for _, a := range set {
		switch {
		case a == All:
			all = true
		case slices.Contains(order, a):
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		default:
			return nil, fmt.Errorf("unknown management action %q", a)
		}
	}
	if all {
		if len(out) > 0 {
			return nil, fmt.Errorf("management action %q cannot be combined with others", All)
		}
		return []string{All}, nil
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	return out, nil
}
