package compose

import (
	"fmt"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/input/v1beta1"
	"github.com/kausality-io/kausality-crossplane/internal/logic"
)

// requirementInput names the required resource of the Input's i-th input.
func requirementInput(i int) string { return fmt.Sprintf("kausality-input-%d", i) }

// validInputs says what is wrong with the Input's inputs, naming the field.
func validInputs(ins []v1beta1.InputRef) error {
	for i, in := range ins {
		if in.APIVersion == "" || in.Kind == "" || in.Name == "" {
			return errors.Errorf(errFmtInputRefIncomplete, i, in.APIVersion, in.Kind, in.Name)
		}
	}
	return nil
}

// inputRequirements asks Crossplane for each input by name.
func inputRequirements(rs *fnv1.Requirements, ins []v1beta1.InputRef) {
	for i, in := range ins {
		sel := &fnv1.ResourceSelector{ApiVersion: in.APIVersion, Kind: in.Kind, Match: &fnv1.ResourceSelector_MatchName{MatchName: in.Name}}
		if in.Namespace != "" {
			sel.Namespace = &in.Namespace
		}
		rs.Resources[requirementInput(i)] = sel
	}
}

// loadInputs adds the generation of every input to the logic that produces
// the composed resources now: a change an input's new generation causes is
// then a logic change, named after the input (DESIGN §3d). An input
// Crossplane has not resolved yet, or that does not exist, is left out, so
// what it changes counts as a change without a cause; one that is missing
// is reported: it returns what it could not read.
func (r *run) loadInputs(req *fnv1.RunFunctionRequest) (problems []string) {
	if len(r.cfg.inputs) == 0 {
		return nil
	}
	r.logic.Inputs = map[string]string{}
	for i, in := range r.cfg.inputs {
		us, ok, err := required(req, requirementInput(i))
		switch {
		case err != nil:
			problems = append(problems, errors.Wrapf(err, errFmtReadInput, in.Kind, in.Name).Error())
			continue
		case !ok:
			continue
		case len(us) != 1:
			problems = append(problems, errors.Errorf(errFmtInputMissing, in.Kind, in.Name).Error())
			continue
		}
		r.logic.Inputs[logic.InputKey(in.Kind, in.Namespace, in.Name)] = strconv.FormatInt(generation(us[0].Object), 10)
	}
	r.inputs = logic.FormatFunctions(r.logic.Inputs)
	return problems
}

// generation reads metadata.generation, which arrives as a float64 when
// the object came through a protobuf Struct.
func generation(obj map[string]any) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, "metadata", "generation")
	switch g := v.(type) {
	case int64:
		return g
	case float64:
		return int64(g)
	}
	return 0
}
