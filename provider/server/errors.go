package server

// Error messages, one constant each in crossplane-runtime's style, so tests
// compare errors by what they say and a message is changed in one place.
const (
	errAddCrossplaneTypesScheme           = "cannot add Crossplane's apiextensions types to the scheme"
	errAddEventWriter                     = "cannot add the Event writer"
	errAddCustomResourceDefinitionsScheme = "cannot add CustomResourceDefinitions to the scheme"
	errAddHealthCheck                     = "cannot add the health check"
	errAddInitialWebhookSync              = "cannot add the initial webhook sync"
	errAddKausalityIoTypesScheme          = "cannot add kausality.io types to the scheme"
	errAddKubernetesTypesScheme           = "cannot add Kubernetes types to the scheme"
	errAddManagedKindDiscovery            = "cannot add the managed kind discovery"
	errAddReadinessCheck                  = "cannot add the readiness check"
	errCreateClient                       = "cannot create a client"
	errFmtCacheNotSynced                  = "the cache of %s has not synced yet"
	errFmtGetInformer                     = "cannot get the informer of %s"
	errManagedKindsNotDiscoveredYet       = "the managed resource kinds are not discovered yet"
	errCreateDiscoveryClient              = "cannot create a discovery client"
	errCreateManager                      = "cannot create the manager"
	errInvalidReadOnlyManagementPolicies  = "invalid read-only management policies"
	errLearnOwnUsername                   = "cannot learn the provider's own username (SelfSubjectReview)"
	errSetUpAllowancePolicyController     = "cannot set up the AllowancePolicy controller"
	errSetUpPolicyDerivationController    = "cannot set up the policy derivation controller"
	errSetUpUpgradeAllowanceController    = "cannot set up the UpgradeAllowance controller"
	errSetUpRolloutController             = "cannot set up the roll-out controller"
	errCreateFleetCache                   = "cannot create the cache of composites"
)
