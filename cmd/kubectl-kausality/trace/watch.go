package trace

import (
	"bytes"
	"context"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
)

// Watch prints the tree of the object named by resource and name, as
// Trace does, then reads it again at every tick and prints it once more
// whenever the output changed, under a header with the time now says,
// until ctx is done (the CLI cancels it on an interrupt). Polling, not a
// watch, because the tree spans kinds the CLI learns only by reading it
// and a roll-out changes it every few seconds at most; printing only what
// changed keeps a quiet tree quiet. The ticks come from the caller so a
// test decides when a poll happens.
func Watch(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, name string, format printer.Format, w io.Writer, now func() time.Time, ticks <-chan time.Time) error {
	var last string
	poll := func(first bool) error {
		var buf bytes.Buffer
		err := Trace(ctx, r, m, namespace, resource, name, format, &buf)
		if err != nil {
			if first {
				return err
			}
			// A later failure (the API server restarting, the object
			// deleted) is news worth a frame, not the end of the watch.
			buf.Reset()
			buf.WriteString("error: " + err.Error() + "\n")
		}
		if buf.String() == last {
			return nil
		}
		h := header(format, now())
		if !first && (format == printer.FormatDefault || format == printer.FormatWide || format == "") {
			h = "\n" + h // a blank line between tables
		}
		last = buf.String()
		_, err = io.WriteString(w, h+last)
		return err
	}
	if err := poll(true); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
			if ctx.Err() != nil {
				return nil
			}
			if err := poll(false); err != nil {
				return err
			}
		}
	}
}

// header is the line above each frame, written as a comment where the
// format has one, so that a frame of YAML or dot stays valid on its own.
// JSON has no comments: its frames are a stream of documents.
func header(format printer.Format, t time.Time) string {
	stamp := t.UTC().Format(time.RFC3339)
	switch format {
	case printer.FormatJSON:
		return ""
	case printer.FormatYAML:
		return "---\n# " + stamp + "\n"
	case printer.FormatDot:
		return "// " + stamp + "\n"
	}
	return stamp + "\n"
}
