package compose

import (
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
)

func TestConfigFrom(t *testing.T) {
	cases := map[string]struct {
		reason  string
		in      v1beta1.Input
		want    config
		wantErr error
	}{
		"Empty": {reason: "Everything is optional; the defaults are the provider's too.", want: config{mode: v1beta1.ModeEnforce, gate: gate.Config{ReadOnly: gate.DefaultReadOnly, MaxOpen: gate.DefaultMaxOpen}}},
		"Set": {reason: "A Composition may close gates to [Observe], shorten the limit and report only.",
			in:   v1beta1.Input{Mode: v1beta1.ModeLog, ReadOnlyPolicies: []string{"Observe"}, MaxGateOpen: &metav1.Duration{Duration: 10 * time.Minute}},
			want: config{mode: v1beta1.ModeLog, gate: gate.Config{ReadOnly: []string{"Observe"}, MaxOpen: 10 * time.Minute}}},
		"BadMode": {reason: "Modes are a closed set.", in: v1beta1.Input{Mode: "Off"}, wantErr: errors.Errorf(errFmtMode, "Off")},
		"WritingGate": {reason: "A closed gate must not write to the cloud.", in: v1beta1.Input{ReadOnlyPolicies: []string{"Observe", "Update"}},
			wantErr: errors.Wrap(gate.ValidateReadOnly([]string{"Observe", "Update"}), errInputReadOnlyPolicies)},
		"ZeroMaxOpen": {reason: "A gate that may never open is a mistake, not a policy.", in: v1beta1.Input{MaxGateOpen: &metav1.Duration{}}, wantErr: errors.Errorf(errFmtMaxGateOpen, time.Duration(0))},
		"UnknownVerbs": {reason: "Unknown management actions are refused.", in: v1beta1.Input{ReadOnlyPolicies: []string{"Watch"}},
			wantErr: errors.Wrap(gate.ValidateReadOnly([]string{"Watch"}), errInputReadOnlyPolicies)},
		"Inputs": {reason: "The objects the pipeline reads are named in full.",
			in:   v1beta1.Input{Inputs: []v1beta1.InputRef{{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Name: "team-a"}}},
			want: config{mode: v1beta1.ModeEnforce, gate: gate.Config{ReadOnly: gate.DefaultReadOnly, MaxOpen: gate.DefaultMaxOpen}, inputs: []v1beta1.InputRef{{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Name: "team-a"}}}},
		"InputWithoutName": {reason: "An input must name one object.", in: v1beta1.Input{Inputs: []v1beta1.InputRef{{APIVersion: "v1", Kind: "ConfigMap"}}}, wantErr: errors.Errorf(errFmtInputRefIncomplete, 0, "v1", "ConfigMap", "")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := configFrom(&tc.in, nil)
			if diff := cmp.Diff(tc.wantErr, err, test.EquateErrors()); diff != "" {
				t.Fatalf("%s\nconfigFrom: -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.wantErr != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("%s\nconfigFrom: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
