// Package measure measures processes a benchmark starts: their resident
// memory sampled while they run, their CPU time and their children's, and
// the Prometheus metrics they serve. Benchmarks report what it measures
// as ratios against a reference process measured the same way in the same
// run (test/gatebench).
package measure

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A Process is a binary running as its own process, so its resident memory
// is its own. It serves Prometheus metrics and a readiness probe on the
// addresses Start gives it (--metrics-address, --health-address).
type Process struct {
	cmd *exec.Cmd
	log string
	// Metrics is host:port of its /metrics.
	Metrics string
	health  string
	// Pprof is host:port of its /debug/pprof, when the caller gave it one.
	Pprof string

	mu      sync.Mutex
	peakRSS int64 // highest VmRSS sampled, bytes
	stop    chan struct{}
	done    chan struct{}
}

// Start starts bin with --metrics-address and --health-address on free
// ports and args, its output to the file log and env added to this
// process's environment, and waits until it is ready (a minute at most).
// It samples the process's VmRSS every 50ms until stopped, and kills it
// should this process die first.
func Start(bin, log string, env []string, args ...string) (*Process, error) {
	metrics, err := FreeAddress()
	if err != nil {
		return nil, err
	}
	health, err := FreeAddress()
	if err != nil {
		return nil, err
	}
	p := &Process{log: log, Metrics: metrics, health: health, stop: make(chan struct{}), done: make(chan struct{})}
	logf, err := os.Create(log) //nolint:gosec // the caller's own log
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, append([]string{"--metrics-address", metrics, "--health-address", health}, args...)...) //nolint:gosec // our own binaries
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("cannot start %s: %w", filepath.Base(bin), err)
	}
	_ = logf.Close()
	go p.sample()

	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + health + "/readyz") //nolint:noctx // a local probe
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%s is not ready after a minute: %v\n%s", filepath.Base(bin), err, p.Log()) //nolint:errorlint // err is nil on a non-200 answer
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p, nil
}

// FreeAddress is a free 127.0.0.1:port to listen on.
func FreeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("cannot find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func (p *Process) sample() {
	defer close(p.done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if rss, err := p.Status("VmRSS"); err == nil {
			p.mu.Lock()
			p.peakRSS = max(p.peakRSS, rss)
			p.mu.Unlock()
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// Status reads a memory figure (VmRSS, VmHWM, RssAnon) of the process from
// /proc/<pid>/status, in bytes.
func (p *Process) Status(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		v, ok := strings.CutPrefix(s.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return kb << 10, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
}

// CPU is the CPU time (user and system) the process has used so far.
func (p *Process) CPU() time.Duration {
	cpu, _, _ := procStat(p.cmd.Process.Pid)
	return cpu
}

// RSS is the process's resident set now; Peak the highest it has been,
// by the kernel's high-water mark (VmHWM) or our samples, whichever is
// higher.
func (p *Process) RSS() (now, peak int64) {
	now, _ = p.Status("VmRSS")
	hwm, _ := p.Status("VmHWM")
	p.mu.Lock()
	defer p.mu.Unlock()
	return now, max(hwm, p.peakRSS, now)
}

// Scrape reads the process's Prometheus endpoint: each sample's value by
// its name and labels as exposed (Sum adds them up by label filters).
func (p *Process) Scrape() (map[string]float64, error) {
	resp, err := http.Get("http://" + p.Metrics + "/metrics") //nolint:noctx // a local scrape
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return Parse(resp.Body)
}

// Parse reads Prometheus's text format: each sample's value by its name
// and labels as exposed.
func Parse(r io.Reader) (map[string]float64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, nil
}

// Log is the process's log so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// Stop ends the process (SIGTERM, then SIGKILL after 10s).
func (p *Process) Stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-exited
		}
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// HeapProfile writes the process's heap profile, after a garbage
// collection, to file.
func (p *Process) HeapProfile(file string) error {
	resp, err := http.Get("http://" + p.Pprof + "/debug/pprof/heap?gc=1") //nolint:noctx // a local probe
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/heap: %s", resp.Status)
	}
	f, err := os.Create(file) //nolint:gosec // the benchmark's own flag
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
