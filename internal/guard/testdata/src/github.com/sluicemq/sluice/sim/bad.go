package sim

import (
	"crypto/rand"
	mrand "math/rand" // want `forbidden-import: import of math/rand`
	"time"
)

// The exemption covers rand.Reader and nothing else.
func draw(p []byte) {
	_, _ = rand.Read(p) // want `forbidden-import: crypto/rand.Read: the simulator may only swap crypto/rand.Reader`
	_ = rand.Text()     // want `crypto/rand.Text: the simulator may only swap`
	_ = mrand.Int()
	_ = time.Now() // want `real-time: time.Now`
	go func() {}() // want `go-statement`
}
