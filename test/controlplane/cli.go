package controlplane

// The CLI as users run it: `kubectl kausality …` is the kubectl-kausality
// binary built from this repository, reading the control plane through a
// kubeconfig of the user it runs as.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// cliBuild builds kubectl-kausality once per control plane.
type cliBuild struct {
	once sync.Once
	bin  string
	err  error
}

// Kubeconfig writes a kubeconfig in which user ("admin" for the
// administrator) acts with groups (and system:authenticated, as every
// authenticated request has), as kubectl and its plugins read it.
func (c *ControlPlane) Kubeconfig(user string, groups ...string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Admin.Host, CertificateAuthorityData: c.Admin.CAData}
	ai := &clientcmdapi.AuthInfo{ClientCertificateData: c.Admin.CertData, ClientKeyData: c.Admin.KeyData, Token: c.Admin.BearerToken}
	if user != "admin" {
		ai.Impersonate = user
		ai.ImpersonateGroups = append(append([]string{}, groups...), "system:authenticated")
	}
	cfg.AuthInfos[user] = ai
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: user}
	cfg.CurrentContext = "envtest"
	// One file per user and groups: tests run the same user with other
	// groups at the same time.
	path := filepath.Join(c.Dir, fmt.Sprintf("user-%s-%x.kubeconfig", user, sha256.Sum256([]byte(strings.Join(groups, "\n")))))
	// Written whole under another name and renamed: a CLI of another
	// test reading the same user's file meanwhile reads the old one,
	// never a half-written one.
	tmp, err := os.CreateTemp(c.Dir, "kubeconfig-")
	if err != nil {
		return "", errors.Wrap(err, "cannot make a kubeconfig file")
	}
	_ = tmp.Close()
	if err := clientcmd.WriteToFile(*cfg, tmp.Name()); err != nil {
		return "", errors.Wrapf(err, "cannot write %s", tmp.Name())
	}
	return path, errors.Wrapf(os.Rename(tmp.Name(), path), "cannot write %s", path)
}

// Kausality runs `kubectl kausality args…` as user (with groups) and
// returns what it printed on stdout; a failure carries stderr. The first
// call builds cmd/kubectl-kausality from the repository.
func (c *ControlPlane) Kausality(ctx context.Context, user string, groups []string, args ...string) (string, error) {
	c.cli.once.Do(func() {
		c.cli.bin = filepath.Join(c.Dir, "kubectl-kausality")
		build := exec.CommandContext(ctx, "go", "build", "-o", c.cli.bin, "./cmd/kubectl-kausality")
		build.Dir = c.Root
		if out, err := build.CombinedOutput(); err != nil {
			c.cli.err = errors.Wrapf(err, "cannot build kubectl-kausality: %s", out)
		}
	})
	if c.cli.err != nil {
		return "", c.cli.err
	}
	kc, err := c.Kubeconfig(user, groups...)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, c.cli.bin, append([]string{"--kubeconfig", kc}, args...)...) //nolint:gosec // our own binary
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.Wrapf(err, "kubectl kausality %v: %s", args, stderr.String())
	}
	return stdout.String(), nil
}
