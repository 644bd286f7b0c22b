package rollout

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A Turn says it is a composite's turn in the roll-out of one
// UpgradeAllowance, at one of its generations, under one logic (the key
// the function names the Composition revision, Function packages and
// inputs by, KeyOf). The provider works turns out from its watch of the
// fleet (Decide) and records them on each composite
// (kausality.io/rollout-turns); the function lets an upgrade through only
// on a composite whose turns name the UpgradeAllowance at its current
// generation and the logic the function runs. A turn recorded for an
// older generation or another logic counts for nothing: a stale record
// only holds a composite back.
type Turn struct {
	Upgrade    string `json:"upgrade"`
	Generation int64  `json:"generation"`
	Logic      string `json:"logic"`
}

// Turns are the turns recorded on one composite.
type Turns []Turn

// maxTurns bounds a record: one turn per UpgradeAllowance with a rollout
// and logic in flight, which are few. A longer one is refused, not read.
const maxTurns = 64

// ParseTurns reads the annotation. Empty is no turn. Unknown fields are an
// error, as for every annotation Kausality reads (docs/OPERATIONS.md,
// "Upgrades"): an older reader must not take a turn it cannot read whole.
func ParseTurns(s string) (Turns, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	var t Turns
	if err := d.Decode(&t); err != nil {
		return nil, errors.Wrap(err, "cannot parse the rollout turns")
	}
	if d.More() {
		return nil, errors.New("cannot parse the rollout turns: more than one JSON value")
	}
	if len(t) > maxTurns {
		return nil, errors.Errorf("cannot parse the rollout turns: %d turns, at most %d", len(t), maxTurns)
	}
	for i, x := range t {
		if x.Upgrade == "" || x.Logic == "" || x.Generation < 1 {
			return nil, errors.Errorf("cannot parse the rollout turns: turn %d needs an upgrade, a logic and a generation of at least 1", i)
		}
	}
	return t, nil
}

// Format is the annotation's value, sorted, so that the same turns are
// always the same text; "" for none.
func (t Turns) Format() string {
	if len(t) == 0 {
		return ""
	}
	s := slices.Clone(t)
	slices.SortFunc(s, compareTurns)
	s = slices.Compact(s)
	var b bytes.Buffer
	// Encoding a slice of plain strings and integers cannot fail.
	_ = json.NewEncoder(&b).Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func compareTurns(a, b Turn) int {
	if c := strings.Compare(a.Upgrade, b.Upgrade); c != 0 {
		return c
	}
	if c := strings.Compare(a.Logic, b.Logic); c != 0 {
		return c
	}
	return int(a.Generation - b.Generation)
}

// Has reports whether the turns name upgrade at generation under logic.
func (t Turns) Has(upgrade string, generation int64, logic string) bool {
	return slices.Contains(t, Turn{Upgrade: upgrade, Generation: generation, Logic: logic})
}

// Without is t without the turns of upgrade.
func (t Turns) Without(upgrade string) Turns {
	return slices.DeleteFunc(slices.Clone(t), func(x Turn) bool { return x.Upgrade == upgrade })
}
