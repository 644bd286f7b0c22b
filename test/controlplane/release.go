package controlplane

// Earlier releases, for the version-skew scenarios: RELEASES.md records
// each release's commit, the repository's history holds its source, and a
// control plane can run its function or its provider beside this build's.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	xperrors "github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A Release is one row of RELEASES.md.
type Release struct {
	Version, Commit string
}

// releaseRow is a row of RELEASES.md's table: | version | commit | ...
var releaseRow = regexp.MustCompile("^\\|\\s*(v\\d+\\.\\d+\\.\\d+\\S*)\\s*\\|\\s*`?([0-9a-f]{40})`?\\s*\\|")

// Releases reads RELEASES.md's table, newest first as it is written.
func Releases(root string) ([]Release, error) {
	raw, err := os.ReadFile(filepath.Join(root, "RELEASES.md")) //nolint:gosec // the repository's own file
	if err != nil {
		return nil, xperrors.Wrap(err, "cannot read RELEASES.md")
	}
	var out []Release
	s := bufio.NewScanner(bytes.NewReader(raw))
	for s.Scan() {
		if m := releaseRow.FindStringSubmatch(strings.TrimSpace(s.Text())); m != nil {
			out = append(out, Release{Version: m[1], Commit: m[2]})
		}
	}
	if len(out) == 0 {
		return nil, xperrors.New("RELEASES.md records no release (| vX.Y.Z | <40-hex commit> | …)")
	}
	return out, nil
}

// Checkout writes the source tree of commit into dir, from the
// repository's history (git archive): the clone must hold the commit, as a
// clone of the repository does.
func Checkout(ctx context.Context, root, commit, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit) //nolint:gosec // a commit RELEASES.md records
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return xperrors.Wrap(err, "cannot run git archive")
	}
	if err := cmd.Start(); err != nil {
		return xperrors.Wrap(err, "cannot run git archive")
	}
	if err := untar(out, dir); err != nil {
		_ = cmd.Wait()
		return xperrors.Wrapf(err, "cannot unpack commit %s", commit)
	}
	if err := cmd.Wait(); err != nil {
		return xperrors.Wrapf(err, "the repository's history has no commit %s (a shallow clone?): %s", commit, stderr.String())
	}
	return nil
}

// untar writes the files of a tar stream under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name)) //nolint:gosec // git archive of our own repository
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o750); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600) //nolint:gosec // see above
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // our own repository's files
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
}

// buildPackages builds the packages of Kausality whose source is not the
// repository's (an earlier release's) into the control plane's folder,
// with the pinned CLI: the suite's package runtime is External, so they
// carry no runtime image.
func (c *ControlPlane) buildPackages(ctx context.Context) error {
	c.packageFiles = map[string]string{}
	empty := filepath.Join(c.Dir, "no-examples")
	if err := os.MkdirAll(empty, 0o750); err != nil {
		return err
	}
	for _, p := range []struct{ file, source, dir string }{
		{"function-kausality.xpkg", c.sources.FunctionSource, "function"},
		{"provider-kausality.xpkg", c.sources.ProviderSource, "provider"},
	} {
		if p.source == c.Root {
			continue
		}
		out := filepath.Join(c.Dir, p.file)
		cmd := exec.CommandContext(ctx, c.Tools.Crossplane, "xpkg", "build", "--package-root", filepath.Join(p.source, "package", p.dir), "--examples-root", empty, "--package-file", out) //nolint:gosec // the pinned CLI
		if b, err := cmd.CombinedOutput(); err != nil {
			return xperrors.Wrapf(err, "cannot build %s from %s: %s", p.file, p.source, b)
		}
		c.packageFiles[p.file] = out
	}
	return nil
}
