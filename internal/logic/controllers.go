package logic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MaxControllersBytes bounds the controller record the parser reads: a
// resource is written by Crossplane and one provider, a handful at most.
const MaxControllersBytes = 4 << 10

// buildHashLen is how many hex digits of the build's digest the record
// keeps: enough to tell builds apart, short enough to read.
const buildHashLen = 12

// Controllers is the record of which build of each controller last wrote a
// managed resource (annotation kausality.io/controller-builds): service
// account username to the hash of its build (BuildHash). One entry per
// controller, because Crossplane and a provider both write the same
// resource and a single value would flip between them on every write.
type Controllers map[string]string

// ParseControllers decodes the controller record: a JSON object of service
// account username to build hash. The empty string is no record.
func ParseControllers(s string) (Controllers, error) {
	m, err := parseRecord(s, MaxControllersBytes, "a record of a resource's controllers", "service account", "build hash")
	return Controllers(m), err
}

// Format encodes the record; keys are sorted, so the same controllers
// always give the same string and repeated writes do not flap.
func (c Controllers) Format() string {
	if len(c) == 0 {
		return ""
	}
	b, _ := json.Marshal(map[string]string(c)) // a map of strings always encodes, keys sorted
	return string(b)
}

// Wrote is the record after a write by serviceAccount running build, and
// the change it is when that controller last wrote with another build (nil:
// none, or no record of it yet, which is no change either).
func (c Controllers) Wrote(serviceAccount, build string) (Controllers, *Change) {
	out := make(Controllers, len(c)+1)
	for k, v := range c {
		out[k] = v
	}
	out[serviceAccount] = build
	if was, ok := c[serviceAccount]; ok && was != build {
		return out, &Change{Controller: serviceAccount, From: was, To: build}
	}
	return out, nil
}

// UnboundBuild stands for the build of a controller whose token is bound to
// no pod, so that its build cannot be known: it is never recorded, and a
// write by it is always a change of build.
const UnboundBuild = "unbound"

// BuildHash is the hash of a controller's build: of the images its pod
// runs, which name the binary and its version and nothing that changes
// when the same version is restarted or rescheduled. Order and repetition of images do not matter.
func BuildHash(images []string) string {
	s := slices.Clone(images)
	slices.Sort(s)
	s = slices.Compact(s)
	sum := sha256.Sum256([]byte(strings.Join(s, "\n")))
	return hex.EncodeToString(sum[:])[:buildHashLen]
}

// controllerString names a controller's change for a message.
func controllerString(c Change) string {
	return fmt.Sprintf("controller %s build %s → %s", c.Controller, c.From, c.To)
}
