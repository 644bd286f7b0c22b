// Package eventwriter records provider-kausality's Events (events.k8s.io/v1)
// one write each, without the series cache of client-go's broadcaster.
//
// client-go's events broadcaster keeps every Event it recorded for six to
// twelve minutes, to count repeats of the same note on the same object as
// a series. The gate controller notes each gate's transitions on its own
// managed resource, so its Events never repeat, and such a cache would
// hold about 5 KB for each gated resource a roll-out touched: across a
// fleet of thousands, more memory than the provider's caches
// (docs/PERFORMANCE.md). Events stay best effort: one that cannot
// be written within a few tries, or that finds the queue full, is dropped
// and logged, as client-go drops one.
package eventwriter

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// QueueSize is how many Events may wait to be written; more are
	// dropped, as client-go's broadcaster drops them past its queue.
	QueueSize = 1000
	// maxNote is the longest note the API server accepts (1 KB).
	maxNote = 1024
	// tries is how often an Event's write is tried before it is dropped.
	tries = 3
	// Workers is how many Events are written at once: a gate controller
	// closing hundreds of gates a second notes each, and one write at a
	// time would fall behind the API server's latency.
	Workers = 8
)

// Writer records Events for one controller. It is an events.EventRecorder;
// added to a manager, it writes them until the manager stops.
type Writer struct {
	kube       client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	queue      chan *eventsv1.Event
	log        logging.Logger
	// now and backoff are the clock and the wait between tries.
	now     func() time.Time
	backoff func(try int) time.Duration
}

var _ events.EventRecorder = &Writer{}

// New returns a Writer of Events reported by controller from this host,
// writing through kube; s names the kinds of the objects Events regard.
func New(kube client.Client, s *runtime.Scheme, controller string, log logging.Logger) *Writer {
	host, _ := os.Hostname()
	return &Writer{
		kube: kube, scheme: s, controller: controller, instance: controller + "-" + host,
		queue: make(chan *eventsv1.Event, QueueSize), log: log, now: time.Now,
		backoff: func(try int) time.Duration { return time.Duration(try) * 500 * time.Millisecond },
	}
}

// Eventf queues an Event regarding an object; it never blocks. An
// object that names no kind, or a type other than Normal and Warning, is
// logged and not recorded.
func (w *Writer) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	e, err := w.event(regarding, related, eventtype, reason, action, msg)
	if err != nil {
		w.log.Info("Cannot record an Event", "reason", reason, "note", msg, "error", err)
		return
	}
	select {
	case w.queue <- e:
	default:
		w.log.Info("Dropped an Event: too many wait to be written", "regarding", e.Regarding.Name, "reason", reason, "note", msg)
	}
}

// event is the Event Eventf records.
func (w *Writer) event(regarding, related runtime.Object, eventtype, reason, action, msg string) (*eventsv1.Event, error) {
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		return nil, fmt.Errorf("unsupported event type %q", eventtype)
	}
	ref, err := reference.GetReference(w.scheme, regarding)
	if err != nil {
		return nil, fmt.Errorf("cannot refer to the regarded object: %w", err)
	}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(w.scheme, related); err != nil {
			w.log.Debug("Cannot refer to an Event's related object", "error", err)
		}
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := w.now()
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano())},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: w.controller,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             rel,
		Note:                truncate(msg, maxNote),
		Type:                eventtype,
	}, nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Start writes queued Events, Workers at once, until ctx ends.
func (w *Writer) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-w.queue:
					w.write(ctx, e)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection is false: every replica writes the Events it
// records.
func (w *Writer) NeedLeaderElection() bool { return false }

// write creates e, trying again after a failure that may pass.
func (w *Writer) write(ctx context.Context, e *eventsv1.Event) {
	var err error
	for try := 1; try <= tries; try++ {
		err = w.kube.Create(ctx, e.DeepCopy())
		if err == nil || kerrors.IsAlreadyExists(err) || !retriable(err) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.backoff(try)):
		}
	}
	if err != nil && !kerrors.IsAlreadyExists(err) {
		w.log.Info("Cannot write an Event", "regarding", e.Regarding.Name, "reason", e.Reason, "note", e.Note, "error", err)
	}
}

// retriable reports whether a write that failed with err may succeed
// when tried again: the API server was busy, unreachable or timed out.
// An Event it refuses (invalid, forbidden, its Namespace terminating)
// is refused again.
func retriable(err error) bool {
	return !kerrors.IsInvalid(err) && !kerrors.IsForbidden(err) && !kerrors.IsBadRequest(err) && !kerrors.IsNotFound(err)
}
