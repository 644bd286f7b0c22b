package parents

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Served is a reader whose reads the API server answers from its watch
// cache (resourceVersion "0") instead of a quorum read from etcd: as
// current as the API server's own view, typically milliseconds behind,
// and far cheaper. The gate controller reads parents this way, once per
// reconcile of a gate a freeze can change: the managed webhook reads
// them again, consistently, on every write that opens a gate, and rewrites
// the gate by the same formula, so a freeze the watch cache has not seen
// yet never opens one.
type Served struct {
	client.Reader
}

// Get reads obj from the API server's watch cache.
func (s Served) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return s.Reader.Get(ctx, key, obj, append(opts, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})...)
}
