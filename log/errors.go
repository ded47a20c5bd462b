package log

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a rejection or a failure of a log operation, carrying the Kafka
// error a broker answers with. errors.Is(err, kerr.CorruptMessage) and the
// like work on it, and so does errors.Is against its cause (env.ErrIO,
// env.ErrNoSpace...).
type Error struct {
	Code *kerr.Error // never nil
	Msg  string
	Err  error // the cause, or nil
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code.Message, e.Msg, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code.Message, e.Msg)
}

func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Code, e.Err}
	}
	return []error{e.Code}
}

func newError(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// storageError wraps a file-system failure as KAFKA_STORAGE_ERROR.
func storageError(err error, format string, args ...any) *Error {
	return &Error{Code: kerr.KafkaStorageError, Msg: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCode returns the Kafka error for err: nil for nil, the code of an
// *Error, or UNKNOWN_SERVER_ERROR for anything else.
func ErrorCode(err error) *kerr.Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return kerr.UnknownServerError
}

// Errors that callers test for with errors.Is.
var (
	// ErrNotReady means the log refuses appends until a truncation (by a
	// caller or by recovery) is durable; Log.Ready reports when it is.
	ErrNotReady = &Error{Code: kerr.NotLeaderForPartition, Msg: "log is not ready: a truncation is not yet durable"}
	// ErrClosed is returned by every operation after Close.
	ErrClosed = &Error{Code: kerr.NotLeaderForPartition, Msg: "log is closed"}
	// ErrTruncated is given to a Flush waiter whose offset was truncated
	// away before it became durable.
	ErrTruncated = &Error{Code: kerr.NotLeaderForPartition, Msg: "offset was truncated before it became durable"}
	// ErrCorrupt is wrapped by every error that reports bytes read back
	// from the disk that fail their checks (a checksum, a length, an
	// offset out of sequence). Such bytes are never returned as data.
	ErrCorrupt = errors.New("corrupt data on disk")
	// ErrFailed is wrapped by every error of a log that has given up after
	// a failed sync or an inconsistency it could not repair: its on-disk
	// state is unknown until it is closed and opened again (recovery).
	ErrFailed = errors.New("log failed")
)

// corruptError reports bytes read back that fail their checks.
func corruptError(format string, args ...any) *Error {
	return &Error{Code: kerr.KafkaStorageError, Msg: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}
