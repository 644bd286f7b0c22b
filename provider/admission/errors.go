package admission

// Error messages, one constant each in crossplane-runtime's style, so tests
// compare errors by what they say and a message is changed in one place.
const (
	errFmtDELETECarriesNoObject      = "DELETE of %s %s carries no object"
	errFmtNotDiscovered              = "cannot decide what deleting %s %s does yet: the provider has not discovered the managed resource kinds since it started; retry in a moment"
	errFmtDecodeDELETE               = "cannot decode the DELETE of %s %s"
	errFmtDecodeStatusWrite          = "cannot decode the status write of %s %s"
	errFmtGet                        = "cannot get %s"
	errFmtGetComposite               = "cannot get the composite %s %s"
	errFmtReadComposite              = "cannot read the composite of %s"
	errFmtGetCompositionRevision     = "cannot get CompositionRevision %s"
	errFmtGetPodWhichSentRequest     = "cannot get pod %s/%s, which sent the request as %s"
	errFmtGetUpgradeAllowance        = "cannot get UpgradeAllowance %s"
	errFmtParseAnnotation            = "cannot parse annotation %s on %s"
	errFmtPodNotPodThatSent          = "pod %s/%s is not the pod %s that sent the request as %s"
	errFmtPodWhichSentRequestHas     = "pod %s/%s, which sent the request as %s, has no containers"
	errFmtSet                        = "cannot set %s on %s"
	errFmtStatusWriteCarriesNoObject = "status write of %s %s carries no object"
	errListAllowancePolicies         = "cannot list AllowancePolicies"
	errListUpgradeAllowances         = "cannot list UpgradeAllowances"
)
