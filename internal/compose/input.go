package compose

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/memo"
)

// config is the validated input.
type config struct {
	mode v1beta1.Mode
	gate gate.Config
	plan *plan // propagation control; nil without
	// inputs are the objects outside the XR the pipeline reads.
	inputs []v1beta1.InputRef
}

// configFrom validates the Input. What it leaves out takes the defaults the
// provider takes too (gate.Config.Defaulted), so both close gates alike.
func configFrom(in *v1beta1.Input, plans *memo.Cache[*plan]) (config, error) {
	c := config{mode: v1beta1.ModeEnforce}
	switch in.Mode {
	case "", v1beta1.ModeEnforce:
	case v1beta1.ModeLog:
		c.mode = v1beta1.ModeLog
	default:
		return c, errors.Errorf(errFmtMode, in.Mode)
	}
	if len(in.ReadOnlyPolicies) > 0 {
		if err := gate.ValidateReadOnly(in.ReadOnlyPolicies); err != nil {
			return c, errors.Wrap(err, errInputReadOnlyPolicies)
		}
		c.gate.ReadOnly = in.ReadOnlyPolicies
	}
	if in.MaxGateOpen != nil {
		if in.MaxGateOpen.Duration <= 0 {
			return c, errors.Errorf(errFmtMaxGateOpen, in.MaxGateOpen.Duration)
		}
		c.gate.MaxOpen = in.MaxGateOpen.Duration
	}
	c.gate = c.gate.Defaulted()
	if err := validInputs(in.Inputs); err != nil {
		return c, err
	}
	c.inputs = in.Inputs
	var err error
	if c.plan, err = planOf(plans, in.Propagation); err != nil {
		return c, err
	}
	return c, nil
}
