package policycontroller

// Error messages, one constant each in crossplane-runtime's style, so tests
// compare errors by what they say and a message is changed in one place.
const (
	errFmtGetNamespace                                    = "cannot get Namespace %s to read its break-glass"
	errFmtApply                                           = "cannot apply %s %s"
	errFmtGetAllowancePolicy                              = "cannot get AllowancePolicy %s"
	errFmtGetCustomResourceDefinition                     = "cannot get CustomResourceDefinition %s"
	errFmtGetUpgradeAllowance                             = "cannot get UpgradeAllowance %s"
	errFmtGetValidatingWebhookConfigurationFromPackage    = "cannot get ValidatingWebhookConfiguration %s from the package"
	errFmtListGated                                       = "cannot list gated %s"
	errFmtLookUpResource                                  = "cannot look up resource %s"
	errFmtNoValidatingWebhookConfigurationHasWebhook      = "no ValidatingWebhookConfiguration has webhook %s: is the provider-kausality package installed and healthy?"
	errFmtResolveTargetsAllowancePolicy                   = "cannot resolve the targets of AllowancePolicy %s"
	errFmtUpdateStatusAllowancePolicy                     = "cannot update the status of AllowancePolicy %s"
	errFmtUpdateStatusUpgradeAllowance                    = "cannot update the status of UpgradeAllowance %s"
	errFmtValidatingWebhookConfigurationHasNoWebhooksCopy = "ValidatingWebhookConfiguration %s has no webhooks to copy the client config from"
	errListAllowancePolicies                              = "cannot list AllowancePolicies"
	errListValidatingAdmissionPolicies                    = "cannot list ValidatingAdmissionPolicies"
	errListValidatingWebhookConfigurations                = "cannot list ValidatingWebhookConfigurations to find the package's"
	errWebhookConfigurationsHaveNotBeen                   = "the webhook configurations have not been written yet"
	errManagedKindsNotDiscovered                          = "the managed resource kinds are not discovered yet: the webhook configurations are not rewritten from none"
)
