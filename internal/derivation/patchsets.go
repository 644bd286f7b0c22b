package derivation

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Patch sets: a resource's patches as function-patch-and-transform applies
// them, each PatchSet reference replaced by the set's patches.

// placedPatch is a resource's patch with a patch set expanded: the patch,
// the set it came from ("" for none) and where it is in the input.
type placedPatch struct {
	ptPatch
	set, at string
}

// patchSets are the step's patch sets by name. A patch set holding a
// PatchSet patch is an error, as function-patch-and-transform has it.
func patchSets(pss []ptPatchSet) (map[string][]ptPatch, error) {
	sets := map[string][]ptPatch{}
	for i, ps := range pss {
		for j, p := range ps.Patches {
			if p.Type == patchSet {
				return nil, errors.Errorf("input.patchSets[%d] (%s).patches[%d]: a patch set cannot hold a PatchSet patch", i, ps.Name, j)
			}
		}
		sets[ps.Name] = ps.Patches
	}
	return sets, nil
}

// expandPatches are a resource's patches in the order
// function-patch-and-transform applies them: each PatchSet patch replaced
// by its set's patches.
func expandPatches(patches []ptPatch, sets map[string][]ptPatch, at string) ([]placedPatch, error) {
	var out []placedPatch
	for j, p := range patches {
		pat := fmt.Sprintf("%s.patches[%d]", at, j)
		if p.Type != patchSet {
			out = append(out, placedPatch{ptPatch: p, at: pat})
			continue
		}
		if p.PatchSetName == nil {
			return nil, errors.Errorf("%s: a PatchSet patch needs patchSetName", pat)
		}
		ps, ok := sets[*p.PatchSetName]
		if !ok {
			return nil, errors.Errorf("%s: patch set %q does not exist", pat, *p.PatchSetName)
		}
		for k, sp := range ps {
			out = append(out, placedPatch{ptPatch: sp, set: *p.PatchSetName, at: fmt.Sprintf("%s (patch set %s, patch %d)", pat, *p.PatchSetName, k)})
		}
	}
	return out, nil
}
