package sim

import (
	"context"
	"log/slog"
)

// logger returns the slog.Logger of one of n's incarnations: text records,
// stamped with the node's clock and carrying its name and incarnation,
// written to the world's log output.
func (w *World) logger(n *Node) *slog.Logger {
	inner := slog.NewTextHandler(worldWriter{w}, &slog.HandlerOptions{Level: slog.LevelDebug})
	h := &logHandler{w: w, node: n, inner: inner}
	return slog.New(h).With("node", n.name, "inc", n.boots)
}

// logHandler replaces the time slog stamps on every record (the process's
// real time) with the node's virtual wall clock, so a log never carries
// anything a seed did not decide. It formats nothing when the world discards
// logs.
type logHandler struct {
	w     *World
	node  *Node
	inner slog.Handler
}

func (h *logHandler) Enabled(_ context.Context, level slog.Level) bool {
	return h.w.logOut != nil && level >= h.w.logLevel
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Time = h.node.clock.Now()
	return h.inner.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{w: h.w, node: h.node, inner: h.inner.WithAttrs(attrs)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{w: h.w, node: h.node, inner: h.inner.WithGroup(name)}
}

// worldWriter forwards to the world's current log output, so SetLog reaches
// loggers made before it.
type worldWriter struct{ w *World }

func (ww worldWriter) Write(p []byte) (int, error) {
	if ww.w.logOut == nil {
		return len(p), nil
	}
	return ww.w.logOut.Write(p)
}
