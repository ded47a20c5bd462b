// Package calls shows functions of allowed packages that the guard rejects.
package calls

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
	"time"
)

func scheduler() {
	runtime.Gosched()                   // want `forbidden-call: runtime.Gosched: the scheduler's and the collector's state`
	_ = runtime.NumGoroutine()          // want `forbidden-call: runtime.NumGoroutine`
	_ = runtime.NumCPU()                // want `forbidden-call: runtime.NumCPU`
	_ = runtime.GOMAXPROCS(0)           // want `forbidden-call: runtime.GOMAXPROCS`
	runtime.GC()                        // want `forbidden-call: runtime.GC`
	runtime.SetFinalizer(new(int), nil) // want `forbidden-call: runtime.SetFinalizer`
	_ = runtime.Stack(nil, false)       // want `forbidden-call: runtime.Stack`
}

func contexts(ctx context.Context) {
	_, cancel := context.WithTimeout(ctx, time.Second) // want `forbidden-call: context.WithTimeout: runs real timers`
	cancel()
	_, cancel = context.WithDeadline(ctx, time.Time{}) // want `forbidden-call: context.WithDeadline`
	cancel()
	_ = context.AfterFunc(ctx, func() {}) // want `forbidden-call: context.AfterFunc`
}

func logging() {
	slog.Info("hello")    // want `forbidden-call: log/slog.Info: the process-wide logger`
	_ = slog.Default()    // want `forbidden-call: log/slog.Default`
	fmt.Println("hello")  // want `forbidden-call: fmt.Println: reads or writes the process's stdin and stdout`
	fmt.Printf("%d\n", 1) // want `forbidden-call: fmt.Printf`
}

func files() {
	_, _ = filepath.Abs(".")      // want `forbidden-call: path/filepath.Abs: reads the real file system`
	_, _ = filepath.Glob("*.log") // want `forbidden-call: path/filepath.Glob`
}

// Reflection hands out a map's elements in the map's random order.
func reflection(m map[string]int) {
	v := reflect.ValueOf(m)
	_ = v.MapKeys()                      // want `map-order: \(reflect.Value\).MapKeys: yields a map's elements in random order`
	for it := v.MapRange(); it.Next(); { // want `map-order: \(reflect.Value\).MapRange`
	}
	keys := v.MapKeys // want `map-order: \(reflect.Value\).MapKeys`
	_ = keys
	_ = reflect.Value.MapRange // want `map-order: \(reflect.Value\).MapRange`
}

type conn struct{ id int }

// %p prints an address, and addresses differ from run to run.
func addresses(w io.Writer, c *conn) error {
	_ = fmt.Sprintf("conn %p", c)           // want `print-address: %p prints an address`
	_ = fmt.Sprintf("conn %[1]p %[1]d", c)  // want `print-address: %p prints an address`
	_ = fmt.Sprintf("conn %#-8p", c)        // want `print-address`
	fmt.Fprintf(w, "conn %v at %p\n", c, c) // want `print-address`
	_ = fmt.Appendf(nil, "%p", c)           // want `print-address`
	const format = "closing %p"
	fmt.Printf(format, c)                          // want `forbidden-call: fmt.Printf` `print-address`
	return fmt.Errorf("conn "+"%p: %w", c, io.EOF) // want `print-address`
}
