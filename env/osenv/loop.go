package osenv

import (
	"sync"
	"sync/atomic"
)

// Loop is the production env.Loop: exactly one goroutine, the one that calls
// Run, executes posted functions one at a time in the order they were posted.
//
// Post may be called from any goroutine and never blocks: the queue is an
// unbounded slice behind a mutex, plus a one-slot channel that wakes Run when
// the queue goes from empty to non-empty.
//
// Stop ends Run after the function running at that moment returns. Work still
// queued then is dropped, never run, and so is anything posted later: a
// stopped loop is finished, not paused. Callbacks of a node's environment that
// arrive after Stop are dropped with it, so stop the loop only when the node
// is done (Node.Close then releases the node's files, sockets and goroutines).
type Loop struct {
	mu    sync.Mutex
	queue []func()
	// spare is the previous batch's backing array, reused so that a busy
	// loop does not allocate a new queue every turn.
	spare []func()

	wake    chan struct{} // one slot: "the queue may be non-empty"
	stopped atomic.Bool
	running atomic.Bool
	done    chan struct{} // closed when Run returns
}

// NewLoop returns a loop that is not yet running; call Run to run it.
func NewLoop() *Loop {
	return &Loop{
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// Post queues f to run on the loop after everything already queued. It is
// safe from any goroutine, never blocks, and never runs f before returning.
// After Stop it drops f.
func (l *Loop) Post(f func()) {
	if f == nil {
		panic("osenv: Loop.Post of a nil func")
	}
	if l.stopped.Load() {
		return
	}
	l.mu.Lock()
	l.queue = append(l.queue, f)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run executes posted functions until Stop is called, then returns. It must be
// called once, and the calling goroutine becomes the loop goroutine. A panic
// in a posted function propagates out of Run: the node is broken and the
// process should die with the stack.
func (l *Loop) Run() {
	if !l.running.CompareAndSwap(false, true) {
		panic("osenv: Loop.Run called twice")
	}
	defer close(l.done)
	for !l.stopped.Load() {
		batch := l.take()
		if len(batch) == 0 {
			<-l.wake
			continue
		}
		for i, f := range batch {
			if l.stopped.Load() {
				break
			}
			batch[i] = nil // let f be collected once run
			f()
		}
		l.recycle(batch)
	}
	l.mu.Lock()
	l.queue = nil // dropped: see the type's comment
	l.mu.Unlock()
}

// take removes and returns everything queued.
func (l *Loop) take() []func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	batch := l.queue
	l.queue = l.spare[:0]
	l.spare = nil
	return batch
}

// recycle keeps batch's array for a later turn.
func (l *Loop) recycle(batch []func()) {
	clear(batch)
	l.mu.Lock()
	l.spare = batch[:0]
	l.mu.Unlock()
}

// Stop asks Run to return after the function running now, dropping the rest
// of the queue. It is safe from any goroutine, including the loop itself, and
// returns at once; Done reports when Run has returned. Stopping a loop that
// was never run just makes a later Run return at once.
func (l *Loop) Stop() {
	l.stopped.Store(true)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Done is closed when Run returns.
func (l *Loop) Done() <-chan struct{} { return l.done }
