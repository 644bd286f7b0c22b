package derivecontroller

// Error messages, one constant each in crossplane-runtime's style, so tests
// compare errors by what they say and a message is changed in one place.
const (
	errFmtComposition                         = "Composition %s"
	errFmtCreateAllowancePolicyDerivedFrom    = "cannot create AllowancePolicy %s derived from %s"
	errFmtGetAllowancePolicy                  = "cannot get AllowancePolicy %s"
	errFmtGetCompositeResourceDefinition      = "cannot get CompositeResourceDefinition %s"
	errFmtGetCustomResourceDefinition         = "cannot get CustomResourceDefinition %s.%s"
	errFmtListCompositionRevisionsComposition = "cannot list the CompositionRevisions of Composition %s"
	errFmtMap                                 = "cannot map %s"
	errFmtReadXRDComposition                  = "cannot read the XRD of %s for Composition %s"
	errFmtSetConditionAllowancePolicy         = "cannot set condition %s of AllowancePolicy %s"
	errFmtUpdateAllowancePolicyDerivedFrom    = "cannot update AllowancePolicy %s derived from %s"
)
