package controlplane

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fixtureRoots are the folders whose objects the scenario suite applies to
// its one control plane, from tests that run in parallel, relative to this
// package.
var fixtureRoots = []string{
	filepath.Join("..", "e2e", "testdata"),
	filepath.Join("..", "..", "examples", "corpus"),
}

// clusterScoped are the kinds of those objects that are cluster-scoped and
// applied under the name their file gives (the tests rename Compositions).
var clusterScoped = map[string]bool{
	"kausality.io/AllowancePolicy":                            true,
	"kausality.io/UpgradeAllowance":                           true,
	"apiextensions.crossplane.io/CompositeResourceDefinition": true,
}

// TestFixturesDoNotOverwriteEachOther: ControlPlane.Apply updates an object
// that exists, so two fixtures that give different cluster-scoped objects
// the same name overwrite each other, and which one a test sees depends on
// which parallel test applied last. The nested XR scenarios' AllowancePolicy
// and the corpus platform's were both named xplatforms, for two XPlatform
// kinds: whichever lost left its XPlatforms without a policy, so a write
// earned no allowance or trace, and the resize of a frozen XPlatform never
// reached its XStore (TestV2FreezeOnTheParentXRHoldsTheTree), or the
// corpus platform's traces started at Crossplane (TestCorpus).
func TestFixturesDoNotOverwriteEachOther(t *testing.T) {
	type seen struct {
		file string
		obj  *unstructured.Unstructured
	}
	byName := map[string]seen{}
	for _, root := range fixtureRoots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return err
			}
			raw, err := os.ReadFile(path) //nolint:gosec // the suite's own test data
			if err != nil {
				return err
			}
			objs, err := decodeAll(raw)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			for _, o := range objs {
				kind := o.GroupVersionKind().Group + "/" + o.GetKind()
				if !clusterScoped[kind] {
					continue
				}
				key := kind + " " + o.GetName()
				s, ok := byName[key]
				if !ok {
					byName[key] = seen{file: path, obj: o}
					continue
				}
				if !equality.Semantic.DeepEqual(s.obj.Object, o.Object) {
					t.Errorf("%s and %s both define %s %s, differently: the one applied last overwrites the other on the suite's shared control plane", s.file, path, o.GetKind(), o.GetName())
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(byName) == 0 {
		t.Fatalf("no fixtures found under %v", fixtureRoots)
	}
}

// TestReadmeInstall: the README's install block is what the suite runs,
// each command one it knows how to run, and it installs Kausality's
// packages under the names the suite, the Compositions and
// package/install expect, with the runtime configuration the install
// manifest defines.
func TestReadmeInstall(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := ReadmeInstall(readme)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, strings.Join(c, " "))
		if ReadmeCommand(c) == "" {
			t.Errorf("the suite does not know how to run the README's %q", strings.Join(c, " "))
		}
	}
	want := []string{
		"crossplane xpkg install function <registry>/function-kausality:<tag> " + FunctionKausality,
		"crossplane xpkg install provider <registry>/provider-kausality:<tag> " + ProviderKausality + " --runtime-config " + ProviderKausality,
		"kubectl apply -f package/install/provider-kausality.yaml",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("the README's install does not run %q: %q", w, got)
		}
	}
	if _, err := ReadmeInstall([]byte("# x\n## Install\nno block\n## Next\n")); err == nil {
		t.Error("a README without an install block parses")
	}
}

// TestReleasesRecorded: RELEASES.md records at least one release, and the
// repository's history holds each one's commit, which make skew builds.
func TestReleasesRecorded(t *testing.T) {
	rs, err := Releases(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		cmd := exec.Command("git", "cat-file", "-e", r.Commit+"^{commit}") //nolint:gosec // a commit RELEASES.md records
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("release %s: the repository has no commit %s: %v %s", r.Version, r.Commit, err, out)
		}
	}
}
