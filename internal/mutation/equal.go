package mutation

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Equal compares two JSON-shaped values deeply, numbers by value: 1 and
// 1.0 are equal, as they are to the API server once decoded.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	if na, ok := toNumber(a); ok {
		nb, ok := toNumber(b)
		return ok && na.equal(nb)
	}
	if _, ok := toNumber(b); ok {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// number is a numeric value normalised so that equal values of different Go
// types compare equal with ==: integral values that fit an int64 are ints,
// larger integral values that fit a uint64 are uints, the rest floats.
type number struct {
	kind numberKind
	i    int64
	u    uint64
	f    float64
}

type numberKind uint8

const (
	numInt numberKind = iota
	numUint
	numFloat
)

func (n number) equal(m number) bool {
	if n.kind != m.kind {
		return false
	}
	switch n.kind {
	case numInt:
		return n.i == m.i
	case numUint:
		return n.u == m.u
	default:
		// NaN equals NaN here: a value must equal itself, or Diff would
		// report it forever.
		return n.f == m.f || (math.IsNaN(n.f) && math.IsNaN(m.f))
	}
}

// String is the canonical JSON-like text of the number, the same for every
// Go type holding the same value.
func (n number) String() string {
	switch n.kind {
	case numInt:
		return strconv.FormatInt(n.i, 10)
	case numUint:
		return strconv.FormatUint(n.u, 10)
	default:
		return strconv.FormatFloat(n.f, 'g', -1, 64)
	}
}

func fromUint(u uint64) number {
	if u <= math.MaxInt64 {
		return number{kind: numInt, i: int64(u)}
	}
	return number{kind: numUint, u: u}
}

func fromFloat(f float64) number {
	if f == math.Trunc(f) && !math.IsInf(f, 0) {
		if f >= math.MinInt64 && f < math.MaxInt64 {
			return number{kind: numInt, i: int64(f)}
		}
		if f >= 0 && f < math.MaxUint64 {
			return number{kind: numUint, u: uint64(f)}
		}
	}
	return number{kind: numFloat, f: f}
}

func toNumber(v any) (number, bool) {
	switch x := v.(type) {
	case int:
		return number{kind: numInt, i: int64(x)}, true
	case int8:
		return number{kind: numInt, i: int64(x)}, true
	case int16:
		return number{kind: numInt, i: int64(x)}, true
	case int32:
		return number{kind: numInt, i: int64(x)}, true
	case int64:
		return number{kind: numInt, i: x}, true
	case uint:
		return fromUint(uint64(x)), true
	case uint8:
		return fromUint(uint64(x)), true
	case uint16:
		return fromUint(uint64(x)), true
	case uint32:
		return fromUint(uint64(x)), true
	case uint64:
		return fromUint(x), true
	case float32:
		return fromFloat(float64(x)), true
	case float64:
		return fromFloat(x), true
	case json.Number:
		s := string(x)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return number{kind: numInt, i: i}, true
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return fromUint(u), true
		}
		f, err := strconv.ParseFloat(s, 64)
		if err == nil || errors.Is(err, strconv.ErrRange) {
			return fromFloat(f), true
		}
	}
	return number{}, false
}
