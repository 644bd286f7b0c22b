// Package e2e plays the accident scenarios across the whole chain on the
// embedded control plane (test/controlplane): users write Claims through
// the real admission webhooks of the provider process, Crossplane's part
// runs the real `crossplane render` with function-kausality and applies its
// output as Crossplane's service account, the gate controller opens and
// closes gates, and the recording provider shows what the cloud saw.
package played_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/test/controlplane"
	"github.com/kausality-io/kausality-crossplane/test/played"
	"github.com/kausality-io/kausality-crossplane/test/recorder"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

var cp *played.ControlPlane

var (
	closed = []string{"Observe", "LateInitialize"}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	root, err := render.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kausality-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx := context.Background()
	if cp, err = played.Start(ctx, root, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cp.Stop()
	if err := applyFile(ctx, filepath.Join("..", "..", "e2e", "testdata", "policies.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	admin, err := cp.As("admin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := controlplane.WaitForRules(ctx, admin, "databaseclaims", "xdatabases", "buckets"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "provider log:\n"+tail(cp.ProviderLog(), 60))
	}
	return code
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// applyFile creates every object in a YAML file as an administrator,
// retrying while the provider's webhooks come up.
func applyFile(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	admin, err := cp.As("admin")
	if err != nil {
		return err
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		deadline := time.Now().Add(60 * time.Second)
		for err := admin.Create(ctx, u.DeepCopy()); err != nil; err = admin.Create(ctx, u.DeepCopy()) {
			if kerrors.IsAlreadyExists(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cannot create %s %s: %w", u.GetKind(), u.GetName(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	c, err := cp.As(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func alice(t *testing.T) client.Client { return as(t, played.Alice, "platform-team") }

func crossplane(t *testing.T, revision int) *played.Crossplane {
	t.Helper()
	x, err := cp.Crossplane(filepath.Join("..", "..", "e2e", "testdata", fmt.Sprintf("composition-%d.yaml", revision)), fmt.Sprintf("xdatabases-buckets-%d", revision))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func namespace(t *testing.T, name string) {
	t.Helper()
	if err := as(t, "admin").Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func claim(namespace, name, size string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
	u.SetGroupVersionKind(played.ClaimGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetAnnotations(annotations)
	return u
}

func settle(t *testing.T, x *played.Crossplane, key client.ObjectKey) played.Pass {
	t.Helper()
	p, err := x.Settle(context.Background(), key)
	if err != nil {
		t.Fatalf("Crossplane does not settle %s: %v", key, err)
	}
	return p
}

// buckets are the XR's composed Buckets by composition resource name.
func buckets(t *testing.T, key client.ObjectKey) map[string]*unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(played.BucketGVK.GroupVersion().WithKind("BucketList"))
	if err := as(t, "admin").List(context.Background(), l, client.MatchingLabels{"crossplane.io/composite": played.XRName(key)}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range l.Items {
		out[l.Items[i].GetAnnotations()["crossplane.io/composition-resource-name"]] = &l.Items[i]
	}
	return out
}

func gate(o *unstructured.Unstructured) []string {
	p, _ := fieldpath.Pave(o.Object).GetStringArray("spec.managementPolicies")
	return p
}

// calls counts the cloud's calls of verb for the XR's bucket res.
func calls(t *testing.T, key client.ObjectKey, res, verb string) int {
	t.Helper()
	b, ok := buckets(t, key)[res]
	if !ok {
		t.Fatalf("%s has no %s bucket", key, res)
	}
	return cp.Cloud.Count(verb, b.GetName())
}

// expectCalls checks every bucket's external calls: want maps resource
// name to Create/Update/Delete counts.
func expectCalls(t *testing.T, key client.ObjectKey, want map[string][3]int) {
	t.Helper()
	for res, w := range want {
		got := [3]int{calls(t, key, res, recorder.VerbCreate), calls(t, key, res, recorder.VerbUpdate), calls(t, key, res, recorder.VerbDelete)}
		if got != w {
			t.Errorf("%s bucket %s: external Create/Update/Delete = %v, want %v", key, res, got, w)
		}
	}
}

func expectClosed(t *testing.T, key client.ObjectKey) {
	t.Helper()
	for res, b := range buckets(t, key) {
		if !slices.Equal(gate(b), closed) {
			t.Errorf("%s bucket %s gate = %v, want %v", key, res, gate(b), closed)
		}
	}
}
