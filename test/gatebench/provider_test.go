package gatebench

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

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
)

// provider is the provider binary (or the reference manager) running as
// its own process, so its resident memory is its own.
type provider struct {
	cmd     *exec.Cmd
	log     string
	metrics string // host:port of /metrics
	health  string // host:port of /readyz
	pprof   string // host:port of /debug/pprof

	mu      sync.Mutex
	peakRSS int64 // highest VmRSS sampled, bytes
	stop    chan struct{}
	done    chan struct{}
}

// startProvider starts the provider binary with the deployment's defaults
// (production logging, 30s discovery, no --debug) and waits until its
// webhook server is ready. It samples the process's VmRSS every 50ms
// until stopped.
func startProvider(name string) (*provider, error) {
	pprof, err := freeAddress()
	if err != nil {
		return nil, err
	}
	wo := env.WebhookInstallOptions
	p, err := startProcess(name, providerBin,
		"--webhook-port", strconv.Itoa(wo.LocalServingPort), "--webhook-certs", wo.LocalServingCertDir,
		"--pprof-address", pprof, "--crossplane-service-account", controlplane.CrossplaneSA)
	if err != nil {
		return nil, err
	}
	p.pprof = pprof
	return p, nil
}

// startReference starts the reference manager (see ./reference), the
// floor of the provider's memory figures, sampled the same way.
func startReference(name string) (*provider, error) {
	return startProcess(name, referenceBin)
}

// startProcess starts bin with args, its own metrics and health addresses
// and the test's kubeconfig, and waits until it is ready.
func startProcess(name, bin string, args ...string) (*provider, error) {
	metrics, err := freeAddress()
	if err != nil {
		return nil, err
	}
	health, err := freeAddress()
	if err != nil {
		return nil, err
	}
	p := &provider{log: filepath.Join(dir, name+".log"), metrics: metrics, health: health, stop: make(chan struct{}), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, append([]string{"--metrics-address", metrics, "--health-address", health}, args...)...) //nolint:gosec // our own binaries
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
	// GATEBENCH_PROVIDER_ENV adds variables for the measured processes
	// alone, to try runtime settings: GATEBENCH_PROVIDER_ENV='GOMEMLIMIT=32MiB GOGC=50'.
	p.cmd.Env = append(p.cmd.Env, strings.Fields(os.Getenv("GATEBENCH_PROVIDER_ENV"))...)
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

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("cannot find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func (p *provider) sample() {
	defer close(p.done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if rss, err := p.status("VmRSS"); err == nil {
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

// status reads a memory figure (VmRSS, VmHWM) of the provider process from
// /proc/<pid>/status, in bytes.
func (p *provider) status(field string) (int64, error) {
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
func (p *provider) CPU() time.Duration {
	cpu, _, _ := procStat(p.cmd.Process.Pid)
	return cpu
}

// procStat reads a process's CPU time (user and system; /proc counts
// clock ticks, 100 a second on Linux) and its parent from
// /proc/<pid>/stat.
func procStat(pid int) (cpu time.Duration, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name may hold spaces; the fields after it do not.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, ppid, nil
}

// controlPlaneCPU is the CPU time kube-apiserver and etcd, which envtest
// starts as children of this process, have used so far.
func controlPlaneCPU() time.Duration {
	entries, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if name := strings.TrimSpace(string(comm)); name != "kube-apiserver" && name != "etcd" {
			continue
		}
		if cpu, ppid, err := procStat(pid); err == nil && ppid == os.Getpid() {
			total += cpu
		}
	}
	return total
}

// RSS is the process's resident set now; Peak the highest it has been,
// by the kernel's high-water mark (VmHWM) or our samples, whichever is
// higher.
func (p *provider) RSS() (now, peak int64) {
	now, _ = p.status("VmRSS")
	hwm, _ := p.status("VmHWM")
	p.mu.Lock()
	defer p.mu.Unlock()
	return now, max(hwm, p.peakRSS, now)
}

// Metrics scrapes the provider's Prometheus endpoint and returns, for each
// metric name given, the sum of its samples whose labels contain every
// label filter (e.g. `controller="gate/`).
func (p *provider) Metrics() (map[string]float64, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics") //nolint:noctx // a local scrape
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
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

// Quiet waits until the gate controller has been idle for half a second:
// nothing queued, no worker busy, no reconcile finished.
func (p *provider) Quiet(deadline time.Time) error {
	var last float64 = -1
	idle := 0
	for idle < 5 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the gate controller is still busy")
		}
		time.Sleep(100 * time.Millisecond)
		m, err := p.Metrics()
		if err != nil {
			return err
		}
		done := sum(m, "controller_runtime_reconcile_total", `controller="gate/`)
		if sum(m, "workqueue_depth", `"gate/`) == 0 && sum(m, "controller_runtime_active_workers", `controller="gate/`) == 0 && done == last {
			idle++
		} else {
			idle = 0
		}
		last = done
	}
	return nil
}

// sum adds the samples of metric whose labels contain every filter.
func sum(m map[string]float64, metric string, filters ...string) float64 {
	var total float64
	for k, v := range m {
		name, labels, _ := strings.Cut(k, "{")
		if name != metric {
			continue
		}
		ok := true
		for _, f := range filters {
			ok = ok && strings.Contains(labels, f)
		}
		if ok {
			total += v
		}
	}
	return total
}

// Log is the provider's log so far.
func (p *provider) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// Stop ends the provider process (SIGTERM, then SIGKILL after 10s).
func (p *provider) Stop() {
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

// HeapProfile writes the provider's heap profile, after a garbage
// collection, to file.
func (p *provider) HeapProfile(file string) error {
	resp, err := http.Get("http://" + p.pprof + "/debug/pprof/heap?gc=1") //nolint:noctx // a local probe
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
