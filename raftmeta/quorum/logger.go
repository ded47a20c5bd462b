package quorum

import (
	"context"
	"fmt"
	"log/slog"

	"go.etcd.io/raft/v3"
)

// raftLogger sends etcd raft's logs to a slog logger. raft's Panic and Fatal
// mean its state is broken beyond use: both log at error level and then
// panic with the message, so that neither can end the process silently (the
// standard logger's Fatal would call os.Exit, skipping every deferred
// recovery and the simulator's report of the seed).
type raftLogger struct{ l *slog.Logger }

var _ raft.Logger = raftLogger{}

func (r raftLogger) log(level slog.Level, msg func() string) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, msg())
	}
}

func (r raftLogger) Debug(v ...any) {
	r.log(slog.LevelDebug, func() string { return fmt.Sprint(v...) })
}
func (r raftLogger) Debugf(format string, v ...any) {
	r.log(slog.LevelDebug, func() string { return fmt.Sprintf(format, v...) })
}
func (r raftLogger) Info(v ...any) { r.log(slog.LevelInfo, func() string { return fmt.Sprint(v...) }) }
func (r raftLogger) Infof(format string, v ...any) {
	r.log(slog.LevelInfo, func() string { return fmt.Sprintf(format, v...) })
}
func (r raftLogger) Warning(v ...any) {
	r.log(slog.LevelWarn, func() string { return fmt.Sprint(v...) })
}
func (r raftLogger) Warningf(format string, v ...any) {
	r.log(slog.LevelWarn, func() string { return fmt.Sprintf(format, v...) })
}
func (r raftLogger) Error(v ...any) {
	r.log(slog.LevelError, func() string { return fmt.Sprint(v...) })
}
func (r raftLogger) Errorf(format string, v ...any) {
	r.log(slog.LevelError, func() string { return fmt.Sprintf(format, v...) })
}
func (r raftLogger) Fatal(v ...any)                 { r.die(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) { r.die(fmt.Sprintf(format, v...)) }
func (r raftLogger) Panic(v ...any)                 { r.die(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { r.die(fmt.Sprintf(format, v...)) }

func (r raftLogger) die(msg string) {
	r.l.Error("raft: "+msg, "fatal", true)
	panic("raft: " + msg)
}
