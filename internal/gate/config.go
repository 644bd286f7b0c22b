package gate

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// PathManagementPolicies is where a managed resource holds its gate.
const PathManagementPolicies = "spec.managementPolicies"

// DefaultMaxOpen is how long one allowance may hold a gate open when
// neither the function's Input nor the provider's flag says otherwise. It
// is the one default both read, so the function and the provider close a
// gate at the same moment.
const DefaultMaxOpen = time.Hour

// Config is how gates behave. The function builds one from its Input and
// the provider from its flags; both decide every gate through Config.Decide,
// so the four places that write a gate (the function, the gate controller,
// the managed resource webhook and the deletion webhook) cannot drift apart.
type Config struct {
	// ReadOnly is the closed gate; DefaultReadOnly when empty.
	ReadOnly []string
	// MaxOpen closes a gate whose allowance was stamped longer ago;
	// DefaultMaxOpen when zero.
	MaxOpen time.Duration
	// Requested is the spec.managementPolicies the resource's pipeline
	// asked for (nil: none, "*"); the gate is never wider (Compute).
	// RequestedErr says why the recorded request does not read: the gate
	// then stays closed.
	Requested    []string
	RequestedErr error
}

// Closed is the resource's closed gate: the read-only set narrowed to what
// its pipeline asked for.
func (c Config) Closed() []string {
	return Closed(c.Defaulted().ReadOnly, c.Requested)
}

// Defaulted is c with its defaults filled in.
func (c Config) Defaulted() Config {
	if len(c.ReadOnly) == 0 {
		c.ReadOnly = DefaultReadOnly
	}
	if c.MaxOpen == 0 {
		c.MaxOpen = DefaultMaxOpen
	}
	return c
}

// For is c with the closed gate a managed resource is kept on: the
// read-only part of what its spec.managementPolicies holds, which the
// function wrote from its Composition's Input, or c's own when that part is
// not a valid closed gate. The function's Input is thereby the one source
// of a non-default closed gate; the provider reads it off the resource
// instead of imposing its own, so the two never rewrite each other's
// managementPolicies. Only Observe and LateInitialize are read, so no
// write can widen a closed gate this way.
//
// The pipeline's request is read from the kausality.io/requested-policies
// annotation the function writes (RequestedOf), which only Kausality and
// Crossplane may change.
func (c Config) For(mr map[string]any) Config {
	c.Requested, c.RequestedErr = RequestedOf(mr)
	written, _ := managementPolicies(mr)
	if !slices.Contains(written, LateInitialize) && !Supported(append(slices.Clone(written), LateInitialize)) {
		// An open gate Compute had to drop LateInitialize from ([Observe,
		// Delete]): its closed part does not say whether the closed gate
		// has it.
		return c
	}
	ro := slices.DeleteFunc(slices.Clone(written), func(p string) bool { return p != Observe && p != LateInitialize })
	if len(ro) > 0 && ValidateReadOnly(ro) == nil {
		c.ReadOnly = ro
	}
	return c
}

// Decide is the gate of a managed resource carrying allowances as, written
// as obj over stored, the resource as stored (nil while it is being
// created): stored's progress decides which allowances are consumed, its
// generation is the one a freeze holds allowances past, and its approval is
// what obj's spec is compared with. Status and approval are read from
// stored only, never from a write being admitted, so no client can consume
// an allowance or bless a change by sending them. frozen names who froze
// the resource or a parent ("" when nobody did).
//
// The approval is read, and obj's spec recorded, only when some allowance
// could ship the spec: otherwise the decision's Approved is empty, and a
// caller that writes the approval does so when the decision Approves.
func (c Config) Decide(obj, stored map[string]any, as []allowance.Allowance, now time.Time, frozen string) Decision {
	return c.DecideRecording(obj, stored, SpecRecord, as, now, frozen)
}

// DecideRecording is Decide with record making the record of the spec obj
// will store. The function passes one that keeps the fields its pipeline
// does not set (defaults the API server filled in, say): Crossplane's
// server-side apply leaves them, so they are not pending.
func (c Config) DecideRecording(obj, stored map[string]any, record func(obj map[string]any) mutation.Applied, as []allowance.Allowance, now time.Time, frozen string) Decision {
	if !slices.ContainsFunc(as, func(a allowance.Allowance) bool { return !a.Consumed && a.ShipsSpec() }) {
		return c.decide(obj, stored, Approval{}, nil, as, now, frozen)
	}
	return c.decide(obj, stored, ApprovalOf(stored), record(obj), as, now, frozen)
}

// DecideFrom is Decide with the approval given: stored's, extended for a
// provider's late initialization (Approval.LateInitialized).
func (c Config) DecideFrom(obj, stored map[string]any, approved Approval, as []allowance.Allowance, now time.Time, frozen string) Decision {
	return c.decide(obj, stored, approved, SpecRecord(obj), as, now, frozen)
}

func (c Config) decide(obj, stored map[string]any, approved Approval, spec mutation.Applied, as []allowance.Allowance, now time.Time, frozen string) Decision {
	c = c.Defaulted()
	in := Inputs{Allowances: as, ReadOnly: c.ReadOnly, Requested: c.Requested, Now: now, Limit: c.MaxOpen, Frozen: frozen, Approved: approved, Spec: spec}
	if stored != nil {
		in.Progress = allowance.ProgressOf(stored)
		in.Progress.Expired = func(a allowance.Allowance) bool { return a.ExpiredAt(now, c.MaxOpen) }
		in.Generation = generation(stored)
	}
	d := Decide(in)
	if c.RequestedErr != nil && d.Err == nil {
		d.Err = c.RequestedErr
	}
	if d.Approves {
		// Whether the write raises the generation depends on the gate.
		d.Approved.Generation = nextGeneration(obj, stored, d.Policies)
	}
	return d
}

func generation(obj map[string]any) int64 {
	return (&unstructured.Unstructured{Object: obj}).GetGeneration()
}

// Overdue reports whether stored's gate has stayed open past the limit
// with nobody closing it: the gate opens more than the read-only set, and
// an unconsumed External allowance among as, the stored allowances that
// may have opened it, was stamped longer than MaxOpen ago. The provider
// closes a gate at the limit, so one found overdue means the provider
// cannot: the function then answers with only the gate closed, a write the
// API server admits without the provider (docs/OPERATIONS.md).
func (c Config) Overdue(stored map[string]any, as []allowance.Allowance, now time.Time) bool {
	c = c.Defaulted()
	ps, err := managementPolicies(stored)
	if err != nil || !c.Opens(ps) {
		return false
	}
	return slices.ContainsFunc(as, func(a allowance.Allowance) bool {
		return live(a) && a.ExpiredAt(now, c.MaxOpen)
	})
}

// Opens reports whether the gate ps opens anything beyond the closed gate.
func (c Config) Opens(ps []string) bool {
	closed := c.Closed()
	return slices.ContainsFunc(ps, func(p string) bool { return !slices.Contains(closed, p) })
}
