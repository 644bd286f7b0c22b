package rollout

import (
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A Window is a weekly maintenance window in a time zone: the days it is
// open and, on each of them, from Start to End (minutes after midnight;
// End at or before Start runs past midnight into the next day).
type Window struct {
	Days       [7]bool // by time.Weekday
	Start, End int
	Location   *time.Location
}

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// ParseWindow reads a window as inWindow takes it: spec is days then hours,
// "Mon-Fri 09:00-17:00", "Sat,Sun 00:00-24:00" or "* 22:00-06:00" (every
// day, overnight); tz is an IANA time zone such as Europe/Berlin.
func ParseWindow(spec, tz string) (Window, error) {
	var w Window
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" {
		return w, errors.Errorf("window %q: time zone %q is not an IANA time zone such as Europe/Berlin", spec, tz)
	}
	w.Location = loc
	days, hours, ok := strings.Cut(strings.TrimSpace(spec), " ")
	if !ok {
		return w, errors.Errorf("window %q is not days and hours, such as \"Mon-Fri 09:00-17:00\"", spec)
	}
	if err := w.parseDays(days); err != nil {
		return w, errors.Wrapf(err, "window %q", spec)
	}
	from, to, ok := strings.Cut(strings.TrimSpace(hours), "-")
	if !ok {
		return w, errors.Errorf("window %q: hours %q are not from-to, such as 09:00-17:00", spec, hours)
	}
	if w.Start, err = clock(from, false); err != nil {
		return w, errors.Wrapf(err, "window %q", spec)
	}
	if w.End, err = clock(to, true); err != nil {
		return w, errors.Wrapf(err, "window %q", spec)
	}
	return w, nil
}

func (w *Window) parseDays(s string) error {
	if s == "*" {
		for i := range w.Days {
			w.Days[i] = true
		}
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(part, "-")
		f, ok := weekdays[strings.ToLower(from)]
		if !ok {
			return errors.Errorf("%q is not a day such as Mon", from)
		}
		if !isRange {
			w.Days[f] = true
			continue
		}
		t, ok := weekdays[strings.ToLower(to)]
		if !ok {
			return errors.Errorf("%q is not a day such as Fri", to)
		}
		for d := f; ; d = (d + 1) % 7 {
			w.Days[d] = true
			if d == t {
				break
			}
		}
	}
	return nil
}

// clock reads HH:MM as minutes after midnight; 24:00 only as an end.
func clock(s string, end bool) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, herr := strconv.Atoi(h)
	mm, merr := strconv.Atoi(m)
	if !ok || herr != nil || merr != nil || len(h) != 2 || len(m) != 2 || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && (mm != 0 || !end)) {
		return 0, errors.Errorf("%q is not a time of day such as 09:00", s)
	}
	return hh*60 + mm, nil
}

// Contains reports whether the window is open at t.
func (w Window) Contains(t time.Time) bool {
	l := t.In(w.Location)
	m := l.Hour()*60 + l.Minute()
	day := l.Weekday()
	if w.Start < w.End {
		return w.Days[day] && m >= w.Start && m < w.End
	}
	// Past midnight: open from Start on an open day, and until End on the
	// day after one.
	return (w.Days[day] && m >= w.Start) || (w.Days[(day+6)%7] && m < w.End)
}

// NextOpen is when the window next opens after t, t itself when it is
// open; the zero time for a window that never opens.
func (w Window) NextOpen(t time.Time) time.Time {
	if w.Contains(t) {
		return t
	}
	l := t.In(w.Location)
	for i := 0; i <= 7; i++ {
		d := l.AddDate(0, 0, i)
		open := time.Date(d.Year(), d.Month(), d.Day(), w.Start/60, w.Start%60, 0, 0, w.Location)
		if w.Days[open.Weekday()] && open.After(t) {
			return open
		}
	}
	return time.Time{}
}
