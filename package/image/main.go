// Command image writes a runtime image tarball for one static binary
// without Docker: an empty base, one layer holding the binary, and a config
// whose entrypoint is the binary and whose user is non-root. crossplane
// xpkg build --embed-runtime-image-tarball takes its output.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
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
	var ports portList
	flag.Var(&ports, "port", "port the image exposes (repeatable)")
	flag.Parse()
	if err := run(*bin, *into, *out, *tag, *user, ports); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type portList []string

func (p *portList) String() string     { return fmt.Sprint(*p) }
func (p *portList) Set(s string) error { *p = append(*p, s); return nil }

func run(bin, into, out, tag, user string, ports []string) error {
	if bin == "" || out == "" || tag == "" {
		return fmt.Errorf("--binary, --out and --tag are required")
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
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
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
