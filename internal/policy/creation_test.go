package policy

import (
	"testing"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

func TestCreated(t *testing.T) {
	cases := map[string]struct {
		reason string
		status string
		want   bool
	}{
		"New":          {reason: "A composite without conditions is being created.", status: "{}"},
		"Reconciled":   {reason: "A first reconcile does not end the creation.", status: "{conditions: [{type: Synced, status: 'True', observedGeneration: 1}]}"},
		"NotReady":     {reason: "Not Ready yet: still created.", status: "{conditions: [{type: Ready, status: 'False', reason: Creating}]}"},
		"Ready":        {reason: "Ready alone does not: a dependency may be composed only once the rest is Ready.", status: "{conditions: [{type: Ready, status: 'True'}]}"},
		"CreatedOnce":  {reason: "Once over, the creation stays over when Ready turns False.", status: "{conditions: [{type: Ready, status: 'False'}, {type: " + v1alpha1.ConditionCreated + ", status: 'True'}]}", want: true},
		"CreatedFalse": {reason: "Any status counts: the function sets it True only, and a step's False only ends the creation sooner.", status: "{conditions: [{type: " + v1alpha1.ConditionCreated + ", status: 'False'}]}", want: true},
		"MarkedUnknown": {
			reason: "Crossplane marks the condition Unknown when a reconcile fails; a user who can make a step fail must not reopen the creation.",
			status: "{conditions: [{type: " + v1alpha1.ConditionCreated + ", status: 'Unknown', reason: FatalError, message: 'A fatal error occurred before the status of this condition could be determined.'}]}", want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Created(object(t, "metadata: {name: x}\nstatus: "+tc.status)); got != tc.want {
				t.Errorf("%s\nCreated(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
