// Package calls shows functions of allowed packages that the guard rejects.
package calls

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
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
