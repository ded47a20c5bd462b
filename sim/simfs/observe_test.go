package simfs

import (
	"testing"
	"time"
)

func TestObserverHearsTheMomentsThatOpenWindows(t *testing.T) {
	d, s := newDisk(2)
	var got []Event
	d.SetObserver(func(ev Event) { got = append(got, ev) })
	f := mustCreate(t, d, "a.log")
	mustCreate(t, d, "a.log") // truncates: not a new file
	mustWrite(t, f, "abc")
	if err := f.Truncate(1); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("a.log", "b.log"); err != nil {
		t.Fatal(err)
	}
	f.Sync(nil)
	d.SyncDir(".", nil)
	for s.Step() {
	}
	want := []Event{
		{Op: OpCreate, Name: "a.log", Created: true},
		{Op: OpCreate, Name: "a.log"},
		{Op: OpTruncate, Name: "a.log", Shrunk: true},
		{Op: OpRename, Name: "b.log"},
		{Op: OpSync, Name: "a.log"},
		{Op: OpSyncDir, Name: "."},
		// Completions, in the order their latencies end (here the
		// directory's first), with what is still in flight.
		{Op: OpSyncDir, Name: ".", Done: true, Pending: 1},
		{Op: OpSync, Name: "a.log", Done: true},
	}
	if len(got) != len(want) {
		t.Fatalf("heard %+v, want %+v", got, want)
	}
	for i := range want {
		latency := got[i].Latency
		got[i].Latency = 0
		if got[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
		isSync := (want[i].Op == OpSync || want[i].Op == OpSyncDir) && !want[i].Done
		if isSync != (latency >= DefaultSyncLatencyMin && latency <= DefaultSyncLatencyMax) {
			t.Errorf("event %d (%s): latency %v", i, want[i].Op, latency)
		}
	}
}

// TestSabotageSyncEarly: the sync is reported done at once, but a crash
// before its latency takes the data.
func TestSabotageSyncEarly(t *testing.T) {
	d, s := newDisk(3)
	if err := d.SetSyncLatency(time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	d.SetSabotage(SabotageSyncEarly)
	f := mustCreate(t, d, "f")
	mustWrite(t, f, "acked")
	d.SyncDir(".", nil)
	for s.Step() {
	}
	start := s.Now()
	if err := await(t, s, f.Sync); err != nil || s.Now()-start >= time.Second {
		t.Fatalf("Sync reported %v after %v, want nil at once", err, s.Now()-start)
	}
	d.Crash()
	if got, _ := d.ReadDurable("f"); len(got) != 0 {
		t.Fatalf("a crash before the sync's latency kept %q", got)
	}
}

// TestSabotageRollUnsynced: the first segment's entry becomes durable, a
// second segment's does not (nor what follows it), though SyncDir reports
// success.
func TestSabotageRollUnsynced(t *testing.T) {
	d, s := newDisk(4)
	d.SetSabotage(SabotageRollUnsynced)
	sync := func() {
		if err := await(t, s, func(done func(error)) { d.SyncDir(".", done) }); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, d, "00.log")
	sync()
	mustCreate(t, d, "01.log")
	mustCreate(t, d, "checkpoint")
	sync()
	names, _ := d.ListDurable(".")
	if len(names) != 1 || names[0] != "00.log" {
		t.Fatalf("durable entries %v, want only 00.log", names)
	}
}
