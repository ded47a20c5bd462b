package node

import "fmt"

// inFlight tracks metadata changes in flight, by what they change: a topic
// being deleted, a topic's configs being altered. A request that must see
// such a change applied before it can decide waits for it with onFinish,
// then starts over. The zero value is ready to use.
type inFlight[K comparable] struct {
	// waiters maps each key with a change in flight to what runs once the
	// change is over (applied or failed).
	waiters map[K][]func()
}

func (f *inFlight[K]) pending(k K) bool {
	_, ok := f.waiters[k]
	return ok
}

// start marks a change of k in flight; at most one at a time.
func (f *inFlight[K]) start(k K) {
	if f.pending(k) {
		panic(fmt.Sprintf("node: a second change of %v started while one is in flight", k))
	}
	if f.waiters == nil {
		f.waiters = map[K][]func(){}
	}
	f.waiters[k] = nil
}

// onFinish runs fn once the change of k in flight is over.
func (f *inFlight[K]) onFinish(k K, fn func()) {
	if !f.pending(k) {
		panic(fmt.Sprintf("node: waiting for a change of %v that is not in flight", k))
	}
	f.waiters[k] = append(f.waiters[k], fn)
}

// finish ends the change of k and runs what waited for it, in order.
func (f *inFlight[K]) finish(k K) {
	if !f.pending(k) {
		panic(fmt.Sprintf("node: finishing a change of %v that is not in flight", k))
	}
	waiters := f.waiters[k]
	delete(f.waiters, k)
	for _, fn := range waiters {
		fn()
	}
}
