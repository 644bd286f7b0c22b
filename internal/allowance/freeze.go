package allowance

import (
	"encoding/json"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Freeze is the value of the kausality.io/freeze annotation: while present no
// gate opens below the object.
type Freeze struct {
	User    string `json:"user"`
	Message string `json:"message,omitempty"`
	At      string `json:"at,omitempty"`
}

// ParseFreeze decodes a kausality.io/freeze value strictly. A freeze must say
// who set it, so that whoever finds the gate closed knows whom to ask.
func ParseFreeze(s string) (Freeze, error) {
	var f Freeze
	if err := decodeStrict(s, &f); err != nil {
		return Freeze{}, err
	}
	if f.User == "" {
		return Freeze{}, errors.New("user is empty")
	}
	if f.At != "" {
		if _, err := time.Parse(time.RFC3339, f.At); err != nil {
			return Freeze{}, errors.Errorf("at %q is not RFC 3339", f.At)
		}
	}
	return f, nil
}

// FormatFreeze encodes a freeze compactly, in field order, as admission
// writes it.
func FormatFreeze(f Freeze) string {
	b, _ := json.Marshal(f) //nolint:errchkjson // three strings always encode
	return string(b)
}

// FreezeSetBy is the freeze a user sets by writing value: its message is
// value's (value's "message", or value itself when it is not a freeze),
// and who and when are the writer's and now, whatever value claims, so a
// freeze always names the user who set it.
func FreezeSetBy(value, user string, now time.Time) Freeze {
	f := Freeze{Message: value}
	var claimed Freeze
	if err := decodeStrict(value, &claimed); err == nil {
		f.Message = claimed.Message
	}
	f.User = user
	f.At = Timestamp(now)
	return f
}

// UnreadableFreeze is who froze an object whose kausality.io/freeze
// annotation cannot be parsed.
const UnreadableFreeze = "an unreadable " + v1alpha1.AnnotationFreeze + " annotation"

// FrozenBy names who froze an object through its kausality.io/freeze
// annotation, "" when nobody did. An unreadable freeze still freezes (a
// freeze must never be lost to a typo): it is frozen by UnreadableFreeze,
// and err says what is wrong with it.
func FrozenBy(annotations map[string]string) (string, error) {
	v, ok := annotations[v1alpha1.AnnotationFreeze]
	if !ok {
		return "", nil
	}
	f, err := ParseFreeze(v)
	if err != nil {
		return UnreadableFreeze, err
	}
	return f.User, nil
}
