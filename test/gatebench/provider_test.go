package gatebench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/measure"
)

// startProvider starts the provider binary with the deployment's defaults
// (production logging, 30s discovery, no --debug) and waits until its
// webhook server is ready.
func startProvider(name string) (*measure.Process, error) {
	pprof, err := measure.FreeAddress()
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
	p.Pprof = pprof
	return p, nil
}

// startReference starts the reference manager (see ./reference), the
// floor of the provider's memory figures, sampled the same way.
func startReference(name string) (*measure.Process, error) {
	return startProcess(name, referenceBin)
}

// startProcess starts bin with args and the test's kubeconfig, logging
// into the test's directory.
func startProcess(name, bin string, args ...string) (*measure.Process, error) {
	vars := []string{"KUBECONFIG=" + filepath.Join(dir, "kubeconfig")}
	// GATEBENCH_PROVIDER_ENV adds variables for the measured processes
	// alone, to try runtime settings: GATEBENCH_PROVIDER_ENV='GOMEMLIMIT=32MiB GOGC=50'.
	vars = append(vars, strings.Fields(os.Getenv("GATEBENCH_PROVIDER_ENV"))...)
	return measure.Start(bin, filepath.Join(dir, name+".log"), vars, args...)
}

// controlPlaneCPU is the CPU time kube-apiserver and etcd, which envtest
// starts as children of this process, have used so far.
func controlPlaneCPU() time.Duration { return measure.ChildCPU("kube-apiserver", "etcd") }

// quiet waits until the provider's gate controller has been idle for half
// a second: nothing queued, no worker busy, no reconcile finished.
func quiet(p *measure.Process, deadline time.Time) error {
	var last float64 = -1
	idle := 0
	for idle < 5 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the gate controller is still busy")
		}
		time.Sleep(100 * time.Millisecond)
		m, err := p.Scrape()
		if err != nil {
			return err
		}
		done := measure.Sum(m, "controller_runtime_reconcile_total", `controller="gate/`)
		if measure.Sum(m, "workqueue_depth", `"gate/`) == 0 && measure.Sum(m, "controller_runtime_active_workers", `controller="gate/`) == 0 && done == last {
			idle++
		} else {
			idle = 0
		}
		last = done
	}
	return nil
}
