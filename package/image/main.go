// Command image writes a runtime image tarball for one static binary
// without Docker: an empty base, one layer holding the binary, and a config
// whose entrypoint is the binary and whose user is non-root, labelled with
// the platform the binary was built for (linux/<arch>; it refuses a binary
// of another system or architecture). crossplane xpkg build
// --embed-runtime-image-tarball takes its output.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	bin := flag.String("binary", "", "static binary to put into the image")
	into := flag.String("path", "", "where the binary goes in the image (default /<basename>)")
	out := flag.String("out", "", "image tarball to write")
	tag := flag.String("tag", "", "reference recorded in the tarball, e.g. kausality.io/function-kausality:dev")
	user := flag.String("user", "65532:65532", "uid:gid the image runs as (non-root)")
	arch := flag.String("arch", "", "architecture the binary was built for (GOARCH: amd64, arm64); the image is linux/<arch>")
	var ports portList
	flag.Var(&ports, "port", "port the image exposes (repeatable)")
	flag.Parse()
	if err := run(*bin, *into, *out, *tag, *user, *arch, ports); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type portList []string

func (p *portList) String() string     { return fmt.Sprint(*p) }
func (p *portList) Set(s string) error { *p = append(*p, s); return nil }

// machines are the ELF machine each architecture's binaries carry.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkBinary refuses a binary that is not a Linux executable for arch:
// an image labelled linux/arm64 holding a darwin or amd64 binary installs
// and then crash-loops on every node.
func checkBinary(bin, arch string) error {
	want, ok := machines[arch]
	if !ok {
		return fmt.Errorf("--arch %q: want one of amd64, arm64", arch)
	}
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s is not a Linux (ELF) executable; build it with GOOS=linux: %w", bin, err)
	}
	defer func() { _ = f.Close() }()
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, not %s; build it with GOARCH=%s", bin, f.Machine, arch, arch)
	}
	return nil
}

func run(bin, into, out, tag, user, arch string, ports []string) error {
	if bin == "" || out == "" || tag == "" || arch == "" {
		return fmt.Errorf("--binary, --out, --tag and --arch are required")
	}
	if err := checkBinary(bin, arch); err != nil {
		return err
	}
	if into == "" {
		into = "/" + path.Base(bin)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", bin, err)
	}
	// A fixed modification time keeps the layer, and so the image digest,
	// the same for the same binary.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: into[1:], Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return fmt.Errorf("cannot make a layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Entrypoint = []string{into}
	cfg.Config.User = user
	cfg.Config.ExposedPorts = map[string]struct{}{}
	for _, p := range ports {
		cfg.Config.ExposedPorts[p+"/tcp"] = struct{}{}
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: time.Unix(0, 0)})
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("bad --tag: %w", err)
	}
	return tarball.WriteToFile(out, ref, img)
}
