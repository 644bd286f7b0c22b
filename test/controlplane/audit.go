package controlplane

import (
	"os"
	"path/filepath"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records every write of a managed resource the recording
// provider reconciles, and of the XRs and Claims that compose them, with
// the object as sent and as stored: the order of Crossplane's, the
// webhooks', the gate controller's and the provider's writes is what a
// failed scenario is read from (kept with the other logs in Dir).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
# Status writes (the recording provider's every poll) by name and code
# only: bodies of those would cost the API server more than the suite.
- level: Metadata
  verbs: [update, patch]
  resources:
  - group: recorder.kausality.io
    resources: ["*/status"]
  - group: recorder.m.kausality.io
    resources: ["*/status"]
  - group: example.com
    resources: ["*/status"]
- level: RequestResponse
  verbs: [create, update, patch, delete]
  resources:
  - group: recorder.kausality.io
  - group: recorder.m.kausality.io
  - group: example.com
- level: None
`

// audit makes env's kube-apiserver write the audit log Log("audit") names.
func (c *ControlPlane) audit(env *envtest.Environment) error {
	policy := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return errors.Wrap(err, "cannot write the audit policy")
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", c.Log("audit")).
		Set("audit-log-format", "json").
		// Written in batches, off the requests' path.
		Set("audit-log-mode", "batch")
	return nil
}
