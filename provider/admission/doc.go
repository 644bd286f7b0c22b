// Package admission holds the provider's admission webhooks: policy
// evaluation and allowance injection on Claims and composites, the gate and
// chain checks on managed resources, annotation protection, deletion
// protection and AllowancePolicy validation. Each is a controller-runtime
// admission.Handler; the decisions themselves come from internal/.
package admission
