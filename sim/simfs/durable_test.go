package simfs

import (
	"errors"
	"io"
	"io/fs"
	"testing"
)

// TestDurableInspection: DurableStat, ReadDurableAt and DurableGeneration
// show what a crash now would keep at the least, through durable entries
// only, and the generation moves exactly when that changes.
func TestDurableInspection(t *testing.T) {
	d, s := newDisk(1)
	if err := d.MkdirAll("p"); err != nil {
		t.Fatal(err)
	}
	f := mustCreate(t, d, "p/seg")
	mustWrite(t, f, "hello")
	gen := d.DurableGeneration()
	if _, err := d.DurableStat("p/seg"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("DurableStat of a file whose entry is not durable: err = %v, want ErrNotExist", err)
	}
	if err := await(t, s, f.Sync); err != nil {
		t.Fatal(err)
	}
	if d.DurableGeneration() == gen {
		t.Fatal("a sync that made data durable left the generation alone")
	}
	if _, err := d.DurableStat("p/seg"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a synced file is visible through an entry that is not durable")
	}
	for _, dir := range []string{".", "p"} {
		if err := await(t, s, func(done func(error)) { d.SyncDir(dir, done) }); err != nil {
			t.Fatal(err)
		}
	}
	info, err := d.DurableStat("p/seg")
	if err != nil || info.Size != 5 {
		t.Fatalf("DurableStat = %+v, %v; want size 5", info, err)
	}
	mustWrite(t, f, " world")
	gen = d.DurableGeneration()
	if again, _ := d.DurableStat("p/seg"); again != info || d.DurableGeneration() != gen {
		t.Fatalf("an unsynced write changed the durable state: %+v -> %+v", info, again)
	}
	p := make([]byte, 4)
	if n, err := d.ReadDurableAt("p/seg", p, 3); n != 2 || !errors.Is(err, io.EOF) || string(p[:n]) != "lo" {
		t.Fatalf("ReadDurableAt past the durable end = %d %q, %v; want 2 \"lo\", EOF", n, p[:n], err)
	}
	if err := await(t, s, f.Sync); err != nil {
		t.Fatal(err)
	}
	grown, _ := d.DurableStat("p/seg")
	if grown.ID != info.ID || grown.Gen == info.Gen || grown.Size != 11 {
		t.Fatalf("after a second sync DurableStat = %+v, was %+v", grown, info)
	}
}

// TestDurableRewritesCountChangesToDurableBytes: appends made durable leave
// Rewrites alone; a truncation and a rewrite of bytes already durable move
// it, even when the file ends up as long as before (a reader that cached
// what it parsed of the durable contents must parse them again: the
// simulator's durability oracle took a rewritten batch for the old one).
func TestDurableRewritesCountChangesToDurableBytes(t *testing.T) {
	d, s := newDisk(1)
	f := mustCreate(t, d, "seg")
	sync := func() DurableInfo {
		t.Helper()
		for _, step := range []func(func(error)){f.Sync, func(done func(error)) { d.SyncDir(".", done) }} {
			if err := await(t, s, step); err != nil {
				t.Fatal(err)
			}
		}
		info, err := d.DurableStat("seg")
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	mustWrite(t, f, "aaaa")
	first := sync()
	mustWrite(t, f, "bbbb")
	appended := sync()
	if appended.Rewrites != first.Rewrites || appended.Size != 8 {
		t.Fatalf("an append counted as a rewrite: %+v -> %+v", first, appended)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("cccc"), 4); err != nil {
		t.Fatal(err)
	}
	rewritten := sync()
	if rewritten.Size != appended.Size || rewritten.Rewrites == appended.Rewrites {
		t.Fatalf("a truncation and a rewrite to the same size: %+v -> %+v, want Rewrites moved", appended, rewritten)
	}
}
