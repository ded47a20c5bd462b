package sim

import (
	"crypto/rand"
	"fmt"
	"io"

	"github.com/sluicemq/sluice/sim/rng"
)

// Some dependencies draw from crypto/rand.Reader rather than from an injected
// source: etcd raft draws its randomized election timeouts from it. While a
// World runs events (inside Step, Run and RunUntil) the package variable is
// swapped for a reader over the world's "crypto" stream, and put back when
// the call returns, so those draws replay with the seed too.
//
// The variable is global to the process, so Worlds must run one at a time:
// tests that build Worlds must not call t.Parallel, and seeds of a sweep run
// one after another. Nesting the same World's Run inside itself is harmless;
// running a second World inside the first, or concurrently, is a bug the
// simulator cannot always see, and panics when it does see it.

// cryptoReader is what crypto/rand.Reader holds while a World runs.
type cryptoReader struct {
	w *World
	r *rng.Rand
}

func (c *cryptoReader) Read(p []byte) (int, error) { return c.r.Read(p) }

func newCryptoReader(w *World, r *rng.Rand) *cryptoReader { return &cryptoReader{w: w, r: r} }

// enterCrypto installs the world's reader, returning what to restore with
// exitCrypto (nil when the reader was already this world's).
func (w *World) enterCrypto() io.Reader {
	if cur, ok := rand.Reader.(*cryptoReader); ok {
		if cur.w != w {
			panic(fmt.Sprintf("sim: World (seed %d) runs while World (seed %d) is running; worlds run one at a time", w.seed, cur.w.seed))
		}
		return nil
	}
	prev := rand.Reader
	rand.Reader = w.crypto
	return prev
}

func (w *World) exitCrypto(prev io.Reader) {
	if prev != nil {
		rand.Reader = prev
	}
}
