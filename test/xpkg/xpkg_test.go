// Package xpkg checks the built packages the way Crossplane reads them: an
// OCI image tarball whose package layer holds package.yaml (meta object,
// CRDs, webhook configurations) and whose runtime layers and config start
// the binary as a non-root user. make xpkg builds them; make test builds
// them before running this.
package xpkg

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kausality-io/kausality-crossplane/provider/policycontroller"
)

// pkg is what a test needs of one .xpkg.
type pkg struct {
	objects []*unstructured.Unstructured
	config  struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			Entrypoint []string
			User       string
			Labels     map[string]string
		} `json:"config"`
	}
	files map[string]bool // every path in every layer
	// entrypoint is the content of the file the image starts.
	entrypoint []byte
}

func open(t *testing.T, name string) *pkg {
	t.Helper()
	dir := os.Getenv("XPKG_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "_output")
	}
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("cannot read package %s (build it with 'make xpkg'): %v", name, err)
	}
	entries := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not a tarball: %v", name, err)
		}
		b, _ := io.ReadAll(tr)
		entries[h.Name] = b
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s has no single-image manifest.json: %v", name, err)
	}
	p := &pkg{files: map[string]bool{}}
	if err := json.Unmarshal(entries[manifest[0].Config], &p.config); err != nil {
		t.Fatalf("%s: bad image config: %v", name, err)
	}
	for _, l := range manifest[0].Layers {
		zr, err := gzip.NewReader(bytes.NewReader(entries[l]))
		if err != nil {
			t.Fatalf("%s: layer %s: %v", name, l, err)
		}
		lr := tar.NewReader(zr)
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", name, l, err)
			}
			p.files["/"+strings.TrimPrefix(h.Name, "/")] = true
			if ep := p.config.Config.Entrypoint; len(ep) == 1 && "/"+strings.TrimPrefix(h.Name, "/") == ep[0] {
				p.entrypoint, _ = io.ReadAll(lr)
				continue
			}
			if h.Name != "package.yaml" {
				continue
			}
			d := utilyaml.NewYAMLReader(bufio.NewReader(lr))
			for {
				doc, err := d.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s: package.yaml: %v", name, err)
				}
				u := &unstructured.Unstructured{}
				if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
					t.Fatalf("%s: package.yaml: %v", name, err)
				}
				if len(u.Object) > 0 {
					p.objects = append(p.objects, u)
				}
			}
		}
	}
	return p
}

// machines are the ELF machine each architecture's binaries carry.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func (p *pkg) names(kind string) []string {
	var out []string
	for _, o := range p.objects {
		if o.GetKind() == kind {
			out = append(out, o.GetName())
		}
	}
	return out
}

// checkRuntime checks the image starts binary, a Linux executable for
// arch, as a non-root user, and is labelled linux/arch.
func (p *pkg) checkRuntime(t *testing.T, binary, arch string) {
	t.Helper()
	if p.config.OS != "linux" || p.config.Architecture != arch {
		t.Errorf("image platform = %s/%s, want linux/%s", p.config.OS, p.config.Architecture, arch)
	}
	if f, err := elf.NewFile(bytes.NewReader(p.entrypoint)); err != nil {
		t.Errorf("%s is not a Linux (ELF) executable: %v", binary, err)
	} else if want := machines[arch]; f.Machine != want {
		t.Errorf("%s is built for %s, want %s (%s)", binary, f.Machine, want, arch)
	}
	c := p.config.Config
	if !slices.Equal(c.Entrypoint, []string{binary}) {
		t.Errorf("entrypoint = %v, want [%s]", c.Entrypoint, binary)
	}
	if !p.files[binary] {
		t.Errorf("no layer holds %s", binary)
	}
	if c.User == "" || c.User == "0" || strings.HasPrefix(c.User, "0:") || c.User == "root" {
		t.Errorf("image runs as %q, want a non-root user", c.User)
	}
	if p.files["/.up/examples.yaml"] {
		t.Error("the package carries the repository's example cases as package examples")
	}
}

func TestFunctionPackage(t *testing.T) {
	p := open(t, "function-kausality.xpkg")
	if got := p.objects[0]; got.GetKind() != "Function" || got.GetAPIVersion() != "meta.pkg.crossplane.io/v1beta1" || got.GetName() != "function-kausality" {
		t.Errorf("meta object = %s %s %s, want meta.pkg.crossplane.io/v1beta1 Function function-kausality", got.GetAPIVersion(), got.GetKind(), got.GetName())
	}
	if crds := p.names("CustomResourceDefinition"); !slices.Equal(crds, []string{"inputs.kausality.fn.crossplane.io"}) {
		t.Errorf("CRDs = %v, want the function input", crds)
	}
	p.checkRuntime(t, "/function-kausality", runtime.GOARCH)
}

func TestProviderPackage(t *testing.T) {
	p := open(t, "provider-kausality.xpkg")
	if got := p.objects[0]; got.GetKind() != "Provider" || got.GetAPIVersion() != "meta.pkg.crossplane.io/v1" || got.GetName() != "provider-kausality" {
		t.Errorf("meta object = %s %s %s, want meta.pkg.crossplane.io/v1 Provider provider-kausality", got.GetAPIVersion(), got.GetKind(), got.GetName())
	}
	crds := p.names("CustomResourceDefinition")
	slices.Sort(crds)
	if want := []string{"allowancepolicies.kausality.io", "upgradeallowances.kausality.io"}; !slices.Equal(crds, want) {
		t.Errorf("CRDs = %v, want %v", crds, want)
	}
	if got := p.names("ValidatingWebhookConfiguration"); !slices.Equal(got, []string{"provider-kausality"}) {
		t.Errorf("webhook configurations = %v, want [provider-kausality]", got)
	}
	for _, o := range p.objects {
		if o.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		if len(hooks) != 1 {
			t.Fatalf("webhooks = %v, want one", hooks)
		}
		path, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "service", "path")
		if path != policycontroller.PathPolicies {
			t.Errorf("policy webhook path = %q, want %s (the provider serves it)", path, policycontroller.PathPolicies)
		}
	}
	p.checkRuntime(t, "/provider-kausality", runtime.GOARCH)
}
