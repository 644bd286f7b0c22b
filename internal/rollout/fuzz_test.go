package rollout

import (
	"testing"
	"time"
)

// FuzzParseWindow: a window spec is user-controlled text in a Composition.
// Whatever it is, ParseWindow does not panic, and a window it accepts opens
// no earlier than asked and is open when NextOpen says it opens.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"Mon-Fri 09:00-17:00", "* 22:00-06:00", "Sat,Sun 00:00-24:00", "Fri-Mon 10:00-11:00", "Mon 24:00-01:00", "", "Mon-", "* 9:00-17:00"} {
		f.Add(s, "Europe/Berlin", int64(0))
	}
	f.Add("Mon-Fri 09:00-17:00", "UTC", int64(1e9))
	f.Fuzz(func(t *testing.T, spec, tz string, offset int64) {
		w, err := ParseWindow(spec, tz)
		if err != nil {
			return
		}
		at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Add(time.Duration(offset%(14*24*3600)) * time.Second)
		next := w.NextOpen(at)
		if next.IsZero() {
			return
		}
		if next.Before(at) || !w.Contains(next) {
			t.Errorf("window %q in %s: NextOpen(%s) = %s, which is before it or not open", spec, tz, at, next)
		}
	})
}
