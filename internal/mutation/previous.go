package mutation

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// Previous records, for each path of a spec a change in flight sets, the
// value the path had before it (nil: none): what the cloud still holds
// until the change is applied. It is the codec of the annotation
// kausality.io/previous, a JSON object of path to value.
type Previous map[string]any

// ParsePrevious reads a Previous record. The empty string is no record.
// Every path must parse, and the record must fit an annotation.
func ParsePrevious(s string) (Previous, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > MaxAppliedBytes {
		return nil, errors.Errorf("previous-values record has %d bytes, more than the %d an annotation can hold", len(s), MaxAppliedBytes)
	}
	var p Previous
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, errors.Wrap(err, "previous-values record must be a JSON object of path to value")
	}
	if p == nil {
		return nil, errors.New("previous-values record must be a JSON object of path to value, not null")
	}
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if _, err := parsePath(k); err != nil || k == "" {
			return nil, errors.Errorf("previous-values record: path %q does not parse", k)
		}
		// JSON numbers read as float64; the spec's integers are int64, as
		// Kubernetes decodes them, so hashes of both agree.
		p[k] = runtime.DeepCopyJSONValue(normalize(p[k]))
	}
	return p, nil
}

// String is the record as the annotation holds it: compact JSON with the
// paths in order, so the same record is always the same string.
func (p Previous) String() string {
	b, err := json.Marshal(map[string]any(p)) // encoding/json sorts map keys
	if err != nil {
		return "{}"
	}
	return string(b)
}

// normalize turns the float64s encoding/json reads for whole numbers into
// int64s, as the API server decodes them.
func normalize(v any) any {
	switch t := v.(type) {
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
		return t
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
		return t
	}
	return v
}
