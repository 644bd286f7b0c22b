package eventwriter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var epoch = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func bucket(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "recorder.kausality.io", Version: "v1alpha1", Kind: "Bucket"})
	u.SetNamespace(ns)
	u.SetName("data")
	u.SetUID("uid-1")
	return u
}

// TestEventf: what Eventf records and what it refuses, written by Start.
func TestEventf(t *testing.T) {
	type args struct {
		regarding runtime.Object
		eventtype string
		note      string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   []eventsv1.Event
	}{
		"ClusterScoped": {
			reason: "An Event regarding a cluster-scoped object is written to the default Namespace, as client-go writes it.",
			args:   args{regarding: bucket(""), eventtype: corev1.EventTypeNormal, note: "opened for Update"},
			want: []eventsv1.Event{{
				ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault},
				EventTime:  metav1.NewMicroTime(epoch), ReportingController: "provider-kausality", ReportingInstance: "provider-kausality-test",
				Action: "Gate", Reason: "Opened", Note: "opened for Update", Type: corev1.EventTypeNormal,
				Regarding: corev1.ObjectReference{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "data", UID: "uid-1"},
			}},
		},
		"Namespaced": {
			reason: "An Event regarding a namespaced object is written to its Namespace.",
			args:   args{regarding: bucket("shop"), eventtype: corev1.EventTypeWarning, note: "kept shut"},
			want: []eventsv1.Event{{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop"},
				EventTime:  metav1.NewMicroTime(epoch), ReportingController: "provider-kausality", ReportingInstance: "provider-kausality-test",
				Action: "Gate", Reason: "Opened", Note: "kept shut", Type: corev1.EventTypeWarning,
				Regarding: corev1.ObjectReference{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Namespace: "shop", Name: "data", UID: "uid-1"},
			}},
		},
		"LongNote": {
			reason: "A note longer than the API server accepts is cut to 1 KB on a rune boundary.",
			args:   args{regarding: bucket(""), eventtype: corev1.EventTypeNormal, note: "x" + strings.Repeat("é", 600)},
			want: []eventsv1.Event{{
				ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault},
				EventTime:  metav1.NewMicroTime(epoch), ReportingController: "provider-kausality", ReportingInstance: "provider-kausality-test",
				Action: "Gate", Reason: "Opened", Note: "x" + strings.Repeat("é", 511), Type: corev1.EventTypeNormal,
				Regarding: corev1.ObjectReference{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "data", UID: "uid-1"},
			}},
		},
		"UnknownType": {
			reason: "An event type other than Normal and Warning is not recorded.",
			args:   args{regarding: bucket(""), eventtype: "Loud", note: "x"},
		},
		"NoKind": {
			reason: "An object whose kind is not known is not recorded.",
			args:   args{regarding: &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}}}, eventtype: corev1.EventTypeNormal, note: "x"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
			w := testWriter(kube)
			w.Eventf(tc.args.regarding, nil, tc.args.eventtype, "Opened", "Gate", "%s", tc.args.note)
			drain(t, w)
			l := &eventsv1.EventList{}
			if err := kube.List(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, l.Items, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(metav1.ObjectMeta{}, "Name", "ResourceVersion")); diff != "" {
				t.Errorf("%s\nEventf(...): -want, +got:\n%s", tc.reason, diff)
			}
			for _, e := range l.Items {
				if !strings.HasPrefix(e.Name, "data.") {
					t.Errorf("%s\nEvent name %q, want it named after the object", tc.reason, e.Name)
				}
			}
		})
	}
}

// TestWrite: how a failed write is tried again.
func TestWrite(t *testing.T) {
	errBusy := kerrors.NewServerTimeout(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "create", 1)
	errInvalid := kerrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "x", nil)
	cases := map[string]struct {
		reason    string
		errs      []error
		wantTries int
	}{
		"Written":        {reason: "A write that succeeds is tried once.", wantTries: 1},
		"BusyOnce":       {reason: "A write the API server was too busy for is tried again.", errs: []error{errBusy}, wantTries: 2},
		"AlwaysBusy":     {reason: "A write is tried three times at most, then dropped.", errs: []error{errBusy, errBusy, errBusy, errBusy}, wantTries: 3},
		"Invalid":        {reason: "An Event the API server refuses as invalid is not tried again.", errs: []error{errInvalid}, wantTries: 1},
		"AlreadyWritten": {reason: "An Event that exists is written.", errs: []error{kerrors.NewAlreadyExists(schema.GroupResource{}, "x")}, wantTries: 1},
		"Other":          {reason: "An error that may pass is tried again.", errs: []error{errors.New("connection reset")}, wantTries: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			kube := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					mu.Lock()
					defer mu.Unlock()
					n++
					if n <= len(tc.errs) {
						return tc.errs[n-1]
					}
					return c.Create(ctx, obj, opts...)
				},
			}).Build()
			w := testWriter(kube)
			w.Eventf(bucket(""), nil, corev1.EventTypeNormal, "Opened", "Gate", "x")
			drain(t, w)
			mu.Lock()
			defer mu.Unlock()
			if n != tc.wantTries {
				t.Errorf("%s\ntries = %d, want %d", tc.reason, n, tc.wantTries)
			}
		})
	}
}

// TestQueueFull: Eventf never blocks; past QueueSize waiting Events, the
// next is dropped.
func TestQueueFull(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	w := testWriter(kube)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range QueueSize + 10 {
			w.Eventf(bucket(""), nil, corev1.EventTypeNormal, "Opened", "Gate", "x")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Eventf blocked with nobody writing")
	}
	if got := len(w.queue); got != QueueSize {
		t.Errorf("queued %d Events, want %d", got, QueueSize)
	}
}

func testWriter(kube client.Client) *Writer {
	w := New(kube, clientgoscheme.Scheme, "provider-kausality", logging.NewNopLogger())
	w.instance = "provider-kausality-test"
	w.now = func() time.Time { return epoch }
	w.backoff = func(int) time.Duration { return 0 }
	return w
}

// drain runs w until its queue is empty and the last Event was written.
func drain(t *testing.T, w *Writer) {
	t.Helper()
	for len(w.queue) > 0 {
		w.write(context.Background(), <-w.queue)
	}
}

// TestStart: a started Writer writes what is queued, and returns once its
// context ends.
func TestStart(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	w := testWriter(kube)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Start(ctx) }()
	w.Eventf(bucket("shop"), nil, corev1.EventTypeNormal, "Opened", "Gate", "x")
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := &eventsv1.EventList{}
		if err := kube.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the started Writer wrote %d Events, want 1", len(l.Items))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Start() = %v, want nil once its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return once its context ended")
	}
}
