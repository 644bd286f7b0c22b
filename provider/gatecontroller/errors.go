package gatecontroller

// Error messages, one constant each in crossplane-runtime's style, so tests
// compare errors by what they say and a message is changed in one place.
const (
	errConvertConditions                = "cannot convert conditions"
	errFmtGet                           = "cannot get %s %s"
	errFmtParseAnnotation               = "cannot parse annotation %s on %s; the gate stays closed"
	errFmtSet                           = "cannot set %s"
	errFmtTellWhetherDeletionAboveFinal = "cannot tell whether the deletion above %s %s is final"
	errFmtUpdateCondition               = "cannot update the %s condition of %s %s"
	errFmtUpdateGate                    = "cannot update the gate of %s %s"
	errSetStatusConditions              = "cannot set status.conditions"
)
