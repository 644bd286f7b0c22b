// Command reference is the floor the gate benchmark's memory figures are
// measured against: a controller-runtime manager set up the way
// provider-kausality is for managed resources (only gated ones cached,
// unstructured, managed fields stripped), watching the benchmark's Buckets
// with a controller that reads each one from the cache and does nothing
// else. Any provider-style controller that caches the same objects holds
// at least this much; what provider-kausality holds above it is its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	recorderv1alpha1 "github.com/kausality-io/kausality-crossplane/test/recorder/apis/v1alpha1"
)

func main() {
	metrics := flag.String("metrics-address", "0", "address of the Prometheus endpoint")
	health := flag.String("health-address", "0", "address of /readyz (\"0\": none; the benchmark probes nothing, and a fixed port would collide)")
	flag.Parse()
	if err := run(*metrics, *health); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(metrics, health string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("cannot read the kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: metrics},
		HealthProbeBindAddress: health,
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache: cache.Options{
			DefaultLabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelGated: "true"}),
			DefaultTransform:     cache.TransformStripManagedFields(),
		},
	})
	if err != nil {
		return fmt.Errorf("cannot create the manager: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	bucket := recorderv1alpha1.BucketGroupVersionKind
	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(bucket)
	kube := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).Named("reference").For(watched).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(bucket)
			return reconcile.Result{}, client.IgnoreNotFound(kube.Get(ctx, req.NamespacedName, u))
		}))
	if err != nil {
		return fmt.Errorf("cannot create the controller: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
