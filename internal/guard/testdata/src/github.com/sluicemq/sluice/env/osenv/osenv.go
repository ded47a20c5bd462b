// Package osenv implements the environment over the OS: the guard skips it.
package osenv

import (
	"os"
	"sync"
	"time"
)

func run(mu *sync.Mutex) {
	go func() {
		mu.Lock()
		defer mu.Unlock()
		_ = time.Now()
		_, _ = os.Open("x")
	}()
}
