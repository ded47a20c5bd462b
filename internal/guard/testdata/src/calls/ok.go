package calls

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
)

// Everything else in these packages computes without looking outside.
func allowed(ctx context.Context, w io.Writer, log *slog.Logger) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_ = context.WithValue(ctx, "k", "v")
	log.Info("an injected logger is fine") // env.Env.Log
	_ = slog.New(slog.NewTextHandler(w, nil))
	_ = fmt.Sprintf("%d", 1)
	fmt.Fprintf(w, "to a writer the caller chose\n")
	_ = fmt.Errorf("wrapped: %w", io.EOF)
	_ = filepath.Join("a", "b")
	_ = runtime.GOOS
	runtime.KeepAlive(w)
}

// Reflection that does not walk a map, and verbs that print values.
func formats(w io.Writer, m map[string]int, c *struct{ id int }) {
	v := reflect.ValueOf(m)
	_ = v.Len()
	_ = v.MapIndex(reflect.ValueOf("k"))
	_ = fmt.Sprintf("100%% of %d at %v", c.id, c)
	_ = fmt.Sprintf("%%p is not a verb here")
	fmt.Fprintf(w, "%d%%p\n", c.id)
	_ = fmt.Sprint("%p is not a format for Sprint")
	format := "%p"
	_ = fmt.Sprintf(format, c) // not a constant: not checked
}
