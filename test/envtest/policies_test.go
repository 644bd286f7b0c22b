package envtest

// suitePolicies are the AllowancePolicies every test runs under: three for
// DatabaseClaims (so admission evaluates several per request, as the
// benchmark measures) and one for XDatabases whose rule reaches the
// recording provider's Buckets and their cloud.
var suitePolicies = []string{`
apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: claims}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: DatabaseClaim}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  deletionProtection: true
  rules:
  - trigger: spec.size
    conditions: ["has(object.metadata.annotations) && 'jira' in object.metadata.annotations"]
    capture: ["metadata.annotations[jira]"]
    policies:
    - target: {apiGroup: example.com, apiVersion: v1alpha1, resource: xdatabases}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: spec.size, verbs: [Mutate]}
`, `
apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: claims-tags}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: DatabaseClaim}
  priority: 10
  rules:
  - trigger: spec.tags
`, `
apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: claims-engine}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: DatabaseClaim}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  rules:
  - trigger: spec.engine
    conditions: ["has(object.metadata.annotations) && object.metadata.annotations['allow-recreate'] == 'true'"]
    policies:
    - target: {apiGroup: example.com, resource: xdatabases}
      verbs: [Update]
      mutations:
      - {jsonPath: spec.engine, verbs: [Mutate]}
`, `
apiVersion: kausality.io/v1alpha1
kind: AllowancePolicy
metadata: {name: xdatabases}
spec:
  for: {apiGroup: example.com, apiVersion: v1alpha1, kind: XDatabase}
  subjects:
  - {kind: Group, name: platform-team, mayInitiate: true}
  - {kind: ServiceAccount, namespace: crossplane-system, name: crossplane}
  deletionProtection: true
  # Deleting an XDatabase deletes its buckets in the cloud, as far as the
  # deleter may initiate.
  deleting:
    policies:
    - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Delete]
  rules:
  - trigger: spec.size
    policies:
    - target: {apiGroup: recorder.kausality.io, apiVersion: v1alpha1, resource: buckets}
      relation: ControllerChild
      verbs: [Update]
      mutations:
      - {jsonPath: spec.forProvider.size, verbs: [Mutate]}
    - target: {external: {apiGroup: recorder.kausality.io, kind: Bucket}}
      relation: External
      verbs: [Update]
`}
