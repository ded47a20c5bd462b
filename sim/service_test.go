package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"time"

	"github.com/sluicemq/sluice/env"
)

// counterd is a small service that exists to exercise the simulator: each
// node counts, persists its counter, and gossips it to its peers.
//
// Persistence uses two slots in the file "counter", each holding
// (value, crc). A new value goes to the slot not holding the last synced
// one, and the slots swap roles only once its Sync completed, so a crash at
// any moment leaves the last synced value intact in one slot. Recovery reads
// both and takes the larger valid one. The file itself is created, sized,
// synced and its directory synced before the first count, so its entry
// cannot vanish under a synced value.
//
// Gossip: every node listens on <name>:9000 and keeps one outgoing
// connection to every peer, on which it sends (sender index, value) frames
// periodically; a failed dial or a broken connection is retried after a
// jittered backoff timer.

const (
	counterFile = "counter"
	slotSize    = 16 // value uint64, crc32c of it, padding
	frameSize   = 16 // sender index uint64, value uint64
	gossipPort  = "9000"
)

var slotTable = crc32.MakeTable(crc32.Castagnoli)

// counterOracle is what the test knows from outside the nodes; the checks
// compare what nodes do against it.
type counterOracle struct {
	// synced is, per node, the largest value whose Sync completed.
	synced map[string]uint64
	// violations lists every broken property, with the values that broke it.
	violations []string
	// recoveries counts boots that read back a counter, for coverage.
	recoveries int
	// syncErrors counts syncs that failed, for coverage.
	syncErrors int
}

func (o *counterOracle) violate(format string, args ...any) {
	o.violations = append(o.violations, fmt.Sprintf(format, args...))
}

// counterNode is one incarnation of the service; it lives in the node's
// memory and dies with it.
type counterNode struct {
	e      env.Env
	name   string
	index  int
	peers  []string // every node's name, its own included, by index
	oracle *counterOracle

	file    env.File
	durable uint64 // the last value synced
	slot    int    // the slot durable lives in
	value   uint64 // in memory; ahead of durable while a write is in flight
	writing bool

	out  map[string]env.Conn // connected outgoing conns by peer
	seen []uint64            // the largest value heard from each peer
	in   map[env.Conn][]byte // partial frames on incoming conns
}

func bootCounter(name string, index int, peers []string, oracle *counterOracle, nodes map[string]*counterNode) func(env.Env) {
	return func(e env.Env) {
		c := &counterNode{
			e: e, name: name, index: index, peers: peers, oracle: oracle,
			out:  make(map[string]env.Conn),
			seen: make([]uint64, len(peers)),
			in:   make(map[env.Conn][]byte),
		}
		nodes[name] = c
		c.listen()
		c.recover()
	}
}

// recover opens or creates the counter file. Reads may fail (EIO) or come
// back damaged (a flipped bit): it retries, and a slot counts as valid if
// any read of it checks out.
func (c *counterNode) recover() {
	f, err := c.e.FS.Open(counterFile)
	if errors.Is(err, fs.ErrNotExist) {
		c.create()
		return
	}
	if err != nil {
		c.retry("open", err, c.recover)
		return
	}
	best, bestSlot, ok := uint64(0), 0, false
	for slot := range 2 {
		for range 5 { // a flipped bit on the read path goes away on a reread
			v, valid, err := readSlot(f, slot)
			if err != nil {
				f.Close()
				c.retry("read", err, c.recover)
				return
			}
			if valid {
				if !ok || v > best {
					best, bestSlot, ok = v, slot, true
				}
				break
			}
		}
	}
	c.oracle.recoveries++
	if want := c.oracle.synced[c.name]; best < want {
		c.oracle.violate("%s recovered counter %d, below %d whose sync completed", c.name, best, want)
	}
	// What was read may sit only in the page cache (the last process was
	// killed, the machine stayed up): sync the file and its entry before
	// counting the recovered value as durable or gossiping it.
	f.Sync(func(err error) {
		if err != nil {
			f.Close()
			c.retry("sync recovered file", err, c.recover)
			return
		}
		c.e.FS.SyncDir(".", func(err error) {
			if err != nil {
				f.Close()
				c.retry("sync recovered dir", err, c.recover)
				return
			}
			c.file = f
			c.oracle.synced[c.name] = max(c.oracle.synced[c.name], best)
			c.durable, c.slot, c.value = best, bestSlot, best
			c.tick()
		})
	})
}

// readSlot reads one slot; a slot past the end of the file (its size was
// not synced) is invalid, not an error.
func readSlot(f env.File, slot int) (v uint64, valid bool, err error) {
	var b [slotSize]byte
	if _, err := f.ReadAt(b[:], int64(slot*slotSize)); errors.Is(err, io.EOF) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	v = binary.LittleEndian.Uint64(b[:8])
	return v, binary.LittleEndian.Uint32(b[8:12]) == crc32.Checksum(b[:8], slotTable), nil
}

func (c *counterNode) retry(what string, err error, again func()) {
	c.e.Log.Info("retrying", "op", what, "err", err)
	c.e.Clock.AfterFunc(10*time.Millisecond+c.jitter(10*time.Millisecond), again)
}

// create makes a fresh, durable, zeroed counter file before counting
// starts; on any failure it starts over, as the file's entry may not be
// durable yet.
func (c *counterNode) create() {
	f, err := c.e.FS.Create(counterFile)
	if err == nil {
		err = f.Truncate(2 * slotSize)
	}
	if err != nil {
		c.retry("create", err, c.create)
		return
	}
	f.Sync(func(err error) {
		if err != nil {
			c.retry("sync new file", err, c.create)
			return
		}
		c.e.FS.SyncDir(".", func(err error) {
			if err != nil {
				c.retry("sync dir", err, c.create)
				return
			}
			c.file = f
			c.tick()
		})
	})
}

// tick counts once, persists, and gossips, every 20-60ms of node time.
func (c *counterNode) tick() {
	if !c.writing {
		c.persist(c.value + 1)
	}
	c.gossip()
	c.e.Clock.AfterFunc(20*time.Millisecond+c.jitter(40*time.Millisecond), c.tick)
}

func (c *counterNode) persist(v uint64) {
	c.value, c.writing = v, true
	target := 1 - c.slot
	var b [slotSize]byte
	binary.LittleEndian.PutUint64(b[:8], v)
	binary.LittleEndian.PutUint32(b[8:12], crc32.Checksum(b[:8], slotTable))
	if _, err := c.file.WriteAt(b[:], int64(target*slotSize)); err != nil {
		c.writing = false
		return
	}
	c.file.Sync(func(err error) {
		c.writing = false
		if err != nil {
			c.oracle.syncErrors++
			return
		}
		c.durable, c.slot = v, target
		if v > c.oracle.synced[c.name] {
			c.oracle.synced[c.name] = v
		}
	})
}

func (c *counterNode) jitter(d time.Duration) time.Duration {
	return time.Duration(env.Uint64n(c.e.Rand, uint64(d)))
}

func (c *counterNode) listen() {
	_, err := c.e.Net.Listen(c.name+":"+gossipPort, func(conn env.Conn) env.ConnHandler {
		c.in[conn] = nil
		return &gossipIn{c: c, conn: conn}
	})
	if err != nil {
		c.e.Log.Info("listen failed", "err", err)
		c.e.Clock.AfterFunc(c.jitter(100*time.Millisecond), c.listen)
		return
	}
	for i, peer := range c.peers {
		if i != c.index {
			c.dial(peer)
		}
	}
}

func (c *counterNode) dial(peer string) {
	c.e.Net.Dial(peer+":"+gossipPort, func(conn env.Conn, err error) env.ConnHandler {
		if err != nil {
			c.redial(peer)
			return nil
		}
		c.out[peer] = conn
		return &gossipOut{c: c, peer: peer}
	})
}

func (c *counterNode) redial(peer string) {
	delete(c.out, peer)
	c.e.Clock.AfterFunc(50*time.Millisecond+c.jitter(200*time.Millisecond), func() { c.dial(peer) })
}

// gossip sends the durable value to every connected peer, in index order.
func (c *counterNode) gossip() {
	var b [frameSize]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(c.index))
	binary.LittleEndian.PutUint64(b[8:], c.durable)
	for _, peer := range c.peers {
		if conn, ok := c.out[peer]; ok {
			p := b // Write takes ownership
			_ = conn.Write(p[:])
		}
	}
}

// gossipOut is the handler of an outgoing connection; peers send nothing
// back on it.
type gossipOut struct {
	c    *counterNode
	peer string
}

func (g *gossipOut) OnData(p []byte) {
	g.c.oracle.violate("%s got %d unexpected bytes from %s", g.c.name, len(p), g.peer)
}

func (g *gossipOut) OnClose(error) { g.c.redial(g.peer) }

type gossipIn struct {
	c    *counterNode
	conn env.Conn
}

func (g *gossipIn) OnData(p []byte) {
	c := g.c
	buf := append(c.in[g.conn], p...)
	for len(buf) >= frameSize {
		from := binary.LittleEndian.Uint64(buf[:8])
		v := binary.LittleEndian.Uint64(buf[8:frameSize])
		buf = buf[frameSize:]
		if from >= uint64(len(c.peers)) {
			c.oracle.violate("%s got a frame from node index %d of %d: the stream is out of order or damaged", c.name, from, len(c.peers))
			continue
		}
		if synced := c.oracle.synced[c.peers[from]]; v > synced {
			c.oracle.violate("%s heard %d from %s, which never synced more than %d", c.name, v, c.peers[from], synced)
		}
		c.seen[from] = max(c.seen[from], v)
	}
	c.in[g.conn] = append([]byte(nil), buf...)
}

func (g *gossipIn) OnClose(error) { delete(g.c.in, g.conn) }
