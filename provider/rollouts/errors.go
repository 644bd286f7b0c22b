package rollouts

// Error messages, one constant each in crossplane-runtime's style.
const (
	errListUpgradeAllowances           = "cannot list UpgradeAllowances"
	errFmtListComposites               = "cannot list %s"
	errFmtRecordTurns                  = "cannot record the rollout turns of %s %s"
	errFmtUpdateStatusUpgradeAllowance = "cannot update the rollout status of UpgradeAllowance %s"
)
