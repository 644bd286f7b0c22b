package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// fill makes a release directory as make release leaves it before this
// command: one package and a plugin folder for linux/amd64 and
// windows/amd64.
func fill(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"function-kausality-amd64.xpkg":                         "package",
		"kubectl-kausality_linux_amd64/kubectl-kausality":       "linux binary",
		"kubectl-kausality_linux_amd64/README.md":               "readme",
		"kubectl-kausality_windows_amd64/kubectl-kausality.exe": "windows binary",
		"kubectl-kausality_windows_amd64/README.md":             "readme",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFinish(t *testing.T) {
	dir := fill(t)
	if err := Finish(dir, "v0.1.0", "https://example.com/releases/v0.1.0/"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kausality.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m KrewPlugin
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("the krew manifest does not parse: %v", err)
	}
	if m.Kind != "Plugin" || m.Metadata.Name != "kausality" || m.Spec.Version != "v0.1.0" {
		t.Errorf("manifest %s %s %s, want Plugin kausality v0.1.0", m.Kind, m.Metadata.Name, m.Spec.Version)
	}
	sums := readChecksums(t, dir)
	want := map[string]struct{ os, bin, content string }{
		"kubectl-kausality_linux_amd64":   {"linux", "kubectl-kausality", "linux binary"},
		"kubectl-kausality_windows_amd64": {"windows", "kubectl-kausality.exe", "windows binary"},
	}
	if len(m.Spec.Platforms) != len(want) {
		t.Fatalf("%d platforms, want %d", len(m.Spec.Platforms), len(want))
	}
	for _, p := range m.Spec.Platforms {
		folder := strings.TrimSuffix(filepath.Base(p.URI), ".tar.gz")
		w, ok := want[folder]
		if !ok {
			t.Errorf("unexpected platform %s", p.URI)
			continue
		}
		if p.URI != "https://example.com/releases/v0.1.0/"+folder+".tar.gz" {
			t.Errorf("uri %s", p.URI)
		}
		if diff := cmp.Diff(map[string]string{"os": w.os, "arch": "amd64"}, p.Selector.MatchLabels); diff != "" {
			t.Errorf("%s selector (-want +got):\n%s", folder, diff)
		}
		if p.Bin != w.bin || p.SHA256 != sums[folder+".tar.gz"] {
			t.Errorf("%s: bin %s sha %s, want %s and the checksum %s", folder, p.Bin, p.SHA256, w.bin, sums[folder+".tar.gz"])
		}
		got := untar(t, filepath.Join(dir, folder+".tar.gz"))
		if got[folder+"/"+w.bin] != w.content || got[folder+"/README.md"] != "readme" {
			t.Errorf("%s holds %v", folder, got)
		}
		if _, err := os.Stat(filepath.Join(dir, folder)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("folder %s is left: %v", folder, err)
		}
	}
	for _, f := range []string{"function-kausality-amd64.xpkg", "kausality.yaml"} {
		if sums[f] == "" {
			t.Errorf("checksums.txt has no line for %s: %v", f, sums)
		}
	}

	// The same files make the same archives, whenever and wherever.
	again := fill(t)
	if err := Finish(again, "v0.1.0", "https://example.com/releases/v0.1.0/"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sums, readChecksums(t, again)); diff != "" {
		t.Errorf("a second release of the same files differs (-first +second):\n%s", diff)
	}
}

func TestFinishRefuses(t *testing.T) {
	cases := map[string]struct {
		version, url string
		empty        bool
		want         string
	}{
		"NoVersion":   {version: "dev", url: "https://x", want: "not vMAJOR.MINOR.PATCH"},
		"NoV":         {version: "0.1.0", url: "https://x", want: "not vMAJOR.MINOR.PATCH"},
		"NoURL":       {version: "v0.1.0", want: "--url"},
		"NoPlatforms": {version: "v0.1.0", url: "https://x", empty: true, want: "no kubectl-kausality_<os>_<arch> folder"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if !tc.empty {
				dir = fill(t)
			}
			err := Finish(dir, tc.version, tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Finish: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func readChecksums(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, file, ok := strings.Cut(l, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("checksums.txt line %q is not sha256sum's format", l)
		}
		out[file] = sum
	}
	for file, s := range out {
		if got, err := sum(filepath.Join(dir, file)); err != nil || got != s {
			t.Errorf("checksums.txt says %s for %s, the file has %s (%v)", s, file, got, err)
		}
	}
	return out
}

func untar(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file) //nolint:gosec // the test's own file
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}
