package controlplane

// The install as the README writes it: the suite installs Kausality by
// running the commands of the README's "Install" block, verbatim but for
// <registry> and <tag>, so the README cannot say what was never run.

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// installHeading is the README section whose first sh block is the install.
const installHeading = "## Install"

// ReadmeInstall is the commands of the README's install block, each split
// into words, comments dropped.
func ReadmeInstall(readme []byte) ([][]string, error) {
	s := bufio.NewScanner(bytes.NewReader(readme))
	var (
		section, block bool
		out            [][]string
	)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			if block {
				return nil, errors.New("the README's install block is not closed")
			}
			if section && len(out) > 0 {
				return out, nil
			}
			section = line == installHeading
		case section && !block && strings.HasPrefix(line, "```sh"):
			block = true
		case section && block && strings.HasPrefix(line, "```"):
			return out, nil
		case section && block:
			if i := strings.Index(line, "#"); i >= 0 {
				line = line[:i]
			}
			if f := strings.Fields(line); len(f) > 0 {
				out = append(out, f)
			}
		}
	}
	return nil, errors.Errorf("the README has no sh block under %q", installHeading)
}

// readmePlaceholders are what the README leaves to the user: the registry
// the packages are pushed to and the tag.
func (c *ControlPlane) readmePlaceholders() *strings.Replacer {
	return strings.NewReplacer("<registry>", c.Registry+"/"+kausalityRepo, "<tag>", kausalityTag)
}

// installFromReadme runs the README's install as the administrator: make
// xpkg (make test built the packages: the suite checks they are there),
// crossplane xpkg push and install with the pinned CLI, and kubectl apply
// -f as the suite applies a file.
func (c *ControlPlane) installFromReadme(ctx context.Context) error {
	readme, err := os.ReadFile(filepath.Join(c.Root, "README.md"))
	if err != nil {
		return errors.Wrap(err, "cannot read the README")
	}
	cmds, err := ReadmeInstall(readme)
	if err != nil {
		return err
	}
	if err := c.buildPackages(ctx); err != nil {
		return err
	}
	kc, err := c.Kubeconfig("admin")
	if err != nil {
		return err
	}
	r := c.readmePlaceholders()
	for _, words := range cmds {
		for i := range words {
			words[i] = r.Replace(words[i])
		}
		if err := c.runReadmeCommand(ctx, words, kc); err != nil {
			return errors.Wrapf(err, "README install: %s", strings.Join(words, " "))
		}
	}
	return nil
}

// readmeKind is a kind of command the README's install may hold, by how
// the suite runs it.
type readmeKind int

const (
	readmeUnknown readmeKind = iota
	readmeMakeXpkg
	readmeCrossplane
	readmeApply
)

// kindOf is how the suite runs words, a command of the README's install.
func kindOf(words []string) readmeKind {
	switch {
	case len(words) == 2 && words[0] == "make" && words[1] == "xpkg":
		return readmeMakeXpkg
	case len(words) > 2 && words[0] == "crossplane" && words[1] == "xpkg" && (words[2] == "push" || words[2] == "install"):
		return readmeCrossplane
	case len(words) == 4 && words[0] == "kubectl" && words[1] == "apply" && words[2] == "-f":
		return readmeApply
	}
	return readmeUnknown
}

// ReadmeCommand says how the suite runs words, a command of the README's
// install, or "" when it does not know the command. The doc tests
// (cmd/kubectl-kausality) count a README command as run only when this
// names how, so the two cannot drift apart.
func ReadmeCommand(words []string) string {
	switch kindOf(words) {
	case readmeMakeXpkg:
		return "make e2e and make test build the packages first (their xpkg prerequisite); the suite checks they are there"
	case readmeCrossplane:
		return "the scenario suite runs it with the pinned crossplane CLI (test/controlplane/readme.go)"
	case readmeApply:
		return "the scenario suite applies the file as kubectl apply -f does (test/controlplane/readme.go)"
	}
	return ""
}

// runReadmeCommand runs one command of the README's install.
func (c *ControlPlane) runReadmeCommand(ctx context.Context, words []string, kubeconfig string) error {
	switch kindOf(words) {
	case readmeMakeXpkg:
		for _, p := range packages {
			if p.readme {
				if _, err := os.Stat(filepath.Join(c.Root, "_output", p.file)); err != nil {
					return errors.Errorf("%s is missing: run `make xpkg` (make test does) first", p.file)
				}
			}
		}
		return nil
	case readmeCrossplane:
		args := slices.Clone(words[1:])
		if i := slices.Index(args, "-f"); words[2] == "push" && i >= 0 && i+1 < len(args) {
			// An earlier release's package, where the control plane runs one.
			if f, ok := c.packageFiles[filepath.Base(args[i+1])]; ok {
				args[i+1] = f
			}
		}
		cmd := exec.CommandContext(ctx, c.Tools.Crossplane, args...) //nolint:gosec // the pinned CLI, as the README runs it
		cmd.Dir = c.Root
		cmd.Env = append(os.Environ(), "HOME="+c.Dir, "DOCKER_CONFIG="+filepath.Join(c.Dir, "docker"), "KUBECONFIG="+kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			return errors.Wrapf(err, "%s", out)
		}
		return nil
	case readmeApply:
		// The install manifest is the provider's: its release's.
		return c.ApplyFile(ctx, filepath.Join(c.sources.ProviderSource, words[3]))
	}
	return errors.New("the suite does not know how to run this command: teach test/controlplane/readme.go, or write the install as the suite runs it")
}
