package allowance

import (
	"slices"
	"time"
)

// Absent is the Pending value of a field the held change removes.
const Absent = "-"

// IsPending reports whether propagation control holds a back.
func (a Allowance) IsPending() bool { return len(a.Pending) > 0 }

// Released is a let through: no longer pending, and stamped at now, so
// its gate's time limit counts from its release rather than from when the
// change arrived.
func (a Allowance) Released(now time.Time) Allowance {
	a.Pending = nil
	return a.Restamped(now)
}

// Restamped is a with its last hop stamped at now: the clock of its time
// limit restarts (a released or unfrozen allowance). The hop's identity
// (Hop.Same) does not change, so admission sees the same allowance.
func (a Allowance) Restamped(now time.Time) Allowance {
	if len(a.Trace) == 0 {
		return a
	}
	a.Trace = slices.Clone(a.Trace)
	a.Trace[len(a.Trace)-1].Timestamp = Timestamp(now)
	return a
}

// KeepPending is as with the values of every allowance still pending
// restored from the stored allowance it is the same as, and whether any
// was restored: the change a pending allowance was issued for is fixed,
// or a writer (a buggy pipeline step) could make it cover another.
func KeepPending(as, stored []Allowance) (out []Allowance, changed bool) {
	return keepStored(as, stored, func(a *Allowance) *map[string]string { return &a.Pending }, Allowance.IsPending)
}

// Releases reports whether a is stored, a pending allowance, let through:
// the same grant from the same origin, no longer pending. Its generation
// and timestamp may have moved (Released).
func (a Allowance) Releases(stored Allowance) bool {
	return stored.IsPending() && !a.IsPending() && a.SameGrant(stored) && a.SameOrigin(stored)
}
