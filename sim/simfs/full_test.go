package simfs

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
)

func TestFullDiskRefusesAllocations(t *testing.T) {
	d, s := newDisk(1)
	if err := d.MkdirAll("a"); err != nil {
		t.Fatal(err)
	}
	f := mustCreate(t, d, "a/f")
	mustWrite(t, f, "hello") // holds one block
	old := mustCreate(t, d, "a/old")
	mustWrite(t, old, "x")
	d.SetFull(true)
	if !d.Full() {
		t.Fatal("Full() is false after SetFull(true)")
	}

	_, err := d.Create("a/new")
	wantErr(t, "create of a new name", err, env.ErrNoSpace)
	if _, err := d.Stat("a/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused create left an entry: %v", err)
	}
	wantErr(t, "mkdir of a new directory", d.MkdirAll("a/b/c"), env.ErrNoSpace)
	if names, _ := d.List("a"); len(names) != 2 {
		t.Fatalf("a refused mkdir left entries: %v", names)
	}
	if err := d.MkdirAll("a"); err != nil {
		t.Fatalf("mkdir of an existing directory: %v", err)
	}
	wantErr(t, "truncate past the last block", f.Truncate(BlockSize+1), env.ErrNoSpace)
	if size, _ := f.Size(); size != 5 {
		t.Fatalf("a refused truncate changed the size to %d", size)
	}
	n, err := f.WriteAt([]byte("z"), 2*BlockSize)
	wantErr(t, "write past the last block", err, env.ErrNoSpace)
	if n != 0 {
		t.Fatalf("a write wholly past the held blocks wrote %d bytes", n)
	}
	if got := d.Stats().FullRefused; got != 4 {
		t.Fatalf("FullRefused = %d, want 4", got)
	}
	// Recreating an existing file frees its blocks and allocates nothing.
	if _, err := d.Create("a/old"); err != nil {
		t.Fatalf("create of an existing file: %v", err)
	}
	if got := readAll(t, d, "a/old"); got != "" {
		t.Fatalf("recreated file holds %q", got)
	}
	wantErr(t, "sync of a full disk", await(t, s, f.Sync), nil)
}

func TestFullDiskAcceptsWritesWithinTheLastBlockAndSyncs(t *testing.T) {
	d, s := newDisk(2)
	f := mustCreate(t, d, "f")
	mustWrite(t, f, strings.Repeat("a", 100))
	d.SetFull(true)

	// An append and a truncate that stay within the first block succeed.
	mustWrite(t, f, strings.Repeat("b", BlockSize-200))
	if err := f.Truncate(BlockSize); err != nil {
		t.Fatalf("truncate to the end of the last block: %v", err)
	}
	if err := f.Truncate(50); err != nil {
		t.Fatalf("shrinking truncate: %v", err)
	}
	// Overwrites never allocate.
	if _, err := f.WriteAt([]byte("cc"), 10); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	// A write crossing the block's end writes what fits, as write(2) does.
	n, err := f.WriteAt([]byte(strings.Repeat("d", BlockSize)), 48)
	wantErr(t, "write crossing the last block", err, env.ErrNoSpace)
	if want := BlockSize - 48; n != want {
		t.Fatalf("crossing write wrote %d bytes, want the %d that fit", n, want)
	}
	if size, _ := f.Size(); size != BlockSize {
		t.Fatalf("size %d after the crossing write, want %d", size, BlockSize)
	}
	// A file at a block boundary holds no spare space.
	wantErr(t, "append at a block boundary", errOf(f.WriteAt([]byte("e"), BlockSize)), env.ErrNoSpace)

	if err := await(t, s, f.Sync); err != nil {
		t.Fatalf("sync on a full disk: %v", err)
	}
	if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
		t.Fatalf("syncdir on a full disk: %v", err)
	}
	durable, err := d.ReadDurable("f")
	if err != nil || len(durable) != BlockSize {
		t.Fatalf("durable contents after sync: %d bytes, %v", len(durable), err)
	}
}

func errOf(_ int, err error) error { return err }

func TestSetFullFalseRestoresSpace(t *testing.T) {
	d, _ := newDisk(3)
	f := mustCreate(t, d, "f")
	d.SetFull(true)
	wantErr(t, "write to an empty file", errOf(f.Write([]byte("x"))), env.ErrNoSpace)
	d.Crash() // fullness survives a crash
	if !d.Full() {
		t.Fatal("a crash freed the full disk")
	}
	d.SetFull(false)
	g := mustCreate(t, d, "g")
	mustWrite(t, g, strings.Repeat("y", 3*BlockSize))
	if err := g.Truncate(10 * BlockSize); err != nil {
		t.Fatal(err)
	}
	if err := d.MkdirAll("x/y"); err != nil {
		t.Fatal(err)
	}
}

// TestFullDiskIsDeterministic: a full disk gives the same results for the
// same seed, and draws nothing from the disk's random streams: sync
// latencies and injected faults are those of a disk with space.
func TestFullDiskIsDeterministic(t *testing.T) {
	run := func(full bool) (written []int, times []time.Duration) {
		d, s := newDisk(4)
		if err := d.SetFaults(Faults{NoSpaceRate: 0.3}); err != nil {
			t.Fatal(err)
		}
		f := mustCreate(t, d, "f")
		for i := range 20 {
			d.SetFull(full && i%2 == 0)
			n, _ := f.Write([]byte(strings.Repeat("p", 700)))
			_ = await(t, s, f.Sync)
			written, times = append(written, n), append(times, s.Now())
		}
		return written, times
	}
	w1, t1 := run(true)
	w2, t2 := run(true)
	if !slices.Equal(w1, w2) || !slices.Equal(t1, t2) {
		t.Fatalf("same seed, different runs: wrote %v then %v, synced at %v then %v", w1, w2, t1, t2)
	}
	w3, t3 := run(false)
	if !slices.Equal(t1, t3) {
		t.Fatalf("a full disk changed sync latencies: %v, with space %v", t1, t3)
	}
	if slices.Equal(w1, w3) {
		t.Fatalf("a full disk wrote what a disk with space did: %v", w1)
	}
}
