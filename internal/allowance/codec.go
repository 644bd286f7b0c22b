package allowance

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// MaxAnnotationBytes bounds what the codecs parse. The API server caps all of
// an object's annotations at 256 KiB together, so anything larger did not come
// from a stored object.
const MaxAnnotationBytes = 256 << 10

// Parse decodes the kausality.io/allowances annotation value strictly: unknown
// fields, an invalid relation, a missing target, a negative generation or a
// malformed hop are errors. The empty string is no allowances.
func Parse(s string) ([]Allowance, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var as []Allowance
	if err := decodeStrict(s, &as); err != nil {
		return nil, err
	}
	for i := range as {
		if err := as[i].Validate(); err != nil {
			return nil, errors.Wrapf(err, "allowance [%d]", i)
		}
	}
	return as, nil
}

// Format encodes allowances compactly; the key order is fixed by the struct
// and maps are sorted, so the same allowances always give the same string.
func Format(as []Allowance) string {
	n := 2
	for i := range as {
		n += allowanceSize(&as[i])
	}
	return bytesString(appendAllowances(make([]byte, 0, n), as))
}

// ParseTrace decodes the kausality.io/trace annotation value strictly. The
// empty string is no trace.
func ParseTrace(s string) (Trace, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var t Trace
	if err := decodeStrict(s, &t); err != nil {
		return nil, err
	}
	return t, t.Validate()
}

// FormatTrace encodes a trace compactly in a stable key order.
func FormatTrace(t Trace) string {
	return bytesString(appendTrace(make([]byte, 0, traceSize(t)), t))
}

// FormatTraceThen is FormatTrace(t.Then(h)) without building that trace:
// the function formats one for every composed resource it stamps.
func FormatTraceThen(t Trace, h Hop) string {
	b := make([]byte, 0, traceSize(t)+hopSize(&h))
	b = appendTrace(b, t)
	if len(t) > 0 {
		b = append(b[:len(b)-1], ',')
	} else {
		b = b[:len(b)-1]
	}
	b = appendHop(b, &h)
	return bytesString(append(b, ']'))
}

func decodeStrict(s string, into any) error {
	if len(s) > MaxAnnotationBytes {
		return errors.Errorf("value is %d bytes, more than the %d an object's annotations can hold", len(s), MaxAnnotationBytes)
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(into); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			// A field this build does not know may narrow what an
			// allowance grants (as pending, values and held do), so
			// ignoring it could widen the grant: refused, naming the
			// likely cause.
			return errors.Errorf("unknown field %s: written by a newer release of Kausality? Upgrade provider-kausality before function-kausality (docs/OPERATIONS.md, \"Upgrades\")", f)
		}
		return errors.Wrap(err, "invalid JSON")
	}
	if d.More() {
		return errors.New("invalid JSON: trailing data after the value")
	}
	// Decode stops after one value; anything but white space after it is an
	// error the caller must hear about, or an edit that appended text would
	// silently lose it.
	var rest bytes.Buffer
	if _, err := rest.ReadFrom(d.Buffered()); err == nil && strings.TrimSpace(rest.String()) != "" {
		return errors.New("invalid JSON: trailing data after the value")
	}
	return nil
}
