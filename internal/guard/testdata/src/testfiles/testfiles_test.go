package testfiles

import (
	"os"
	"sync"
	"testing"
	"time"
)

func TestDouble(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = time.Now()
		_ = os.Getpid()
	}()
	wg.Wait()
	for k := range map[int]bool{1: true} {
		t.Log(k)
	}
}
