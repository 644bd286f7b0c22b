package trace

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree/treetest"
)

// syncBuffer is written by the watch and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatch polls a fake cluster whose XR changes between polls: a poll
// that finds the tree unchanged prints nothing, one that finds it changed
// prints it again under the time. Each tick is sent on an unbuffered
// channel, so a send returns only once the previous poll is done.
func TestWatch(t *testing.T) {
	cases := map[string]struct {
		format printer.Format
		golden string
	}{
		"Default": {format: printer.FormatDefault, golden: "watch.txt"},
		"Dot":     {format: printer.FormatDot, golden: "watch.dot"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := treetest.Reader(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ticks := make(chan time.Time)
			start := time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC)
			var polls int
			now := func() time.Time { polls++; return start.Add(time.Duration(polls) * 2 * time.Second) }
			var out syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- Watch(ctx, r, treetest.Mapper(), "team-a", "xplatforms/shop", "", tc.format, &out, now, ticks)
			}()

			ticks <- start // the first frame is printed; nothing changes
			ticks <- start // the unchanged poll is done
			lift(t, r)
			ticks <- start // the changed tree is printed
			ticks <- start // and that poll is done
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Watch(...): %v", err)
			}
			got := out.String()
			if n := strings.Count(got, "2026-11-25T"); n != 2 {
				t.Errorf("Watch printed %d frames, want 2 (the first, and the one after the change):\n%s", n, got)
			}
			golden(t, filepath.Join("testdata", tc.golden), got)
		})
	}
}

func TestWatchFirstError(t *testing.T) {
	err := Watch(context.Background(), treetest.Reader(t), treetest.Mapper(), "team-a", "xplatforms/nothere", "", printer.FormatDefault, &syncBuffer{}, time.Now, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot get XPlatform") {
		t.Errorf("Watch(missing object) = %v, want the error of the first read", err)
	}
}

// lift lets the withheld change of the XPlatform through.
func lift(t *testing.T, r client.Client) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.org/v1alpha1")
	u.SetKind("XPlatform")
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "shop"}, u); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = treetest.Ready()
	if err := r.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}
