package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/raftmeta"
	"go.etcd.io/raft/v3/raftpb"
)

// Voters' addresses (KIP-853's dynamic quorum).
//
// A voter added by AddRaftVoter is named in no node's configuration: its
// CONTROLLER address travels in the membership change's Context, which
// every node applies (applyMembership), telling its transport and
// remembering it in metaPlane.voterAddrs. The new voter itself may know no
// other voter's address (its configuration has only
// controller.quorum.bootstrap.servers, and it may catch up from the log,
// whose bootstrap entries carry none), so the context goes on, after a
// newline, with "voters=" and every other voter the leader knows, as
// controller.quorum.voters writes them (Kafka's VotersRecord likewise
// carries the whole voter set's endpoints):
//
//	n4:9093
//	voters=1@n1:9093,2@n2:9093,3@n3:9093
//
// A context of an address alone (a learner's) reads as before. A restart replays the log from
// the latest snapshot, so the changes after it teach the addresses again;
// the ones before it are gone from the log, so the quorum's snapshot
// carries the addresses too: the image's snapshot inside a frame of the
// node's own (voterSnapshot), which Restore reads back. A snapshot with no
// address to carry is the image's snapshot alone, as before, and Restore
// reads both. This keeps the addresses out of the image: an image record
// would count in the image's offsets (broker epochs are offsets), and a
// membership change is not a controller decision the controller's working
// view could account for.
//
//	magic "SLVA" | version 1 (1 byte) | count (uvarint)
//	| (raft id (uvarint) | address length (uvarint) | address)*
//	| image snapshot length (uvarint) | image snapshot | crc32c (4 bytes) of all before it

const (
	voterSnapshotMagic   = "SLVA"
	voterSnapshotVersion = 1
)

// learnVoterAddr records a voter's CONTROLLER address and tells the
// transport (never for this node itself, which does not dial itself).
func (b *Broker) learnVoterAddr(id uint64, addr string) {
	if b.meta.voterAddrs == nil {
		b.meta.voterAddrs = map[uint64]string{}
	}
	b.meta.voterAddrs[id] = addr
	if id != b.meta.self {
		b.meta.transport.SetPeer(id, addr)
	}
}

// forgetVoterAddr drops a removed member's address.
func (b *Broker) forgetVoterAddr(id uint64) {
	delete(b.meta.voterAddrs, id)
	if id != b.meta.self {
		b.meta.transport.SetPeer(id, "")
	}
}

// voterAddrOf is a voter's CONTROLLER address: learned from the quorum,
// else from controller.quorum.voters.
func (b *Broker) voterAddrOf(id uint64) (string, bool) {
	if addr, ok := b.meta.voterAddrs[id]; ok {
		return addr, true
	}
	for _, v := range b.cfg.Voters() {
		if raftIDOf(v.ID) == id {
			return v.Addr(), true
		}
	}
	return "", false
}

// snapshotAddrs are the addresses a snapshot carries: every one learned,
// and the static voters', so that a node added later (whose configuration
// names no voter) can reach them.
func (b *Broker) snapshotAddrs() map[uint64]string {
	if len(b.meta.voterAddrs) == 0 {
		return nil
	}
	out := map[uint64]string{}
	if !b.cfg.SingleNode() {
		for _, v := range b.cfg.Voters() {
			out[raftIDOf(v.ID)] = v.Addr()
		}
	}
	for id, addr := range b.meta.voterAddrs {
		out[id] = addr
	}
	return out
}

// encodeVoterSnapshot frames an image snapshot with voters' addresses;
// with none, it is the image snapshot itself.
func encodeVoterSnapshot(addrs map[uint64]string, image []byte) []byte {
	if len(addrs) == 0 {
		return image
	}
	buf := make([]byte, 0, 32+len(image)+32*len(addrs))
	buf = append(buf, voterSnapshotMagic...)
	buf = append(buf, voterSnapshotVersion)
	buf = binary.AppendUvarint(buf, uint64(len(addrs)))
	for _, id := range sortedKeys(addrs) {
		buf = binary.AppendUvarint(buf, id)
		buf = binary.AppendUvarint(buf, uint64(len(addrs[id])))
		buf = append(buf, addrs[id]...)
	}
	buf = binary.AppendUvarint(buf, uint64(len(image)))
	buf = append(buf, image...)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoliTable))
}

// decodeVoterSnapshot is encodeVoterSnapshot's inverse: the addresses
// (nil for a bare image snapshot) and the image snapshot's bytes.
func decodeVoterSnapshot(p []byte) (map[uint64]string, []byte, error) {
	header := len(voterSnapshotMagic) + 1
	if len(p) < len(voterSnapshotMagic) || string(p[:len(voterSnapshotMagic)]) != voterSnapshotMagic {
		return nil, p, nil
	}
	if len(p) < header+4 {
		return nil, nil, fmt.Errorf("voters' addresses: %d bytes is too short", len(p))
	}
	end := len(p) - 4
	if crc32.Checksum(p[:end], castagnoliTable) != binary.BigEndian.Uint32(p[end:]) {
		return nil, nil, errors.New("voters' addresses: checksum mismatch")
	}
	if p[len(voterSnapshotMagic)] != voterSnapshotVersion {
		return nil, nil, fmt.Errorf("voters' addresses: unknown version %d", p[len(voterSnapshotMagic)])
	}
	body := p[header:end]
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(body)
		if n <= 0 {
			return 0, fmt.Errorf("voters' addresses: truncated %s", what)
		}
		body = body[n:]
		return v, nil
	}
	bytesOf := func(what string) ([]byte, error) {
		size, err := next(what + " length")
		if err != nil {
			return nil, err
		}
		if size > uint64(len(body)) {
			return nil, fmt.Errorf("voters' addresses: %s of %d bytes is truncated", what, size)
		}
		out := body[:size]
		body = body[size:]
		return out, nil
	}
	count, err := next("count")
	if err != nil {
		return nil, nil, err
	}
	if count == 0 || count > uint64(len(body)) {
		return nil, nil, fmt.Errorf("voters' addresses: bad count %d", count)
	}
	addrs := make(map[uint64]string, count)
	for i := uint64(0); i < count; i++ {
		id, err := next("raft id")
		if err != nil {
			return nil, nil, err
		}
		addr, err := bytesOf("address " + strconv.FormatUint(i, 10))
		if err != nil {
			return nil, nil, err
		}
		if _, dup := addrs[id]; dup || id == 0 || len(addr) == 0 {
			return nil, nil, fmt.Errorf("voters' addresses: entry %d (raft id %d, address %q) is not a voter's, or a second one", i, id, addr)
		}
		addrs[id] = string(addr)
	}
	image, err := bytesOf("image snapshot")
	if err != nil {
		return nil, nil, err
	}
	if len(body) != 0 {
		return nil, nil, fmt.Errorf("voters' addresses: %d bytes after the image snapshot", len(body))
	}
	return addrs, image, nil
}

// restoreVoterAddrs replaces the learned addresses by a snapshot's.
func (b *Broker) restoreVoterAddrs(addrs map[uint64]string) {
	for _, id := range sortedKeys(b.meta.voterAddrs) {
		if _, ok := addrs[id]; !ok {
			b.forgetVoterAddr(id)
		}
	}
	for _, id := range sortedKeys(addrs) {
		b.learnVoterAddr(id, addrs[id])
	}
}

// snapshotWithVoters is the quorum's snapshot: the image and the voters'
// addresses.
func (b *Broker) snapshotWithVoters() []byte {
	return encodeVoterSnapshot(b.snapshotAddrs(), b.image.EncodeSnapshot())
}

// decodeSnapshotWithVoters reads what snapshotWithVoters wrote.
func decodeSnapshotWithVoters(p []byte) (*raftmeta.Image, map[uint64]string, error) {
	addrs, image, err := decodeVoterSnapshot(p)
	if err != nil {
		return nil, nil, err
	}
	im, err := raftmeta.DecodeSnapshot(image)
	if err != nil {
		return nil, nil, err
	}
	return im, addrs, nil
}

// currentVoters are the voters of the configuration applied here, both
// halves of a joint one, in id order.
func currentVoters(cs *raftpb.ConfState) []uint64 {
	set := map[uint64]bool{}
	for _, id := range cs.GetVoters() {
		set[id] = true
	}
	for _, id := range cs.GetVotersOutgoing() {
		set[id] = true
	}
	return sortedKeys(set)
}

// voterContext is the Context of a membership change adding a voter at
// addr: addr, and the addresses of the other voters this node knows.
func (b *Broker) voterContext(addr string, adding uint64) []byte {
	var others []string
	for _, id := range currentVoters(b.meta.node.Status().Config) {
		if a, ok := b.voterAddrOf(id); ok && id != adding {
			others = append(others, strconv.Itoa(int(nodeIDOfRaft(id)))+"@"+a)
		}
	}
	if len(others) == 0 {
		return []byte(addr)
	}
	return []byte(addr + "\nvoters=" + strings.Join(others, ","))
}

// parseVoterContext reads a membership change's Context: the member's
// address, and the other voters' when it carries them. A list that does not
// parse is ignored (the address alone still serves), and logged by no one:
// only this code writes it.
func parseVoterContext(ctx []byte) (string, []Voter) {
	addr, rest, found := strings.Cut(string(ctx), "\n")
	if !found {
		return addr, nil
	}
	list, ok := strings.CutPrefix(rest, "voters=")
	if !ok {
		return addr, nil
	}
	voters, err := parseVoters(list)
	if err != nil {
		return addr, nil
	}
	return addr, voters
}
