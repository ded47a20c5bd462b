package guard

import "strings"

// The rule tables are switch statements rather than maps: they read as a
// list, and they leave no mutable state at package level.

// forbiddenImport returns why a core package may not import path, or "".
func forbiddenImport(path string) string {
	switch path {
	case "math/rand", "math/rand/v2", "crypto/rand":
		return "randomness must come from env.Rand, seeded by the simulator"
	case "hash/maphash":
		return "its seeds are random per process, so hashes differ between runs"
	case "golang.org/x/exp/rand":
		return "randomness must come from env.Rand, seeded by the simulator"
	case "weak":
		return "a weak pointer turns nil when the collector runs, and when it runs differs from run to run"
	case "io/ioutil", "log", "log/syslog":
		return "it reaches the OS (files, stderr, the wall clock); use env.FS and env.Env.Log"
	case "crypto/tls":
		return "it uses sockets and the system's randomness; TLS belongs in env/osenv"
	case "syscall":
		return "system calls belong in env/osenv"
	case "sync", "sync/atomic":
		return "a node is one event loop: nothing to lock, and a lock implies a goroutine"
	case "unsafe":
		return "addresses differ from run to run, and so would anything derived from them; zero-copy tricks belong in env/osenv"
	case "net/netip":
		// Pure value types (Addr, AddrPort, Prefix): parsing and comparing
		// addresses does no I/O and keeps no global state.
		return ""
	}
	switch {
	case within(path, "os"):
		return "the OS is reached only through env (env.FS for files)"
	case within(path, "net"):
		return "connections go through env.Net"
	case within(path, "golang.org/x/sys"):
		return "system calls belong in env/osenv"
	case within(path, "golang.org/x/sync"):
		return "a node is one event loop: no goroutines, nothing to lock"
	case strings.HasPrefix(path, "runtime/"):
		return "profiles, traces, GC tuning and stacks differ from run to run"
	}
	return ""
}

// forbiddenRef returns the rule that a reference to the named function,
// method or variable (see fullName) breaks, and why; or "", "".
func forbiddenRef(name string) (rule, why string) {
	switch name {
	case "time.Now", "time.Since", "time.Until":
		return "real-time", "reads the machine's clock; use env.Clock.Now"
	case "time.Sleep", "time.After", "time.Tick", "time.NewTimer", "time.NewTicker", "time.AfterFunc":
		return "real-time", "waits on the machine's clock; use env.Clock.AfterFunc"
	case "time.Local", "time.LoadLocation", "(time.Time).Local":
		return "real-time", "depends on the machine's time zone; keep times in UTC"
	case "runtime.Gosched", "runtime.Goexit", "runtime.GOMAXPROCS", "runtime.NumCPU",
		"runtime.NumGoroutine", "runtime.NumCgoCall", "runtime.LockOSThread", "runtime.UnlockOSThread",
		"runtime.GC", "runtime.ReadMemStats", "runtime.SetFinalizer", "runtime.AddCleanup", "runtime.Stack":
		return "forbidden-call", "the scheduler's and the collector's state differ from run to run"
	case "context.WithTimeout", "context.WithTimeoutCause", "context.WithDeadline",
		"context.WithDeadlineCause", "context.AfterFunc":
		return "forbidden-call", "runs real timers or goroutines; use env.Clock.AfterFunc"
	case "log/slog.Debug", "log/slog.DebugContext", "log/slog.Info", "log/slog.InfoContext",
		"log/slog.Warn", "log/slog.WarnContext", "log/slog.Error", "log/slog.ErrorContext",
		"log/slog.Log", "log/slog.LogAttrs", "log/slog.Default", "log/slog.SetDefault":
		return "forbidden-call", "the process-wide logger writes to stderr with the wall clock; use env.Env.Log"
	case "fmt.Print", "fmt.Printf", "fmt.Println", "fmt.Scan", "fmt.Scanf", "fmt.Scanln":
		return "forbidden-call", "reads or writes the process's stdin and stdout; use env.Env.Log"
	case "path/filepath.Abs", "path/filepath.EvalSymlinks", "path/filepath.Glob",
		"path/filepath.Walk", "path/filepath.WalkDir":
		return "forbidden-call", "reads the real file system; use env.FS"
	case "(reflect.Value).MapKeys", "(reflect.Value).MapRange":
		return "map-order", "yields a map's elements in random order; sort the keys (Value.Interface, then slices.Sorted)"
	}
	return "", ""
}

// printfFormat returns the index of the format argument of the named fmt
// function that takes one, or -1. fmt.Printf is forbidden outright, but its
// format is checked all the same.
func printfFormat(name string) int {
	switch name {
	case "fmt.Sprintf", "fmt.Printf", "fmt.Errorf":
		return 0
	case "fmt.Fprintf", "fmt.Appendf":
		return 1
	}
	return -1
}

// hasAddressVerb reports whether the fmt format string prints a %p verb,
// with any flags, width, precision or explicit argument index.
func hasAddressVerb(format string) bool {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.*[]", format[i]) >= 0 {
			i++
		}
		if i < len(format) && format[i] == 'p' {
			return true
		}
	}
	return false
}

// isMapsIter reports whether name is one of the maps package's iterators,
// which yield in the map's random order.
func isMapsIter(name string) bool {
	switch name {
	case "maps.Keys", "maps.Values", "maps.All":
		return true
	}
	return false
}

// takesMapsIter reports whether the named function consumes an iterator in
// a way that its order cannot reach the result: it sorts it, or it builds a
// map from it.
func takesMapsIter(name string) bool {
	switch name {
	case "slices.Sorted", "slices.SortedFunc", "slices.SortedStableFunc", "maps.Collect", "maps.Insert":
		return true
	}
	return false
}

// isSort reports whether the named function sorts the slice passed as its
// first argument in place.
func isSort(name string) bool {
	switch name {
	case "sort.Strings", "sort.Ints", "sort.Float64s", "sort.Sort", "sort.Stable",
		"sort.Slice", "sort.SliceStable", "slices.Sort", "slices.SortFunc", "slices.SortStableFunc":
		return true
	}
	return false
}

// isPure reports whether a call to the named function or builtin has no
// effect beyond its result, so that calling it in map order is harmless.
func isPure(name string) bool {
	switch name {
	case "len", "cap", "min", "max", "complex", "real", "imag",
		"errors.Is",
		"slices.Contains", "slices.Index", "slices.Equal", "slices.Compare",
		"slices.Max", "slices.Min", "slices.BinarySearch":
		return true
	}
	if strings.HasPrefix(name, "(time.Time).") || strings.HasPrefix(name, "(time.Duration).") {
		return true
	}
	if strings.HasPrefix(name, "(") {
		return false // any other method
	}
	pkg := name[:strings.LastIndexByte(name, '.')+1]
	switch pkg {
	case "strings.", "bytes.", "strconv.", "math.", "math/bits.", "unicode.", "unicode/utf8.", "cmp.", "time.":
		return true
	}
	return false
}
