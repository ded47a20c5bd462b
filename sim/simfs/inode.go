package simfs

import (
	"fmt"
	"maps"
	"slices"
)

// inode is a file or a directory.
type inode struct {
	id    uint64 // creation order; crash choices visit inodes in this order
	isDir bool

	// A file's contents. durable is what the medium holds; ops are the
	// changes issued since, in order; data is durable with every op applied,
	// what reads see. The three never share backing arrays.
	data    content
	durable content
	ops     []fileOp
	// durableGen counts the changes to durable (syncs that applied
	// changes, crashes, medium flips), for DurableStat.
	durableGen uint64
	// durableRewrites counts the durable changes to bytes that were
	// durable already (a truncation that shrank the file, a write below
	// its durable end, a medium flip), for DurableStat: a reader that
	// parsed the durable contents must parse them again.
	durableRewrites uint64

	// A directory's entries, by the same scheme: durableEntries with every
	// change of dirOps applied gives entries. A change between two
	// directories (a rename) sits in both lists.
	entries        map[string]*inode
	durableEntries map[string]*inode
	dirOps         []*dirOp

	// syncs are the Syncs (of a file) or SyncDirs (of a directory) in
	// flight, in the order issued, which is the order they complete in.
	syncs []*pendingSync
}

// fileOp is one change to a file: a write of p at off, or a truncate to size.
type fileOp struct {
	seq   uint64
	trunc bool
	off   int64
	p     []byte // owned by the op
	size  int64
}

// dirOp is one change to directory entries: the entry fromName leaves from
// (when from is set) and ino is linked at toName in to (when to is set). A
// create links, a remove unlinks, a rename does both, possibly in two
// directories.
type dirOp struct {
	seq      uint64
	from     *inode
	fromName string
	to       *inode
	toName   string
	ino      *inode
}

// other returns the directory besides dir that the change touches, or nil.
func (op *dirOp) other(dir *inode) *inode {
	switch {
	case op.from != nil && op.from != dir:
		return op.from
	case op.to != nil && op.to != dir:
		return op.to
	}
	return nil
}

func (d *Disk) newInode(isDir bool) *inode {
	d.nextID++
	ino := &inode{id: d.nextID, isDir: isDir}
	if isDir {
		ino.entries = make(map[string]*inode)
		ino.durableEntries = make(map[string]*inode)
	}
	return ino
}

// change applies a file change to what reads see and records it as unsynced.
func (d *Disk) change(ino *inode, op fileOp) {
	d.seq++
	op.seq = d.seq
	applyOp(&ino.data, op)
	ino.ops = append(ino.ops, op)
}

func (d *Disk) link(dir *inode, name string, ino *inode) {
	d.changeDir(&dirOp{to: dir, toName: name, ino: ino})
}

func (d *Disk) unlink(dir *inode, name string) {
	d.changeDir(&dirOp{from: dir, fromName: name})
}

func (d *Disk) move(from *inode, fromName string, to *inode, toName string, ino *inode) {
	d.changeDir(&dirOp{from: from, fromName: fromName, to: to, toName: toName, ino: ino})
}

// changeDir applies a directory change to the current entries and records it
// as unsynced in every directory it touches.
func (d *Disk) changeDir(op *dirOp) {
	d.seq++
	op.seq = d.seq
	applyDirOp(op, func(dir *inode) map[string]*inode { return dir.entries })
	if op.from != nil {
		op.from.dirOps = append(op.from.dirOps, op)
	}
	if op.to != nil && op.to != op.from {
		op.to.dirOps = append(op.to.dirOps, op)
	}
}

// applyDirOp applies a change to the entries that entriesOf gives.
func applyDirOp(op *dirOp, entriesOf func(*inode) map[string]*inode) {
	if op.from != nil {
		delete(entriesOf(op.from), op.fromName)
	}
	if op.to != nil {
		entriesOf(op.to)[op.toName] = op.ino
	}
}

// flushFile makes a file's changes up to seq upto durable.
func flushFile(ino *inode, upto uint64) (changed bool) {
	k := 0
	for k < len(ino.ops) && ino.ops[k].seq <= upto {
		applyDurable(ino, ino.ops[k])
		k++
	}
	if k > 0 {
		ino.durableGen++
	}
	ino.ops = slices.Clone(ino.ops[k:]) // let the flushed ops' bytes go
	return k > 0
}

// flushDir makes a directory's changes up to seq upto durable. A rename into
// or out of another directory first makes durable that directory's changes
// issued before it, so every directory's unsynced changes stay a suffix of
// its history, and the rename is durable in both at once.
func flushDir(dir *inode, upto uint64) (changed bool) {
	for len(dir.dirOps) > 0 && dir.dirOps[0].seq <= upto {
		changed = true
		op := dir.dirOps[0]
		other := op.other(dir)
		if other != nil {
			flushDir(other, op.seq-1)
			if len(other.dirOps) == 0 || other.dirOps[0] != op {
				panic(fmt.Sprintf("simfs: rename %d is not next in directory %d after flushing it to %d", op.seq, other.id, op.seq-1))
			}
			other.dirOps = other.dirOps[1:]
		}
		dir.dirOps = dir.dirOps[1:]
		applyDirOp(op, func(dir *inode) map[string]*inode { return dir.durableEntries })
	}
	if len(dir.dirOps) == 0 {
		dir.dirOps = nil
	}
	return changed
}

// applyDurable applies op to ino's durable contents, counting a rewrite.
func applyDurable(ino *inode, op fileOp) {
	if (op.trunc && op.size < ino.durable.Len()) || (!op.trunc && op.off < ino.durable.Len()) {
		ino.durableRewrites++
	}
	applyOp(&ino.durable, op)
}

func applyOp(c *content, op fileOp) {
	if op.trunc {
		c.resize(op.size)
		return
	}
	c.writeAt(op.off, op.p)
}

func cloneEntries(m map[string]*inode) map[string]*inode {
	c := make(map[string]*inode, len(m))
	maps.Copy(c, m)
	return c
}
