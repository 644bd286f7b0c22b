package rollout

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestExponential compares Exponential with DESIGN §6's formula, in CEL,
// indexOf(item, collection) < int(math.pow(2, math.ceil(math.log(double(u + 1)) / math.log(2.0)))),
// for every u up to 64 and every index of a collection twice as large.
func TestExponential(t *testing.T) {
	for u := range 65 {
		batch := int(math.Pow(2, math.Ceil(math.Log(float64(u+1))/math.Log(2.0))))
		for i := range 130 {
			if got, want := Exponential(i, u), i < batch; got != want {
				t.Errorf("Exponential(index %d, updated %d) = %t, want %t (the formula's batch is %d)", i, u, got, want, batch)
			}
		}
	}
	if Exponential(-1, 0) || Exponential(0, -1) {
		t.Error("Exponential: a negative index or count lets nothing through")
	}
}

// TestLinear compares Linear with DESIGN §6's formula,
// indexOf(item, collection) < (updated / n + 1) * n.
func TestLinear(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for u := range 65 {
			for i := range 130 {
				if got, want := Linear(i, u, n), i < (u/n+1)*n; got != want {
					t.Errorf("Linear(index %d, updated %d, n %d) = %t, want %t", i, u, n, got, want)
				}
			}
		}
	}
	if Linear(0, 0, 0) || Linear(0, 0, -3) {
		t.Error("Linear: a batch size below 1 lets nothing through")
	}
}

func TestWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(day, hour, minute int) time.Time { // November 2026: the 23rd is a Monday
		return time.Date(2026, 11, day, hour, minute, 0, 0, berlin)
	}
	cases := map[string]struct {
		spec     string
		t        time.Time
		open     bool
		nextOpen time.Time
	}{
		"WeekdayInside":      {spec: "Mon-Fri 09:00-17:00", t: at(23, 10, 0), open: true, nextOpen: at(23, 10, 0)},
		"WeekdayBefore":      {spec: "Mon-Fri 09:00-17:00", t: at(23, 8, 59), nextOpen: at(23, 9, 0)},
		"WeekdayEndExcluded": {spec: "Mon-Fri 09:00-17:00", t: at(27, 17, 0), nextOpen: at(30, 9, 0)},
		"Weekend":            {spec: "Mon-Fri 09:00-17:00", t: at(28, 12, 0), nextOpen: at(30, 9, 0)},
		"OvernightLate":      {spec: "* 22:00-06:00", t: at(24, 23, 0), open: true, nextOpen: at(24, 23, 0)},
		"OvernightEarly":     {spec: "* 22:00-06:00", t: at(25, 5, 59), open: true, nextOpen: at(25, 5, 59)},
		"OvernightClosed":    {spec: "* 22:00-06:00", t: at(25, 12, 0), nextOpen: at(25, 22, 0)},
		"ListedDays":         {spec: "Sat,Sun 00:00-24:00", t: at(29, 23, 59), open: true, nextOpen: at(29, 23, 59)},
		"WrappingRange":      {spec: "Fri-Mon 10:00-11:00", t: at(24, 10, 30), nextOpen: at(27, 10, 0)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			w, err := ParseWindow(c.spec, "Europe/Berlin")
			if err != nil {
				t.Fatal(err)
			}
			if got := w.Contains(c.t); got != c.open {
				t.Errorf("Contains(%s) = %t, want %t", c.t, got, c.open)
			}
			if got := w.NextOpen(c.t); !got.Equal(c.nextOpen) {
				t.Errorf("NextOpen(%s) = %s, want %s", c.t, got, c.nextOpen)
			}
		})
	}
	for _, bad := range [][2]string{{"Mon-Fri 9-17", "UTC"}, {"Mon-Fry 09:00-17:00", "UTC"}, {"Mon-Fri 09:00-17:00", "Mars/Olympus"}, {"Mon-Fri", "UTC"}, {"Mon 24:00-01:00", "UTC"}, {"Mon 09:00-17:00", ""}} {
		if _, err := ParseWindow(bad[0], bad[1]); err == nil {
			t.Errorf("ParseWindow(%q, %q): no error", bad[0], bad[1])
		}
	}
}

func TestRule(t *testing.T) {
	env, err := NewEnv("pools", "alarm")
	if err != nil {
		t.Fatal(err)
	}
	monday := time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC) // 08:00 in Berlin
	r, err := Compile(env, []string{"alarm == null", "inWindow(now, 'Mon-Fri 09:00-17:00', 'Europe/Berlin')"})
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{VarNow: monday, "alarm": nil, VarItem: nil, VarXR: nil, VarObject: nil, "pools": []any{}}
	v, err := r.Check(vars, monday)
	if err != nil || v.OK || v.Failed != "inWindow(now, 'Mon-Fri 09:00-17:00', 'Europe/Berlin')" || !v.Opens.Equal(monday.Add(time.Hour)) {
		t.Errorf("before the window: %+v, %v; want the window failing, opening at %s", v, err, monday.Add(time.Hour))
	}
	vars[VarNow] = monday.Add(2 * time.Hour)
	if v, err := r.Check(vars, monday.Add(2*time.Hour)); err != nil || !v.OK {
		t.Errorf("in the window: %+v, %v; want OK", v, err)
	}
	vars["alarm"] = map[string]any{"metadata": map[string]any{"name": "alarm"}}
	if v, err := r.Check(vars, monday.Add(2*time.Hour)); err != nil || v.OK || v.Failed != "alarm == null" || !v.Opens.IsZero() {
		t.Errorf("with the alarm: %+v, %v; want alarm == null failing", v, err)
	}
	for _, bad := range []string{"inWindow(now, 'Mon-Fri 9-5', 'Europe/Berlin')", "item.", "'a string'", "unknown == 1"} {
		if _, err := Compile(env, []string{bad}); err == nil || !strings.Contains(err.Error(), "propagateWhen[0]") {
			t.Errorf("Compile(%q): %v, want an error naming propagateWhen[0]", bad, err)
		}
	}
}
