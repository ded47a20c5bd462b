package realtime

import "time"

// Durations, Time values and their methods, time.Unix and time.Date are
// fine: they compute, they do not look at the machine.
func allowed(t, u time.Time) time.Duration {
	d := 3 * time.Second
	_ = t.After(u) // the method, not time.After
	_ = t.Before(u)
	_ = t.Add(d).Sub(u)
	_ = time.Unix(1, 0).UTC()
	_ = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	_ = time.Duration(5).String()
	var stop func() bool = (*time.Timer)(nil).Stop // a method value, not a timer
	_ = stop
	return d.Round(time.Millisecond)
}
