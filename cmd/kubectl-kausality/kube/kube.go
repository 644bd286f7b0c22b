// Package kube is how every `kubectl kausality` command reaches the
// cluster: kubectl's connection flags, and a session of a client and a
// REST mapper made from them with the user's own kubeconfig.
package kube

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Flags are kubectl's connection flags, which every command takes.
type Flags struct {
	Kubeconfig string `help:"Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)."`
	Context    string `help:"The kubeconfig context to use."`
	Namespace  string `help:"The namespace of the object (default: the context's)." short:"n"`
}

// Session is what every command needs: a client, a mapper and the
// namespace a name without one is in.
type Session struct {
	// Client reads, and writes for plan's dry run and uninstall.
	Client client.Client
	// Mapper resolves a TYPE as kubectl does.
	Mapper meta.RESTMapper
	// Namespace is --namespace, or the context's.
	Namespace string
}

// Config is the REST config and namespace the flags select.
func (f *Flags) Config() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", errors.Wrap(err, "cannot load the kubeconfig")
	}
	ns := f.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", errors.Wrap(err, "cannot read the context's namespace")
		}
	}
	return cfg, ns, nil
}

// Connect makes a session from the flags.
func (f *Flags) Connect() (Session, error) {
	cfg, ns, err := f.Config()
	if err != nil {
		return Session{}, err
	}
	return NewSession(cfg, ns)
}

// NewSession makes a session from a REST config: plan sets a warning
// handler on its config first.
func NewSession(cfg *rest.Config, namespace string) (Session, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return Session{}, errors.Wrap(err, "cannot make an HTTP client")
	}
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return Session{}, errors.Wrap(err, "cannot discover the API server's kinds")
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return Session{}, errors.Wrap(err, "cannot register Kubernetes' kinds")
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return Session{}, errors.Wrap(err, "cannot register Kausality's kinds")
	}
	cl, err := client.New(cfg, client.Options{HTTPClient: hc, Mapper: m, Scheme: s})
	if err != nil {
		return Session{}, errors.Wrap(err, "cannot make a client")
	}
	return Session{Client: cl, Mapper: m, Namespace: namespace}, nil
}
