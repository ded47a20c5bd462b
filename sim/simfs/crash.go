package simfs

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Crash is a power loss or a machine crash; the package documentation says
// what survives. Open files become invalid and pending Syncs and SyncDirs
// never complete. Afterwards everything on the disk is durable.
func (d *Disk) Crash() {
	d.endProcess()
	d.stats.Crashes++
	d.resolveEntries(d.directories())
	d.rebuild()
	d.durableGen++
}

// CrashProcess is the death of the process using the disk while the machine
// stays up (kill -9, a panic, an OOM kill): open files become invalid and
// pending Syncs and SyncDirs never call back, but the page cache is kept.
// Reads by the next process see every change, synced or not, and the
// unsynced ones stay as volatile as before: a later Crash may take them.
// Syncs in flight are abandoned without making anything durable.
func (d *Disk) CrashProcess() {
	d.endProcess()
	d.stats.ProcessCrashes++
	d.killedAt = d.seq
}

// endProcess invalidates the open files and the syncs in flight of the
// process using the disk. Abandoned syncs stay queued on their inodes until
// a later sync of the same inode or a Crash discards them.
func (d *Disk) endProcess() {
	d.incarnation++
	clear(d.locks) // dead already: each belongs to an older incarnation
	d.stats.SyncsLost += d.pendingSyncs
	d.pendingSyncs = 0
}

// directories returns, in creation order, every directory whose entries a
// crash could keep: those reachable through current entries, durable entries
// or unsynced changes.
func (d *Disk) directories() []*inode {
	seen := map[*inode]bool{d.root: true}
	queue := []*inode{d.root}
	visit := func(ino *inode) {
		if ino != nil && ino.isDir && !seen[ino] {
			seen[ino] = true
			queue = append(queue, ino)
		}
	}
	var dirs []*inode
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		dirs = append(dirs, dir)
		for _, name := range slices.Sorted(maps.Keys(dir.entries)) {
			visit(dir.entries[name])
		}
		for _, name := range slices.Sorted(maps.Keys(dir.durableEntries)) {
			visit(dir.durableEntries[name])
		}
		for _, op := range dir.dirOps {
			visit(op.from)
			visit(op.to)
			visit(op.ino)
		}
	}
	slices.SortFunc(dirs, func(a, b *inode) int { return cmp.Compare(a.id, b.id) })
	return dirs
}

// resolveEntries makes durable, in each directory, a seeded prefix of its
// unsynced changes, shortened until every rename between two directories is
// kept in both or in neither.
func (d *Disk) resolveEntries(dirs []*inode) {
	keep := make(map[*inode]int, len(dirs))
	for _, dir := range dirs {
		keep[dir] = d.choosePrefix(len(dir.dirOps))
	}
	for changed := true; changed; {
		changed = false
		for _, dir := range dirs {
			if i := firstOrphanedRename(dir, keep); i >= 0 {
				keep[dir] = i
				changed = true
			}
		}
	}
	var kept []*dirOp
	for _, dir := range dirs {
		for i, op := range dir.dirOps {
			if owner(op) != dir {
				continue // counted and applied with its other directory
			}
			if i < keep[dir] {
				kept = append(kept, op)
				d.stats.EntriesKept++
			} else {
				d.stats.EntriesLost++
				d.countLostAfterKill(op.seq)
			}
		}
	}
	slices.SortFunc(kept, func(a, b *dirOp) int { return cmp.Compare(a.seq, b.seq) })
	for _, op := range kept {
		applyDirOp(op, func(dir *inode) map[string]*inode { return dir.durableEntries })
	}
}

// firstOrphanedRename returns the index of the first change dir keeps that
// the other directory it touches does not, or -1.
func firstOrphanedRename(dir *inode, keep map[*inode]int) int {
	for i, op := range dir.dirOps[:keep[dir]] {
		other := op.other(dir)
		if other == nil {
			continue
		}
		j := slices.Index(other.dirOps, op)
		if j < 0 {
			panic(fmt.Sprintf("simfs: change %d of directory %d is missing from directory %d", op.seq, dir.id, other.id))
		}
		if j >= keep[other] {
			return i
		}
	}
	return -1
}

// owner is the one directory under which a change is counted and applied.
func owner(op *dirOp) *inode {
	if op.from != nil {
		return op.from
	}
	return op.to
}

// rebuild walks the durable tree from the root: what it reaches survived.
// Each surviving file keeps a seeded prefix of its unsynced changes; then the
// current state of everything reached is its durable state.
func (d *Disk) rebuild() {
	seen := map[*inode]bool{d.root: true}
	queue := []*inode{d.root}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		dir.entries = cloneEntries(dir.durableEntries)
		dir.dirOps = nil
		dir.syncs = nil
		for _, name := range slices.Sorted(maps.Keys(dir.entries)) {
			ino := dir.entries[name]
			if seen[ino] {
				panic(fmt.Sprintf("simfs: inode %d survives a crash under two names, one of them %q in directory %d", ino.id, name, dir.id))
			}
			seen[ino] = true
			if ino.isDir {
				queue = append(queue, ino)
			} else {
				d.resolveFile(ino)
			}
		}
	}
}

// resolveFile keeps a seeded prefix of a file's unsynced changes, possibly
// tearing the last one if it is a write.
func (d *Disk) resolveFile(ino *inode) {
	n := len(ino.ops)
	k := d.choosePrefix(n)
	for i, op := range ino.ops[:k] {
		if i == k-1 && !op.trunc && d.crash.Intn(2) == 0 {
			if op.off < ino.durable.Len() {
				ino.durableRewrites++
			}
			d.tear(&ino.durable, op)
			d.stats.WritesTorn++
			d.countLostAfterKill(op.seq)
			continue
		}
		applyDurable(ino, op)
		d.stats.ChangesKept++
	}
	d.stats.ChangesLost += n - k
	for _, op := range ino.ops[k:] {
		d.countLostAfterKill(op.seq)
	}
	ino.data = ino.durable.clone()
	ino.ops = nil
	ino.syncs = nil
	ino.durableGen++
}

// countLostAfterKill counts a change a crash lost (or tore) that a process
// killed since had made: the next process may have read it, and served it.
func (d *Disk) countLostAfterKill(seq uint64) {
	if seq <= d.killedAt {
		d.stats.LostAfterKill++
	}
}

// choosePrefix picks how many of n unsynced changes a crash keeps, favouring
// the extremes (none, all) that a uniform choice would rarely pick for large n.
func (d *Disk) choosePrefix(n int) int {
	if n == 0 {
		return 0
	}
	switch d.crash.Intn(4) {
	case 0:
		return 0
	case 1:
		return n
	}
	return d.crash.Intn(n + 1)
}

// tear applies part of a write: a prefix of its bytes, or some of its
// sectors. Sectors within the file's previous length land independently;
// those reaching past it land only as a prefix, so no hole is left that
// nothing wrote.
func (d *Disk) tear(c *content, op fileOp) {
	if d.crash.Intn(2) == 0 {
		if m := d.crash.Intn(len(op.p)); m > 0 {
			c.writeAt(op.off, op.p[:m])
		}
		return
	}
	oldEnd := c.Len()
	end := op.off + int64(len(op.p))
	growing := true
	for s := op.off; s < end; {
		e := min((s/SectorSize+1)*SectorSize, end)
		piece := op.p[s-op.off : e-op.off]
		kept := d.crash.Intn(2) == 0
		switch {
		case e <= oldEnd:
			if kept {
				c.writeAt(s, piece)
			}
		case growing && kept:
			c.writeAt(s, piece)
		default:
			growing = false
		}
		s = e
	}
}
