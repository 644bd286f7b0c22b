package gate

import (
	"encoding/json"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Requested is the spec.managementPolicies a pipeline step before Kausality
// asked for on a composed resource: nil when it asked for none, which a
// managed resource reads as "*". The gate is never wider (Compute).
//
// It runs for every gated resource of every run, so it reads the maps
// directly (managementPolicies) rather than parse the path each time.
func Requested(desired map[string]any) ([]string, error) {
	spec, ok := desired["spec"].(map[string]any)
	if !ok {
		// No spec, a null or a non-object one: there is no such field.
		return nil, nil
	}
	if v, ok := spec["managementPolicies"]; !ok || v == nil {
		return nil, nil
	}
	ps, err := managementPolicies(desired)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read %s", PathManagementPolicies)
	}
	if _, err := canonical(ps); err != nil {
		return nil, errors.Wrapf(err, "invalid %s %v", PathManagementPolicies, ps)
	}
	return ps, nil
}

// managementPolicies is fieldpath's GetStringArray of
// spec.managementPolicies in obj. The usual shape, a list of strings in a
// spec object, is read from the maps directly: fieldpath parses the path
// with a lexer goroutine on every call, which cost more than the rest of
// reading a resource's gate. Any other shape is read through fieldpath,
// for the same answer and error.
func managementPolicies(obj map[string]any) ([]string, error) {
	spec, _ := obj["spec"].(map[string]any)
	if l, ok := spec["managementPolicies"].([]any); ok {
		ps := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return fieldpath.Pave(obj).GetStringArray(PathManagementPolicies)
			}
			ps[i] = s
		}
		return ps, nil
	}
	return fieldpath.Pave(obj).GetStringArray(PathManagementPolicies)
}

// FormatRequested is the kausality.io/requested-policies value that
// records ps (nil: the pipeline asked for none).
func FormatRequested(ps []string) string {
	if ps == nil {
		ps = []string{All}
	}
	b, _ := json.Marshal(ps) //nolint:errchkjson // a list of strings always encodes
	return string(b)
}

// ParseRequested reads a kausality.io/requested-policies value: a JSON
// array of management actions. ["*"] reads as nil. An error names what
// does not read; whoever decides the gate then closes it.
func ParseRequested(s string) ([]string, error) {
	var ps []string
	if err := json.Unmarshal([]byte(s), &ps); err != nil {
		return nil, errors.Wrapf(err, "annotation %s %q is not a JSON array of management actions", v1alpha1.AnnotationRequestedPolicies, s)
	}
	if ps == nil {
		return nil, errors.Errorf("annotation %s %q is not a JSON array of management actions", v1alpha1.AnnotationRequestedPolicies, s)
	}
	c, err := canonical(ps)
	if err != nil {
		return nil, errors.Wrapf(err, "annotation %s %q", v1alpha1.AnnotationRequestedPolicies, s)
	}
	if slices.Equal(c, []string{All}) {
		return nil, nil
	}
	return ps, nil
}

// RequestedOf is the request recorded on a gated managed resource: nil
// ("*") without a record, written before Kausality kept one. A record
// that does not read asks for nothing, so the gate stays closed, and err
// says why.
func RequestedOf(mr map[string]any) ([]string, error) {
	md, _ := mr["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	v, ok := ann[v1alpha1.AnnotationRequestedPolicies]
	if !ok {
		return nil, nil
	}
	s, _ := v.(string)
	ps, err := ParseRequested(s)
	if err != nil {
		return []string{}, err
	}
	return ps, nil
}
