package admit

import "fmt"

// Verdict is one admission decision, in the spirit of the API server's
// PolicyDecision: allowed, or denied for a reason (a label of
// kausality_admission_decisions_total, internal/metrics) with a message
// for the writer. A decision that allows a write may still warn. The zero
// Verdict allows.
//
// Verdicts are values so a webhook's steps read as gather, decide,
// respond: the decision says why, and only provider/admission turns it
// into an HTTP answer.
type Verdict struct {
	// Reason is why the write is denied; empty when it is allowed.
	Reason string
	// Message tells the writer what was refused and what would be
	// accepted.
	Message string
	// Warnings are for the writer whether or not the write is allowed.
	Warnings []string
	// Audit is what the API server's audit log records of the decision
	// (AuditMode, AuditViolations); the API server prefixes each key with
	// the webhook's name.
	Audit map[string]string
}

// Audit annotation keys of a policy evaluation.
const (
	// AuditMode is the mode of the policies that decided, Enforce or Log.
	AuditMode = "mode"
	// AuditViolations names the changes no rule permits, denied or (Log
	// mode) let in.
	AuditViolations = "violations"
)

// Allow is a verdict that lets a write through with warnings.
func Allow(warnings ...string) Verdict { return Verdict{Warnings: warnings} }

// Deny is a verdict that refuses a write for reason.
func Deny(reason, format string, args ...any) Verdict {
	return Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Allowed reports whether the verdict lets the write through.
func (v Verdict) Allowed() bool { return v.Reason == "" }

// String is the message of a denial, "" for an allowed write; for test
// failure output and logs.
func (v Verdict) String() string {
	if v.Allowed() {
		return ""
	}
	return v.Reason + ": " + v.Message
}
