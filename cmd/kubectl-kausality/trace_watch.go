package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/show"
)

// watch follows the tree until the user interrupts: an interrupt ends the
// watch cleanly rather than killing the process mid-frame.
func (t *TraceCmd) watch(s session) error {
	if t.Interval <= 0 {
		return errors.Errorf("--interval %s: must be positive", t.Interval)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	return show.Watch(ctx, s.reader, s.mapper, s.namespace, t.Resource, t.Name, t.Output, os.Stdout, time.Now, tick.C)
}
