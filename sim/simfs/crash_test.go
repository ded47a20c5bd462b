package simfs

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
)

// The crash-consistency test drives a disk with random operations beside a
// model that records, per file, the synced contents and the changes since,
// and per directory, the synced entries and the entry changes since. At
// random points the disk crashes, and what survived is checked against the
// model: every directory shows its synced entries plus a prefix of its
// changes (a rename between directories kept in both or neither), and every
// surviving file shows its synced contents plus a prefix of its changes, the
// last one possibly torn, each byte of a torn write old or new.

func seedCount(t *testing.T, def int) int {
	if s := os.Getenv("SLUICE_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("SLUICE_SEEDS=%q is not a positive count", s)
		}
		return n
	}
	return def
}

func TestCrashConsistency(t *testing.T) {
	var total Stats
	n := seedCount(t, 300)
	for seed := range uint64(n) {
		_, st := runWorkload(t, seed)
		total.add(st)
	}
	t.Logf("%d seeds: %+v", n, total)
	if total.WritesTorn == 0 || total.ChangesLost == 0 || total.EntriesLost == 0 || total.EntriesKept == 0 || total.LostAfterKill == 0 {
		t.Fatalf("the workload never reached some crash outcomes: %+v", total)
	}
}

func (s *Stats) add(o Stats) {
	s.Crashes += o.Crashes
	s.SyncsDone += o.SyncsDone
	s.SyncsFailed += o.SyncsFailed
	s.SyncsLost += o.SyncsLost
	s.InjectedIO += o.InjectedIO
	s.InjectedNoSpace += o.InjectedNoSpace
	s.ShortWrites += o.ShortWrites
	s.ChangesKept += o.ChangesKept
	s.ChangesLost += o.ChangesLost
	s.WritesTorn += o.WritesTorn
	s.EntriesKept += o.EntriesKept
	s.EntriesLost += o.EntriesLost
	s.ProcessCrashes += o.ProcessCrashes
	s.LostAfterKill += o.LostAfterKill
}

func TestDeterminismSameSeedSameOutcome(t *testing.T) {
	a, _ := runWorkload(t, 42)
	b, _ := runWorkload(t, 42)
	if a != b {
		t.Fatalf("seed 42 ran twice gave %s and %s", a, b)
	}
	if c, _ := runWorkload(t, 43); c == a {
		t.Fatalf("seeds 42 and 43 gave the same transcript %s", a)
	}
}

var (
	testDirs  = []string{".", "a", "b"}
	testNames = []string{"f0", "f1", "f2", "f3"}
)

type mOp struct {
	trunc bool
	off   int64
	p     []byte
	size  int64
}

type mFile struct {
	synced  []byte
	cur     []byte
	ops     []mOp // issued after synced, in order
	synced0 int   // how many ops issued ever had been made durable
}

type mDirOp struct {
	seq              int
	from, to         string // directories; "" for none
	fromName, toName string
	id               uint64
}

func (op *mDirOp) other(dir string) string {
	switch {
	case op.from != "" && op.from != dir:
		return op.from
	case op.to != "" && op.to != dir:
		return op.to
	}
	return ""
}

type mDir struct {
	durable map[string]uint64
	cur     map[string]uint64
	ops     []*mDirOp
}

type handle struct {
	f   env.File
	id  uint64
	pos int64
}

type harness struct {
	t      *testing.T
	seed   uint64
	d      *Disk
	s      *sched.Scheduler
	w      *rng.Rand
	faults bool

	files   map[uint64]*mFile
	dirs    map[string]*mDir
	seq     int
	handles []*handle
	// epoch counts crashes; a completion from an earlier epoch is a bug.
	epoch int
	// expected holds, per file id or directory, the tokens of syncs in
	// flight in the order issued.
	expected map[string][]int
	token    int
	log      []string
}

// runWorkload runs one seed's workload through crashes, checking each, and
// returns a digest of everything observed and the disk's stats.
func runWorkload(t *testing.T, seed uint64) (string, Stats) {
	t.Helper()
	root := rng.New(seed)
	s := sched.New()
	h := &harness{
		t: t, seed: seed, s: s,
		d:        New(root.Fork("disk"), sched.Direct(s, "n1")),
		w:        root.Fork("workload"),
		files:    map[uint64]*mFile{},
		dirs:     map[string]*mDir{},
		expected: map[string][]int{},
	}
	for _, dir := range testDirs {
		h.dirs[dir] = &mDir{durable: map[string]uint64{}, cur: map[string]uint64{}}
	}
	h.setup()
	h.faults = h.w.Intn(2) == 0
	for range 1 + h.w.Intn(3) {
		h.setFaults(h.faults)
		for range h.w.Intn(150) {
			h.step()
		}
		h.setFaults(false)
		if h.w.Intn(2) == 0 {
			h.killAndCheck()
			h.setFaults(h.faults)
			for range h.w.Intn(100) {
				h.step()
			}
			h.setFaults(false)
		}
		h.crashAndCheck()
	}
	sum := fnv.New64a()
	for _, line := range h.log {
		sum.Write([]byte(line))
		sum.Write([]byte{'\n'})
	}
	return fmt.Sprintf("%x/%s/%+v", sum.Sum64(), s.Trace(), h.d.Stats()), h.d.Stats()
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("seed %d: "+format, append([]any{h.seed}, args...)...)
}

func (h *harness) note(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

func (h *harness) setFaults(on bool) {
	f := Faults{}
	if on {
		f = Faults{EIORate: 0.02, NoSpaceRate: 0.02}
	}
	if err := h.d.SetFaults(f); err != nil {
		h.fatalf("SetFaults: %v", err)
	}
}

// failed reports whether an operation failed, failing the test unless the
// failure is an injected one.
func (h *harness) failed(what string, err error) bool {
	h.t.Helper()
	h.note("%s: %v", what, err)
	if err == nil {
		return false
	}
	if !h.faults || !(errors.Is(err, env.ErrIO) || errors.Is(err, env.ErrNoSpace)) {
		h.fatalf("%s: %v", what, err)
	}
	return true
}

func (h *harness) setup() {
	for _, dir := range testDirs[1:] {
		if err := h.d.MkdirAll(dir); err != nil {
			h.fatalf("MkdirAll(%s): %v", dir, err)
		}
	}
	h.d.SyncDir(".", func(err error) {
		if err != nil {
			h.fatalf("SyncDir(.): %v", err)
		}
	})
	for h.s.Step() {
	}
}

func pathOf(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

func inodeOf(t *testing.T, d *Disk, name string) uint64 {
	_, _, ino, err := d.lookup("test", name)
	if err != nil || ino == nil {
		t.Fatalf("%s has no inode: %v", name, err)
	}
	return ino.id
}

// step performs one random operation.
func (h *harness) step() {
	switch k := h.w.Intn(20); {
	case k < 3:
		h.create()
	case k < 9 && len(h.handles) > 0:
		h.write(h.handles[h.w.Intn(len(h.handles))])
	case k < 10 && len(h.handles) > 0:
		h.truncate(h.handles[h.w.Intn(len(h.handles))])
	case k < 11 && len(h.handles) > 0:
		h.read(h.handles[h.w.Intn(len(h.handles))])
	case k < 12:
		h.rename()
	case k < 13:
		h.remove()
	case k < 15 && len(h.handles) > 0:
		h.sync(h.handles[h.w.Intn(len(h.handles))])
	case k < 17:
		h.syncDir(testDirs[h.w.Intn(len(testDirs))])
	case k < 18 && len(h.handles) > 0:
		i := h.w.Intn(len(h.handles))
		if err := h.handles[i].f.Close(); err != nil {
			h.fatalf("Close: %v", err)
		}
		h.handles = slices.Delete(h.handles, i, i+1)
	default:
		for range h.w.Intn(4) {
			h.s.Step()
		}
	}
}

func (h *harness) create() {
	dir := testDirs[h.w.Intn(len(testDirs))]
	name := testNames[h.w.Intn(len(testNames))]
	path := pathOf(dir, name)
	f, err := h.d.Create(path)
	if h.failed("create "+path, err) {
		return
	}
	id := inodeOf(h.t, h.d, path)
	if old, ok := h.dirs[dir].cur[name]; ok {
		if old != id {
			h.fatalf("Create(%s) of an existing file made inode %d, want %d", path, id, old)
		}
		h.fileChange(id, mOp{trunc: true, size: 0})
	} else {
		h.files[id] = &mFile{}
		h.dirChange(&mDirOp{to: dir, toName: name, id: id})
	}
	h.handles = append(h.handles, &handle{f: f, id: id})
}

func (h *harness) fileChange(id uint64, op mOp) {
	mf := h.files[id]
	mf.cur = mApply(mf.cur, op)
	mf.ops = append(mf.ops, op)
}

func (h *harness) dirChange(op *mDirOp) {
	h.seq++
	op.seq = h.seq
	if op.from != "" {
		delete(h.dirs[op.from].cur, op.fromName)
		h.dirs[op.from].ops = append(h.dirs[op.from].ops, op)
	}
	if op.to != "" {
		h.dirs[op.to].cur[op.toName] = op.id
		if op.to != op.from {
			h.dirs[op.to].ops = append(h.dirs[op.to].ops, op)
		}
	}
}

func (h *harness) randomBytes() []byte {
	p := make([]byte, 1+h.w.Intn(1200))
	h.w.Read(p)
	return p
}

func (h *harness) write(hd *handle) {
	p := h.randomBytes()
	off := hd.pos
	var n int
	var err error
	if h.w.Intn(2) == 0 {
		n, err = hd.f.Write(p)
		hd.pos += int64(n)
	} else {
		off = int64(h.w.Intn(len(h.files[hd.id].cur) + 700))
		n, err = hd.f.WriteAt(p, off)
	}
	if n < 0 || n > len(p) || (n < len(p) && err == nil) {
		h.fatalf("write of %d bytes returned %d, %v", len(p), n, err)
	}
	h.failed(fmt.Sprintf("write %d at %d: %d", len(p), off, n), err)
	if n > 0 {
		h.fileChange(hd.id, mOp{off: off, p: p[:n]})
	}
}

func (h *harness) truncate(hd *handle) {
	size := int64(h.w.Intn(len(h.files[hd.id].cur) + 300))
	if h.failed(fmt.Sprintf("truncate %d", size), hd.f.Truncate(size)) {
		return
	}
	h.fileChange(hd.id, mOp{trunc: true, size: size})
}

func (h *harness) read(hd *handle) {
	cur := h.files[hd.id].cur
	off := h.w.Intn(len(cur) + 10)
	p := make([]byte, h.w.Intn(2000))
	n, err := hd.f.ReadAt(p, int64(off))
	if err == nil && n < len(p) || err == io.EOF && n == len(p) {
		h.fatalf("ReadAt(%d, %d) = %d, %v: io.EOF exactly when short", len(p), off, n, err)
	}
	if err == io.EOF {
		err = nil
	}
	if h.failed(fmt.Sprintf("read %d at %d", len(p), off), err) {
		return
	}
	want := []byte{}
	if off < len(cur) {
		want = cur[off:min(len(cur), off+len(p))]
	}
	if !bytes.Equal(p[:n], want) {
		h.fatalf("ReadAt(%d, %d) of inode %d returned %d bytes that differ from the model's %d", len(p), off, hd.id, n, len(want))
	}
	h.note("read %x", p[:n])
}

// entries lists the model's current files as (dir, name), in order.
func (h *harness) entries() [][2]string {
	var all [][2]string
	for _, dir := range testDirs {
		for _, name := range slices.Sorted(maps.Keys(h.dirs[dir].cur)) {
			all = append(all, [2]string{dir, name})
		}
	}
	return all
}

func (h *harness) rename() {
	all := h.entries()
	if len(all) == 0 {
		return
	}
	src := all[h.w.Intn(len(all))]
	dst := [2]string{testDirs[h.w.Intn(len(testDirs))], testNames[h.w.Intn(len(testNames))]}
	srcPath, dstPath := pathOf(src[0], src[1]), pathOf(dst[0], dst[1])
	if h.failed("rename "+srcPath+" "+dstPath, h.d.Rename(srcPath, dstPath)) || src == dst {
		return
	}
	id := h.dirs[src[0]].cur[src[1]]
	h.dirChange(&mDirOp{from: src[0], fromName: src[1], to: dst[0], toName: dst[1], id: id})
}

func (h *harness) remove() {
	all := h.entries()
	if len(all) == 0 {
		return
	}
	e := all[h.w.Intn(len(all))]
	if h.failed("remove "+pathOf(e[0], e[1]), h.d.Remove(pathOf(e[0], e[1]))) {
		return
	}
	h.dirChange(&mDirOp{from: e[0], fromName: e[1]})
}

// expect registers a sync in flight under key and returns a completion
// check: completions come once, in issue order, never after a crash.
func (h *harness) expect(key string) func() {
	h.token++
	token, epoch := h.token, h.epoch
	h.expected[key] = append(h.expected[key], token)
	return func() {
		if h.epoch != epoch {
			h.fatalf("a %s sync issued before crash %d completed after it", key, epoch+1)
		}
		q := h.expected[key]
		if len(q) == 0 || q[0] != token {
			h.fatalf("%s: sync %d completed out of order (waiting: %v)", key, token, q)
		}
		h.expected[key] = q[1:]
	}
}

func (h *harness) sync(hd *handle) {
	mf := h.files[hd.id]
	upto := mf.synced0 + len(mf.ops)
	check := h.expect(fmt.Sprint("file ", hd.id))
	hd.f.Sync(func(err error) {
		check()
		if h.failed(fmt.Sprintf("sync of inode %d", hd.id), err) {
			return
		}
		for mf.synced0 < upto {
			mf.synced = mApply(mf.synced, mf.ops[0])
			mf.ops = mf.ops[1:]
			mf.synced0++
		}
	})
}

func (h *harness) syncDir(dir string) {
	upto := h.seq
	check := h.expect("dir " + dir)
	h.d.SyncDir(dir, func(err error) {
		check()
		if h.failed("syncdir "+dir, err) {
			return
		}
		h.flushDir(dir, upto)
	})
}

// flushDir is the documented SyncDir rule: dir's changes up to upto become
// durable, and a rename between directories takes with it the other
// directory's changes issued before it.
func (h *harness) flushDir(dir string, upto int) {
	md := h.dirs[dir]
	for len(md.ops) > 0 && md.ops[0].seq <= upto {
		op := md.ops[0]
		if other := op.other(dir); other != "" {
			h.flushDir(other, op.seq-1)
			od := h.dirs[other]
			if len(od.ops) == 0 || od.ops[0] != op {
				h.fatalf("model: rename %d not next in %s", op.seq, other)
			}
			od.ops = od.ops[1:]
		}
		md.ops = md.ops[1:]
		if op.from != "" {
			delete(h.dirs[op.from].durable, op.fromName)
		}
		if op.to != "" {
			h.dirs[op.to].durable[op.toName] = op.id
		}
	}
}

// killAndCheck crashes the process only: old handles are dead and their
// syncs never call back, but every file and entry reads as before, the
// unsynced changes still unsynced in the model.
func (h *harness) killAndCheck() {
	old := h.handles
	h.d.CrashProcess()
	h.epoch++
	for h.s.Step() { // completions of the old process must not run
	}
	for _, hd := range old {
		if _, err := hd.f.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
			h.fatalf("Write on a file opened before the process crash: %v", err)
		}
	}
	for _, dir := range testDirs {
		names, err := h.d.List(dir)
		if err != nil {
			h.fatalf("List(%s) after a process crash: %v", dir, err)
		}
		if dir == "." {
			names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(testDirs, n) })
		}
		if want := slices.Sorted(maps.Keys(h.dirs[dir].cur)); !slices.Equal(names, want) {
			h.fatalf("after a process crash %s lists %v, want %v", dir, names, want)
		}
		for _, name := range names {
			id := h.dirs[dir].cur[name]
			if got := readAll(h.t, h.d, pathOf(dir, name)); got != string(h.files[id].cur) {
				h.fatalf("after a process crash %s reads %d bytes, not the page cache's %d", pathOf(dir, name), len(got), len(h.files[id].cur))
			}
		}
	}
	h.note("process crash")
	h.handles = nil
	h.expected = map[string][]int{}
}

func (h *harness) crashAndCheck() {
	old := h.handles
	h.d.Crash()
	h.epoch++
	for h.s.Step() { // completions of the old epoch must not run
	}
	for _, hd := range old {
		if _, err := hd.f.Write([]byte("x")); !errors.Is(err, env.ErrClosed) {
			h.fatalf("Write on a file opened before the crash: %v", err)
		}
	}
	observed := h.observeEntries()
	h.checkEntries(observed)
	files := map[uint64]*mFile{}
	for _, dir := range testDirs {
		for _, name := range slices.Sorted(maps.Keys(observed[dir])) {
			id := observed[dir][name]
			if files[id] != nil {
				h.fatalf("inode %d survived under two names", id)
			}
			got := []byte(readAll(h.t, h.d, pathOf(dir, name)))
			mf := h.files[id]
			if !possibleOutcome(mf.synced, mf.ops, got) {
				h.fatalf("%s (inode %d) survived with %d bytes, not its %d synced bytes plus a prefix of its %d changes",
					pathOf(dir, name), id, len(got), len(mf.synced), len(mf.ops))
			}
			h.note("survived %s: %x", pathOf(dir, name), got)
			files[id] = &mFile{synced: got, cur: bytes.Clone(got)}
		}
	}
	h.files = files
	for _, dir := range testDirs {
		h.dirs[dir] = &mDir{durable: maps.Clone(observed[dir]), cur: maps.Clone(observed[dir])}
	}
	h.handles = nil
	h.expected = map[string][]int{}
}

func (h *harness) observeEntries() map[string]map[string]uint64 {
	observed := map[string]map[string]uint64{}
	for _, dir := range testDirs {
		names, err := h.d.List(dir)
		if err != nil {
			h.fatalf("List(%s) after a crash: %v", dir, err)
		}
		observed[dir] = map[string]uint64{}
		for _, name := range names {
			if dir == "." && (name == "a" || name == "b") {
				continue
			}
			observed[dir][name] = inodeOf(h.t, h.d, pathOf(dir, name))
		}
	}
	return observed
}

// checkEntries requires each directory to show its durable entries plus a
// prefix of its changes, with the prefixes agreeing on every rename between
// two directories.
func (h *harness) checkEntries(observed map[string]map[string]uint64) {
	cands := make([][]int, len(testDirs))
	for i, dir := range testDirs {
		md := h.dirs[dir]
		m := maps.Clone(md.durable)
		for k := 0; ; k++ {
			if maps.Equal(m, observed[dir]) {
				cands[i] = append(cands[i], k)
			}
			if k == len(md.ops) {
				break
			}
			op := md.ops[k]
			if op.from == dir {
				delete(m, op.fromName)
			}
			if op.to == dir {
				m[op.toName] = op.id
			}
		}
		if len(cands[i]) == 0 {
			h.fatalf("directory %s after the crash holds %v: not its durable %v plus a prefix of its %d changes",
				dir, observed[dir], md.durable, len(md.ops))
		}
	}
	for _, a := range cands[0] {
		for _, b := range cands[1] {
			for _, c := range cands[2] {
				if h.renamesAgree([]int{a, b, c}) {
					return
				}
			}
		}
	}
	h.fatalf("no choice of prefixes %v keeps every rename in both directories or neither", cands)
}

func (h *harness) renamesAgree(keep []int) bool {
	kept := func(dir string, op *mDirOp) bool {
		i := slices.Index(testDirs, dir)
		return slices.Index(h.dirs[dir].ops, op) < keep[i]
	}
	for _, dir := range testDirs {
		for _, op := range h.dirs[dir].ops {
			if other := op.other(dir); other != "" && kept(dir, op) != kept(other, op) {
				return false
			}
		}
	}
	return true
}

func mApply(b []byte, op mOp) []byte {
	b = bytes.Clone(b)
	if op.trunc {
		if op.size <= int64(len(b)) {
			return b[:op.size]
		}
		return append(b, make([]byte, op.size-int64(len(b)))...)
	}
	if end := op.off + int64(len(op.p)); end > int64(len(b)) {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	copy(b[op.off:], op.p)
	return b
}

// possibleOutcome reports whether got is synced with a prefix of ops
// applied, the last one possibly a torn write.
func possibleOutcome(synced []byte, ops []mOp, got []byte) bool {
	b := synced
	for k := 0; ; k++ {
		if bytes.Equal(b, got) {
			return true
		}
		if k == len(ops) {
			return false
		}
		if !ops[k].trunc && tornOutcome(b, ops[k], got) {
			return true
		}
		b = mApply(b, ops[k])
	}
}

// tornOutcome reports whether got could be the write op torn over before:
// every byte in the write's range old or new, bytes past the old end new and
// contiguous from the write (a hole before the write zero), nothing else
// changed.
func tornOutcome(before []byte, op mOp, got []byte) bool {
	size, off, end := int64(len(before)), op.off, op.off+int64(len(op.p))
	n := int64(len(got))
	if n < size || n > max(size, end) || (n > size && n <= off) {
		return false
	}
	for i := range n {
		switch {
		case i >= off && i < end && i < size:
			if got[i] != before[i] && got[i] != op.p[i-off] {
				return false
			}
		case i >= off && i < end:
			if got[i] != op.p[i-off] {
				return false
			}
		case i < size:
			if got[i] != before[i] {
				return false
			}
		default:
			if got[i] != 0 {
				return false
			}
		}
	}
	return true
}
