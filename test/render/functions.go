package render

// The function processes a render runs against: which functions there
// are, where their binaries are, and the harness that starts them on free
// ports and points Functions files at them.

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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"sigs.k8s.io/yaml"
)

// Names of the functions the harness runs, as Compositions' functionRefs
// and Functions files name them.
const (
	FunctionKausality      = "function-kausality"
	FunctionPatchTransform = "function-patch-and-transform"
	FunctionAutoReady      = "function-auto-ready"
	FunctionCelFilter      = "function-cel-filter"
	FunctionGoTemplating   = "function-go-templating"
	FunctionSequencer      = "function-sequencer"
)

// Tools are the binaries `make tools` builds into .cache/bin.
type Tools struct {
	Crossplane     string // the crossplane CLI
	CrossplaneCore string // the Crossplane core binary, for --crossplane-binary
	// Functions are the published functions the examples and the corpus
	// compose with, by Function name. function-kausality is not among
	// them: the harness builds it from this repository.
	Functions map[string]string
}

// FindTools locates the tools under root/.cache/bin and says how to build
// them when one is missing.
func FindTools(root string) (Tools, error) {
	bin := filepath.Join(root, ".cache", "bin")
	t := Tools{
		Crossplane:     filepath.Join(bin, "crossplane"),
		CrossplaneCore: filepath.Join(bin, "crossplane-core"),
		Functions:      map[string]string{},
	}
	paths := []string{t.Crossplane, t.CrossplaneCore}
	for _, name := range []string{FunctionPatchTransform, FunctionAutoReady, FunctionCelFilter, FunctionGoTemplating, FunctionSequencer} {
		t.Functions[name] = filepath.Join(bin, name)
		paths = append(paths, t.Functions[name])
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return t, errors.Errorf("%s is missing: run `make tools` first", p)
		}
	}
	return t, nil
}

// Functions are the function processes StartFunctions started, each on a
// loopback port the operating system chose.
type Functions struct {
	procs []*exec.Cmd
	addrs map[string]string
	dir   string // where Functions files are written
}

// FixedTime is the clock the function runs with under the render harness,
// so golden files do not change with the time of day. Example timestamps
// sit just before it.
const FixedTime = "2026-11-22T12:00:00Z"

// FunctionOptions say how the functions run.
type FunctionOptions struct {
	// FixedTime pins function-kausality's clock (RFC 3339); empty runs it
	// on the real clock.
	FixedTime string
	// CertsDir holds tls.crt, tls.key and ca.crt: every function serves
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

// ExampleFunctions are the options the examples render with.
var ExampleFunctions = FunctionOptions{FixedTime: FixedTime}

// StartFunctions builds function-kausality from root/fn into dir and starts
// it and every function of t, each on a free loopback port, waiting until
// all listen.
func StartFunctions(ctx context.Context, root, dir string, t Tools, o FunctionOptions) (*Functions, error) {
	fnBin := filepath.Join(dir, FunctionKausality)
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
	bins := map[string]string{FunctionKausality: fnBin}
	for name, bin := range t.Functions {
		bins[name] = bin
	}
	names := make([]string, 0, len(bins))
	for name := range bins {
		names = append(names, name)
	}
	sort.Strings(names)
	f := &Functions{addrs: map[string]string{}, dir: dir}
	for _, name := range names {
		addr, err := FreeAddress()
		if err != nil {
			f.Stop()
			return nil, err
		}
		a := append(slices.Clone(creds), "--address", addr)
		if name == FunctionKausality {
			a = append(a, "--metrics-address", "")
			if o.LogDir != "" {
				a = append(a, "--debug")
			}
			if o.FixedTime != "" {
				a = append(a, "--fixed-time", o.FixedTime)
			}
		}
		if err := f.start(name, bins[name], addr, a, o.LogDir); err != nil {
			f.Stop()
			return nil, err
		}
	}
	return f, nil
}

func (f *Functions) start(name, bin, addr string, args []string, logDir string) error {
	cmd := exec.Command(bin, args...) //nolint:gosec // our own binaries
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if logDir != "" {
		lf, err := os.Create(filepath.Join(logDir, name+".log")) //nolint:gosec // a folder of the harness's
		if err != nil {
			return errors.Wrapf(err, "cannot create the log of %s", name)
		}
		cmd.Stdout, cmd.Stderr = lf, lf
	}
	// Die with the harness, so an interrupted render or demo never
	// leaves a function running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return errors.Wrapf(err, "cannot start %s", bin)
	}
	f.procs = append(f.procs, cmd)
	if err := waitListening(addr, 60*time.Second); err != nil {
		return errors.Wrapf(err, "%s did not start: %s", bin, logs.String())
	}
	f.addrs[name] = addr
	return nil
}

// Address is where the named function listens, or "" when it was not
// started.
func (f *Functions) Address(name string) string { return f.addrs[name] }

// File writes a Functions file, as crossplane render takes it, naming each
// function of names in the Development runtime at the address it listens
// on, and returns its path.
func (f *Functions) File(names ...string) (string, error) {
	var b strings.Builder
	for _, name := range names {
		addr := f.addrs[name]
		if addr == "" {
			return "", errors.Errorf("function %s was not started", name)
		}
		fmt.Fprintf(&b, "---\napiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: %s\n  annotations:\n    %s: Development\n    %s: %s\nspec:\n  package: xpkg.crossplane.io/harness/%s:v0.0.0\n",
			name, annotationRuntime, annotationTarget, addr, name)
	}
	p := filepath.Join(f.dir, "functions-"+strings.Join(names, "-")+".yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		return "", errors.Wrap(err, "cannot write the Functions file")
	}
	return p, nil
}

// The annotations by which crossplane render runs a function that is
// already running.
const (
	annotationRuntime = "render.crossplane.io/runtime"
	annotationTarget  = "render.crossplane.io/runtime-development-target"
)

// Rewrite writes a copy of the Functions file at path with every Function
// pointed at the address the harness started it on, and returns the copy's
// path. A Function the harness did not start is an error, so an example
// cannot name a function the tests never run.
func (f *Functions) Rewrite(path string) (string, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // the repository's own examples
	if err != nil {
		return "", errors.Wrap(err, "cannot read the Functions file")
	}
	objs, err := Objects(raw)
	if err != nil {
		return "", errors.Wrapf(err, "cannot parse %s", path)
	}
	var out bytes.Buffer
	for _, o := range objs {
		addr := f.addrs[o.GetName()]
		if addr == "" {
			return "", errors.Errorf("%s: Function %s is not one the harness runs", path, o.GetName())
		}
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[annotationRuntime], a[annotationTarget] = "Development", addr
		o.SetAnnotations(a)
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return "", errors.Wrapf(err, "cannot write Function %s", o.GetName())
		}
		out.WriteString("---\n")
		out.Write(y)
	}
	p := filepath.Join(f.dir, strings.ReplaceAll(strings.TrimPrefix(path, string(filepath.Separator)), string(filepath.Separator), "_"))
	if err := os.WriteFile(p, out.Bytes(), 0o600); err != nil {
		return "", errors.Wrapf(err, "cannot write the copy of %s", path)
	}
	return p, nil
}

// FreeAddress is a loopback address with a port the operating system
// reports free.
func FreeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.Wrap(err, "cannot find a free port")
	}
	defer l.Close() //nolint:errcheck // only its port is wanted
	return l.Addr().String(), nil
}

// CommonPorts are the ports Crossplane's, controller-runtime's and a
// provider's defaults listen on (metrics, health probes, webhooks).
var CommonPorts = []int{8080, 8081, 9443}

// Occupy listens on CommonPorts, on every address, where they are free,
// and returns what releases them. A test suite holds them while it runs:
// a part of the harness or of the product that listens on a fixed port
// instead of one the OS chose then fails at once, as it would on a
// machine where something else has them; one already taken is in the way
// just the same.
func Occupy() func() {
	var held []net.Listener
	for _, p := range CommonPorts {
		if l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(p))); err == nil {
			held = append(held, l)
		}
	}
	return func() {
		for _, l := range held {
			_ = l.Close()
		}
	}
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
