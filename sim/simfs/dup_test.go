package simfs

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/env"
)

// A Dup reads the inode after the original is closed and the name removed,
// and dies with the process, as a duplicated descriptor does.
func TestDupOutlivesCloseAndRemoveButNotTheProcess(t *testing.T) {
	for _, crash := range []func(*Disk){(*Disk).Crash, (*Disk).CrashProcess} {
		d, _ := newDisk(1)
		f, err := d.Create("f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		dup, err := f.(*file).Dup()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.(*file).Dup(); !errors.Is(err, env.ErrClosed) {
			t.Fatalf("Dup of a closed file: err = %v, want env.ErrClosed", err)
		}
		if err := d.Remove("f"); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 5)
		if n, err := dup.ReadAt(p, 0); n != 5 || err != nil || string(p) != "hello" {
			t.Fatalf("ReadAt through the dup after close and remove = %d %q, %v", n, p[:n], err)
		}
		crash(d)
		if _, err := dup.ReadAt(p, 0); !errors.Is(err, env.ErrClosed) {
			t.Fatalf("ReadAt through a dup after its process died: err = %v, want env.ErrClosed", err)
		}
	}
}
