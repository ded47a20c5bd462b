package node

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/env"
)

// Warnings about clients, limited per client and reason.
//
// A client that fails the same way over and over writes the same warning each
// time: kafka-python retrying FindCoordinator v0, which Sluice does not serve,
// seven times a second on a new connection each time, wrote 193 identical
// warnings in 30 s. So a warning about a client goes through a warnLimiter:
// the first of a reason from a host is logged at once, the next ones of that
// reason from that host are held for a minute (warnWindow), and when the
// minute ends the count of those held is logged with the last of them; the
// next minute starts there. A minute in which nothing was held ends the
// entry, and the host's next warning of that reason is logged at once.
//
// A client is its host, not host:port: a client that reconnects gets a new
// ephemeral port each time. Windows are timers of the node's clock, which
// count elapsed time (Now may jump) and in the simulator are virtual, so
// what is logged is a function of the seed.
//
// Memory is bounded: at most warnHostsMax (host, reason) entries are
// tracked, each with one timer; past that, the warnings of hosts without an
// entry share one entry per reason, so an attacker with many addresses gets
// one warning a minute per reason, not one per address.
type warnLimiter struct {
	clock   env.Clock
	log     *slog.Logger
	entries map[warnKey]*warnEntry
}

const (
	// warnWindow is how long the warnings of one reason from one host are
	// held after one was logged.
	warnWindow = time.Minute
	// warnHostsMax bounds the (host, reason) entries tracked.
	warnHostsMax = 1024
)

// warnKey is what identical warnings share.
type warnKey struct {
	host string // without the port; "" for the hosts beyond warnHostsMax
	msg  string
}

// warnEntry holds one key's warnings within its window.
type warnEntry struct {
	held int   // warnings held back since the window began
	last []any // the attributes of the last one held
}

func newWarnLimiter(clock env.Clock, log *slog.Logger) *warnLimiter {
	return &warnLimiter{clock: clock, log: log, entries: map[warnKey]*warnEntry{}}
}

// warn logs msg with args, unless a warning with the same msg about the same
// host was logged less than warnWindow ago: then it is counted, and logged
// when that window ends.
func (l *warnLimiter) warn(host, msg string, args ...any) {
	key := warnKey{host: host, msg: msg}
	e := l.entries[key]
	if e == nil && len(l.entries) >= warnHostsMax {
		key.host = ""
		e = l.entries[key]
	}
	if e != nil {
		e.held++
		e.last = args
		return
	}
	l.log.Warn(msg, args...)
	e = &warnEntry{}
	l.entries[key] = e
	l.clock.AfterFunc(warnWindow, func() { l.windowEnded(key, e) })
}

// windowEnded logs what key held in the window just ended and starts the
// next, or forgets key if it held nothing.
func (l *warnLimiter) windowEnded(key warnKey, e *warnEntry) {
	if l.entries[key] != e {
		return // flushed meanwhile
	}
	if e.held == 0 {
		delete(l.entries, key)
		return
	}
	l.logHeld(key, e)
	l.clock.AfterFunc(warnWindow, func() { l.windowEnded(key, e) })
}

// logHeld logs the count of key's held warnings and the last of them, and
// starts counting afresh.
func (l *warnLimiter) logHeld(key warnKey, e *warnEntry) {
	host := key.host
	if host == "" {
		host = "(hosts beyond the " + strconv.Itoa(warnHostsMax) + " tracked)"
	}
	l.log.Warn(key.msg, "host", host, "suppressed", e.held, "window", warnWindow, slog.Group("last", e.last...))
	e.held, e.last = 0, nil
}

// flush logs every count still held and forgets every entry; their timers
// then do nothing. The broker calls it as it shuts down.
func (l *warnLimiter) flush() {
	keys := make([]warnKey, 0, len(l.entries))
	for k := range l.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b warnKey) int {
		if c := strings.Compare(a.msg, b.msg); c != 0 {
			return c
		}
		return strings.Compare(a.host, b.host)
	})
	for _, k := range keys {
		if e := l.entries[k]; e.held > 0 {
			l.logHeld(k, e)
		}
		delete(l.entries, k)
	}
}

// hostOf returns the host of a "host:port" address, without the brackets of
// an IPv6 address.
func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		addr = addr[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
}
