package controlplane

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"github.com/google/go-containerregistry/pkg/registry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/render"
)

// A pkg is one package the control plane installs.
type pkg struct {
	file     string // under _output, built by make xpkg
	repo     string // repository in the registry
	tag      string
	name     string // the Function or Provider object
	provider bool
	// readme: the README's install pushes and installs it
	// (installFromReadme), under the name the README gives.
	readme bool
}

// Where the README's install pushes Kausality's packages in the suite's
// registry: <registry> is the registry and this repository, <tag> the tag.
const (
	kausalityRepo = "kausality-io"
	kausalityTag  = "v0.1.0"
)

// The packages the scenarios install, named as in their Compositions.
var packages = []pkg{
	{file: "function-patch-and-transform.xpkg", repo: "crossplane-contrib/function-patch-and-transform", tag: "v0.10.7", name: FunctionPatchTransform},
	{file: "function-auto-ready.xpkg", repo: "crossplane-contrib/function-auto-ready", tag: "v0.6.0", name: FunctionAutoReady},
	{file: "function-cel-filter.xpkg", repo: "crossplane-contrib/function-cel-filter", tag: "v0.2.0", name: FunctionCelFilter},
	{file: "function-go-templating.xpkg", repo: "crossplane-contrib/function-go-templating", tag: "v0.11.2", name: FunctionGoTemplating},
	{file: "function-sequencer.xpkg", repo: "crossplane-contrib/function-sequencer", tag: "v0.5.0", name: FunctionSequencer},
	{file: "function-kausality.xpkg", repo: kausalityRepo + "/function-kausality", tag: kausalityTag, name: FunctionKausality, readme: true},
	{file: "provider-kausality.xpkg", repo: kausalityRepo + "/provider-kausality", tag: kausalityTag, name: ProviderKausality, provider: true, readme: true},
	{file: "provider-recorder.xpkg", repo: "kausality-io/provider-recorder", tag: "v0.1.0", name: ProviderRecorder, provider: true},
}

// Names of the installed packages.
const (
	FunctionKausality      = render.FunctionKausality
	FunctionPatchTransform = render.FunctionPatchTransform
	FunctionAutoReady      = render.FunctionAutoReady
	FunctionCelFilter      = render.FunctionCelFilter
	FunctionGoTemplating   = render.FunctionGoTemplating
	FunctionSequencer      = render.FunctionSequencer
	ProviderKausality      = "provider-kausality"
	ProviderRecorder       = "provider-recorder"
)

// pushPackages serves an OCI registry in this process on 127.0.0.1 (plain
// HTTP, which Crossplane and the CLI assume for loopback registries) and
// pushes every package but Kausality's (the README's install pushes those)
// to it with `crossplane xpkg push`, as their releases did.
func (c *ControlPlane) pushPackages(ctx context.Context) error {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	c.stop = append(c.stop, srv.Close)
	c.Registry = strings.TrimPrefix(srv.URL, "http://")
	for _, p := range packages {
		if p.readme {
			continue
		}
		file := filepath.Join(c.Root, "_output", p.file)
		if _, err := os.Stat(file); err != nil {
			return errors.Errorf("%s is missing: run `make xpkg` (make test does) first", file)
		}
		cmd := exec.CommandContext(ctx, c.Tools.Crossplane, "xpkg", "push", "-f", file, c.ref(p)) //nolint:gosec // the pinned CLI
		cmd.Env = append(os.Environ(), "HOME="+c.Dir, "DOCKER_CONFIG="+filepath.Join(c.Dir, "docker"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return errors.Wrapf(err, "cannot push %s: %s", file, out)
		}
	}
	return nil
}

func (c *ControlPlane) ref(p pkg) string { return fmt.Sprintf("%s/%s:%s", c.Registry, p.repo, p.tag) }

// installPackages installs Kausality with the README's commands and the
// other packages as Crossplane objects, and waits until Crossplane reports
// every one Healthy under the name the suite expects: an install the
// README names otherwise fails here. Crossplane checks each package's
// spec.crossplane.version against its own version (make tools builds core
// with it).
func (c *ControlPlane) installPackages(ctx context.Context) error {
	if err := c.installFromReadme(ctx); err != nil {
		return err
	}
	for _, p := range packages {
		if p.readme {
			continue
		}
		spec := pkgv1.PackageSpec{Package: c.ref(p)}
		var o client.Object
		if p.provider {
			o = &pkgv1.Provider{Spec: pkgv1.ProviderSpec{PackageSpec: spec}}
		} else {
			o = &pkgv1.Function{Spec: pkgv1.FunctionSpec{PackageSpec: spec}}
		}
		o.SetName(p.name)
		if err := c.admin.Create(ctx, o); err != nil {
			return errors.Wrapf(err, "cannot install %s", p.name)
		}
	}
	return until(ctx, 3*time.Minute, func() error {
		for _, p := range packages {
			var o interface {
				client.Object
				GetCondition(xpv2.ConditionType) xpv2.Condition
			}
			if p.provider {
				o = &pkgv1.Provider{}
			} else {
				o = &pkgv1.Function{}
			}
			if err := c.admin.Get(ctx, client.ObjectKey{Name: p.name}, o); err != nil {
				return err
			}
			if h := o.GetCondition(pkgv1.TypeHealthy); h.Status != "True" {
				return errors.Errorf("package %s is not healthy: %s %s", p.name, h.Reason, h.Message)
			}
		}
		return nil
	})
}
