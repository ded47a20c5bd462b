// Package realtime shows every reference to the machine's clock that the
// guard rejects.
package realtime

import "time"

func calls() {
	_ = time.Now()                   // want `real-time: time.Now: reads the machine's clock`
	_ = time.Since(time.Time{})      // want `real-time: time.Since`
	_ = time.Until(time.Time{})      // want `real-time: time.Until`
	time.Sleep(time.Millisecond)     // want `real-time: time.Sleep: waits on the machine's clock`
	<-time.After(time.Second)        // want `real-time: time.After`
	_ = time.Tick(time.Second)       // want `real-time: time.Tick`
	_ = time.NewTimer(time.Second)   // want `real-time: time.NewTimer`
	_ = time.NewTicker(time.Second)  // want `real-time: time.NewTicker`
	time.AfterFunc(time.Second, nil) // want `real-time: time.AfterFunc`
}

// values: a reference without a call is just as bad.
var clock = time.Now // want `real-time: time.Now`

func values() func(time.Duration) <-chan time.Time {
	return time.After // want `real-time: time.After`
}

func zones(t time.Time) {
	_ = time.Local                  // want `real-time: time.Local: depends on the machine's time zone`
	_, _ = time.LoadLocation("UTC") // want `real-time: time.LoadLocation`
	_ = t.Local()                   // want `real-time: \(time.Time\).Local`
}
