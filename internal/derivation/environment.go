package derivation

import (
	"fmt"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// What the step's own environment patches write from the XR: a patch that
// reads the environment is ruled on the XR fields written into what it
// reads.

// envWrite is a field of the environment the step's environment patches
// write from the XR, and the XR fields it is written from.
type envWrite struct {
	to   fieldpath.Segments
	from []string
	// combined: a Combine wrote it, a string no field below To reads.
	combined bool
}

// envWrites are what a step's environment patches write from the XR, in
// patch order.
type envWrites []envWrite

// environmentWrites reads the step's environment patches that copy XR
// fields into the environment (function-patch-and-transform runs them
// before any resource's patches), so that a resource's patch from the
// environment traces back to the XR.
func environmentWrites(in *ptInput) (envWrites, error) {
	if in.Environment == nil {
		return nil, nil
	}
	var out envWrites
	for i, p := range in.Environment.Patches {
		typ := p.Type
		if typ == "" {
			typ = patchFromComposite
		}
		pp := placedPatch{ptPatch: p, at: fmt.Sprintf("input.environment.patches[%d]", i)}
		switch typ {
		case patchFromComposite, patchToEnvironment:
			typ = patchFromComposite // both copy an XR field into the environment here
		case patchCombineComposite:
		case patchToComposite, patchFromEnvironment, patchCombineToXR:
			continue // they write the XR from the environment
		default:
			return nil, errors.Errorf("%s: type %q is not an environment patch type function-patch-and-transform has", pp.at, typ)
		}
		from, to, _, err := pp.fields(typ)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(from, wildcard) {
			continue // function-patch-and-transform cannot read it
		}
		segs, _ := fieldpath.Parse(to) // canonical: it parses
		out = append(out, envWrite{to: segs, from: from, combined: typ == patchCombineComposite})
	}
	return out, nil
}

// sources are the XR fields whose values reach the environment field
// path: those written to it or above it (the field below in the XR), and
// those written below it.
func (ws envWrites) sources(path string) []string {
	segs, err := fieldpath.Parse(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, w := range ws {
		switch {
		case hasPrefix(segs, w.to) && !w.combined:
			fs, err := fieldpath.Parse(w.from[0])
			if err != nil {
				continue
			}
			out = append(out, append(fs, segs[len(w.to):]...).String())
		case hasPrefix(segs, w.to), hasPrefix(w.to, segs):
			out = append(out, w.from...)
		}
	}
	return out
}
