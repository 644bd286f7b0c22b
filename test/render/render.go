// Package render runs the examples through the real `crossplane render`: the
// crossplane CLI with the real Crossplane core binary (`--crossplane-binary`),
// against function-kausality and function-patch-and-transform started locally
// in the Development runtime, exactly as a user would test a Composition.
package render

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Root returns the repository root, found from the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "examples")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (a folder with go.mod and examples/)")
		}
		dir = parent
	}
}

// Tools are the binaries `make tools` builds into .cache/bin.
type Tools struct {
	Crossplane     string // the crossplane CLI
	CrossplaneCore string // the Crossplane core binary, for --crossplane-binary
	PatchTransform string // function-patch-and-transform
	// AutoReady and CelFilter are the other functions the real-world
	// corpus composes with.
	AutoReady, CelFilter string
}

// FindTools locates the tools under root/.cache/bin and says how to build
// them when one is missing.
func FindTools(root string) (Tools, error) {
	bin := filepath.Join(root, ".cache", "bin")
	t := Tools{
		Crossplane:     filepath.Join(bin, "crossplane"),
		CrossplaneCore: filepath.Join(bin, "crossplane-core"),
		PatchTransform: filepath.Join(bin, "function-patch-and-transform"),
		AutoReady:      filepath.Join(bin, "function-auto-ready"),
		CelFilter:      filepath.Join(bin, "function-cel-filter"),
	}
	for _, p := range []string{t.Crossplane, t.CrossplaneCore, t.PatchTransform, t.AutoReady, t.CelFilter} {
		if _, err := os.Stat(p); err != nil {
			return t, errors.Errorf("%s is missing: run `make tools` first", p)
		}
	}
	return t, nil
}

// Functions are the two function processes the examples' functions.yaml
// points at (Development runtime, localhost:9443 and :9444).
type Functions struct {
	procs []*exec.Cmd
}

// FixedTime is the clock the function runs with under the render harness,
// so golden files do not change with the time of day. Example timestamps
// sit just before it.
const FixedTime = "2026-11-22T12:00:00Z"

// Addresses the examples' functions.yaml names.
const (
	// KausalityAddress is where function-kausality listens.
	KausalityAddress = "localhost:9443"
	// PatchTransformAddress is where function-patch-and-transform listens.
	PatchTransformAddress = "localhost:9444"
)

// FunctionOptions say where the functions listen and which clock
// function-kausality runs with.
type FunctionOptions struct {
	KausalityAddress, PatchTransformAddress string
	// AutoReadyAddress and CelFilterAddress, when set, start
	// function-auto-ready and function-cel-filter there too.
	AutoReadyAddress, CelFilterAddress string
	// FixedTime pins function-kausality's clock (RFC 3339); empty runs it
	// on the real clock.
	FixedTime string
	// CertsDir holds tls.crt, tls.key and ca.crt: both functions serve
	// mTLS with them, as Crossplane core requires. Empty serves insecure,
	// for crossplane render.
	CertsDir string
	// LogDir, when set, receives each function's log (debug for
	// function-kausality) instead of memory.
	LogDir string
	// Race builds function-kausality with the race detector, which
	// reports to its log.
	Race bool
}

// ExampleFunctions are the options the examples' functions.yaml expects.
var ExampleFunctions = FunctionOptions{KausalityAddress: KausalityAddress, PatchTransformAddress: PatchTransformAddress, FixedTime: FixedTime}

// StartFunctions builds function-kausality from root/fn into dir and starts
// it and function-patch-and-transform, waiting until both listen.
func StartFunctions(ctx context.Context, root, dir string, t Tools, o FunctionOptions) (*Functions, error) {
	fnBin := filepath.Join(dir, "function-kausality")
	args := []string{"build", "-o", fnBin}
	if o.Race {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, "go", append(args, "./fn")...) //nolint:gosec // our own module
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, errors.Wrapf(err, "cannot build function-kausality: %s", out)
	}
	// Crossplane core dials functions with mTLS; crossplane render in the
	// Development runtime does not.
	creds := []string{"--insecure"}
	if o.CertsDir != "" {
		creds = []string{"--tls-certs-dir", o.CertsDir}
	}
	kausality := append(slices.Clone(creds), "--address", o.KausalityAddress, "--metrics-address", "")
	if o.LogDir != "" {
		kausality = append(kausality, "--debug")
	}
	if o.FixedTime != "" {
		kausality = append(kausality, "--fixed-time", o.FixedTime)
	}
	f := &Functions{}
	type proc struct {
		bin, addr string
		args      []string
	}
	procs := []proc{
		{fnBin, o.KausalityAddress, kausality},
		{t.PatchTransform, o.PatchTransformAddress, append(slices.Clone(creds), "--address", o.PatchTransformAddress)},
	}
	for _, other := range []struct{ bin, addr string }{{t.AutoReady, o.AutoReadyAddress}, {t.CelFilter, o.CelFilterAddress}} {
		if other.addr != "" {
			procs = append(procs, proc{other.bin, other.addr, append(slices.Clone(creds), "--address", other.addr)})
		}
	}
	for _, p := range procs {
		if c, err := net.DialTimeout("tcp", p.addr, 200*time.Millisecond); err == nil {
			_ = c.Close()
			f.Stop()
			return nil, errors.Errorf("%s is already in use; stop whatever listens there (another make render or demo?)", p.addr)
		}
		cmd := exec.Command(p.bin, p.args...) //nolint:gosec // our own binaries
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if o.LogDir != "" {
			lf, err := os.Create(filepath.Join(o.LogDir, filepath.Base(p.bin)+".log"))
			if err != nil {
				f.Stop()
				return nil, err
			}
			cmd.Stdout, cmd.Stderr = lf, lf
		}
		// Die with the harness, so an interrupted render or demo never
		// leaves a function holding its port.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			f.Stop()
			return nil, errors.Wrapf(err, "cannot start %s", p.bin)
		}
		f.procs = append(f.procs, cmd)
		if err := waitListening(p.addr, 60*time.Second); err != nil {
			f.Stop()
			return nil, errors.Wrapf(err, "%s did not start: %s", p.bin, logs.String())
		}
	}
	return f, nil
}

func waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			return c.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Errorf("nothing listens on %s after %s", addr, d)
}

// Stop ends the function processes.
func (f *Functions) Stop() {
	if f == nil {
		return
	}
	for _, p := range f.procs {
		_ = p.Process.Kill()
		_, _ = p.Process.Wait()
	}
}

// A Case is one rendering of an example: a folder under
// examples/<example>/cases/ holding xr.yaml and optionally observed.yaml,
// composition.yaml (else the example's), required.yaml (required
// resources besides the example's policies.yaml) and environment.json (the
// environment in the pipeline's context).
type Case struct {
	Example string
	Name    string
	Dir     string
	// XR and Observed, when set, replace the case's xr.yaml and
	// observed.yaml: a roll-out renders one case step by step.
	XR, Observed string
}

// ID is example/case.
func (c Case) ID() string { return c.Example + "/" + c.Name }

// Cases lists every case of every example, sorted.
func Cases(root string) ([]Case, error) {
	dirs, err := filepath.Glob(filepath.Join(root, "examples", "*", "cases", "*", "xr.yaml"))
	if err != nil {
		return nil, err
	}
	out := make([]Case, 0, len(dirs))
	for _, x := range dirs {
		d := filepath.Dir(x)
		out = append(out, Case{Example: filepath.Base(filepath.Dir(filepath.Dir(d))), Name: filepath.Base(d), Dir: d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

// Args are the `crossplane render` arguments for a case.
func (c Case) Args(t Tools) []string {
	ex := filepath.Dir(filepath.Dir(c.Dir))
	comp := filepath.Join(ex, "composition.yaml")
	if exists(filepath.Join(c.Dir, "composition.yaml")) {
		comp = filepath.Join(c.Dir, "composition.yaml")
	}
	xr := filepath.Join(c.Dir, "xr.yaml")
	if c.XR != "" {
		xr = c.XR
	}
	args := []string{"render", xr, comp, filepath.Join(ex, "functions.yaml"),
		"--crossplane-binary", t.CrossplaneCore, "--include-function-results", "--include-full-xr",
		"--required-resources", filepath.Join(ex, "policies.yaml")}
	if exists(filepath.Join(ex, "xrd.yaml")) {
		args = append(args, "--xrd", filepath.Join(ex, "xrd.yaml"))
	}
	if exists(filepath.Join(c.Dir, "required.yaml")) {
		args = append(args, "--required-resources", filepath.Join(c.Dir, "required.yaml"))
	}
	if exists(filepath.Join(c.Dir, "environment.json")) {
		// What function-environment-configs would put in the pipeline's
		// context on a cluster.
		args = append(args, "--context-files", "apiextensions.crossplane.io/environment="+filepath.Join(c.Dir, "environment.json"))
	}
	switch {
	case c.Observed != "":
		args = append(args, "--observed-resources", c.Observed)
	case exists(filepath.Join(c.Dir, "observed.yaml")):
		args = append(args, "--observed-resources", filepath.Join(c.Dir, "observed.yaml"))
	}
	return args
}

// Render runs `crossplane render` for the case and returns its output in
// Normalize's order, so golden files, the demo and `make render` agree.
func (c Case) Render(ctx context.Context, t Tools) ([]byte, error) {
	cmd := exec.CommandContext(ctx, t.Crossplane, c.Args(t)...) //nolint:gosec // our own tool
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.Wrapf(err, "crossplane %s: %s", strings.Join(c.Args(t), " "), stderr.String())
	}
	return Normalize(out), nil
}

// Normalize orders render output deterministically: the XR first, then the
// other documents sorted by their text. Crossplane emits some results (for
// example "Composed resource ... is not yet ready") in map order, which
// would make golden files flap.
func Normalize(out []byte) []byte {
	var docs []string
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		d := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(doc)), "---"))
		if d != "" {
			docs = append(docs, d)
		}
	}
	if len(docs) > 1 {
		sort.Strings(docs[1:])
	}
	return []byte("---\n" + strings.Join(docs, "\n---\n") + "\n")
}

// Objects splits render output into objects.
func Objects(out []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for i, doc := range bytes.Split(out, []byte("\n---")) {
		doc = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))
		if len(doc) == 0 {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, errors.Wrapf(err, "cannot parse document %d of render output", i)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Sprint is a short form of an object for messages.
func Sprint(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}
