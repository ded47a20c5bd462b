package calls

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
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
