//go:build release

package xpkg

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"sigs.k8s.io/yaml"
)

// The release make release-check builds (make release VERSION=…) and
// publishes to a registry of its own: what a user installs and downloads.
var (
	archs     = []string{"amd64", "arm64"}
	platforms = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64"}
)

// TestReleasePackages: each package file of the release is a Linux image
// for its own architecture, and make publish pushes them as one package
// whose index names both platforms, as published functions and providers
// are.
func TestReleasePackages(t *testing.T) {
	t.Setenv("XPKG_DIR", releaseDir(t))
	for _, pkgName := range []string{"function-kausality", "provider-kausality"} {
		for _, arch := range archs {
			p := open(t, pkgName+"-"+arch+".xpkg")
			p.checkRuntime(t, "/"+pkgName, arch)
		}
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/kausality-io"
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	cmd := exec.Command("make", "--no-print-directory", "publish", "REGISTRY="+reg, "VERSION="+os.Getenv("VERSION")) //nolint:gosec // the repository's own Makefile
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "DOCKER_CONFIG="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make publish: %v\n%s", err, out)
	}
	for _, pkgName := range []string{"function-kausality", "provider-kausality"} {
		ref := reg + "/" + pkgName + ":" + os.Getenv("VERSION")
		m := index(t, srv.URL, strings.TrimPrefix(reg, strings.TrimPrefix(srv.URL, "http://")+"/")+"/"+pkgName, os.Getenv("VERSION"))
		var got []string
		for _, d := range m.Manifests {
			got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		}
		slices.Sort(got)
		if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
			t.Errorf("%s's platforms = %v, want %v", ref, got, want)
		}
	}
}

// TestReleasePlugin: the release has kubectl-kausality for every platform,
// and its krew manifest points at each archive with the archive's
// checksum.
func TestReleasePlugin(t *testing.T) {
	dir := releaseDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatalf("no checksums.txt (make release VERSION=… first): %v", err)
	}
	sums := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, file, _ := strings.Cut(l, "  ")
		sums[file] = sum
	}
	var m struct {
		Spec struct {
			Version   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string }
				URI      string
				SHA256   string
			}
		}
	}
	mb, err := os.ReadFile(filepath.Join(dir, "kausality.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(mb, &m); err != nil {
		t.Fatalf("the krew manifest does not parse: %v", err)
	}
	if m.Spec.Version != os.Getenv("VERSION") {
		t.Errorf("krew manifest version %q, want %q", m.Spec.Version, os.Getenv("VERSION"))
	}
	var got []string
	for _, p := range m.Spec.Platforms {
		plat := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		got = append(got, plat)
		file := filepath.Base(p.URI)
		if file != "kubectl-kausality_"+strings.ReplaceAll(plat, "/", "_")+".tar.gz" || sums[file] == "" || sums[file] != p.SHA256 {
			t.Errorf("%s: uri %s, sha256 %s; checksums.txt says %q", plat, p.URI, p.SHA256, sums[file])
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, platforms) {
		t.Errorf("krew platforms = %v, want %v", got, platforms)
	}
}

// releaseDir is where make release-check built the release.
func releaseDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RELEASE_DIR")
	if dir == "" || os.Getenv("VERSION") == "" {
		t.Fatal("RELEASE_DIR and VERSION are not set: make release-check runs this test")
	}
	return dir
}

// index is the OCI image index the registry at url serves for repo:tag,
// read as Crossplane's package manager reads it.
func index(t *testing.T, url, repo, tag string) (m struct {
	MediaType string
	Manifests []struct {
		Platform struct{ OS, Architecture string }
	}
}) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s:%s: %s", repo, tag, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s:%s: %v", repo, tag, err)
	}
	if !strings.Contains(m.MediaType, "index") && !strings.Contains(m.MediaType, "manifest.list") {
		t.Fatalf("%s:%s is a %s, not a multi-platform package", repo, tag, m.MediaType)
	}
	return m
}
