// Command release finishes a release directory that make release filled
// with the packages and one folder of kubectl-kausality per platform
// (kubectl-kausality_<os>_<arch>): it packs each folder into a .tar.gz
// that is the same for the same files on any host, writes the krew plugin
// manifest (kausality.yaml) that points at the archives, and writes
// checksums.txt over everything a user downloads. It is Go, not tar and
// sha256sum, so that a release built on macOS is the release built on
// Linux.
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Plugin is the plugin's name in krew: kubectl krew install kausality.
const Plugin = "kausality"

// binary is the plugin's executable in every archive.
const binary = "kubectl-kausality"

// semver is the release version krew and Crossplane's package manager
// both accept: vMAJOR.MINOR.PATCH with an optional pre-release.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

func main() {
	version := flag.String("version", "", "the release version, vX.Y.Z")
	url := flag.String("url", "", "where the release's archives are downloaded from (the krew manifest's URIs)")
	dir := flag.String("dir", "", "the release directory make release filled")
	flag.Parse()
	if err := Finish(*dir, *version, *url); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// Finish packs every plugin folder in dir, and writes the krew manifest
// and the checksums.
func Finish(dir, version, url string) error {
	if !semver.MatchString(version) {
		return fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH: run make release VERSION=v0.1.0", version)
	}
	if url == "" {
		return fmt.Errorf("--url is required")
	}
	folders, err := filepath.Glob(filepath.Join(dir, binary+"_*_*"))
	if err != nil {
		return fmt.Errorf("cannot list the plugin folders in %s: %w", dir, err)
	}
	folders = slices.DeleteFunc(folders, func(f string) bool { fi, err := os.Stat(f); return err != nil || !fi.IsDir() })
	if len(folders) == 0 {
		return fmt.Errorf("no %s_<os>_<arch> folder in %s", binary, dir)
	}
	slices.Sort(folders)
	m := manifest(version)
	for _, f := range folders {
		p, err := pack(f)
		if err != nil {
			return err
		}
		m.Spec.Platforms = append(m.Spec.Platforms, platformOf(filepath.Base(f), strings.TrimRight(url, "/"), p))
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("cannot write the krew manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, Plugin+".yaml"), b, 0o644); err != nil { //nolint:gosec // a release artifact everyone reads
		return fmt.Errorf("cannot write the krew manifest: %w", err)
	}
	return checksums(dir)
}

// pack writes folder's files as folder.tar.gz, with the folder's name as
// the archive's top directory, fixed times and owners, and removes the
// folder; it returns the archive's SHA-256.
func pack(folder string) (string, error) {
	entries, err := os.ReadDir(folder)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", folder, err)
	}
	out := folder + ".tar.gz"
	f, err := os.Create(out) //nolint:gosec // the release directory the caller names
	if err != nil {
		return "", fmt.Errorf("cannot create %s: %w", out, err)
	}
	defer func() { _ = f.Close() }()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	top := filepath.Base(folder)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(folder, e.Name()))
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %w", e.Name(), err)
		}
		mode := int64(0o644)
		if strings.HasPrefix(e.Name(), binary) {
			mode = 0o755
		}
		h := &tar.Header{Name: top + "/" + e.Name(), Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return "", fmt.Errorf("cannot write %s: %w", out, err)
		}
		if _, err := tw.Write(data); err != nil {
			return "", fmt.Errorf("cannot write %s: %w", out, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("cannot write %s: %w", out, err)
	}
	if err := gz.Close(); err != nil {
		return "", fmt.Errorf("cannot write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("cannot write %s: %w", out, err)
	}
	if err := os.RemoveAll(folder); err != nil {
		return "", fmt.Errorf("cannot remove %s: %w", folder, err)
	}
	return sum(out)
}

// checksums writes checksums.txt in sha256sum's format over the release's
// packages, archives and krew manifest.
func checksums(dir string) error {
	var lines []string
	for _, pattern := range []string{"*.xpkg", "*.tar.gz", Plugin + ".yaml"} {
		files, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return fmt.Errorf("cannot list %s: %w", pattern, err)
		}
		slices.Sort(files)
		for _, f := range files {
			s, err := sum(f)
			if err != nil {
				return err
			}
			lines = append(lines, s+"  "+filepath.Base(f))
		}
	}
	return os.WriteFile(filepath.Join(dir, "checksums.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644) //nolint:gosec // a release artifact everyone reads
}

func sum(file string) (string, error) {
	f, err := os.Open(file) //nolint:gosec // the release directory the caller names
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", file, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("cannot read %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
