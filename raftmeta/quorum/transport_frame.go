package quorum

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf8"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The raft transport's wire format. A raft connection carries, in each
// direction, a sequence of frames; the dialer's direction opens with a
// preamble first:
//
//	dialer -> acceptor:  preamble | hello | frame | frame | ...
//	acceptor -> dialer:  hello | frame | frame | ...
//
// The preamble is the 13 bytes "\xffsluice-raft\n". It exists so that one
// listener (the CONTROLLER listener) can take both raft connections and
// Kafka-protocol ones (Demux): a Kafka client opens with a request frame,
// whose first four bytes are its size as a big-endian int32, at most
// socket.request.max.bytes (an int32, so never above 0x7fffffff). Read as
// such a size, the preamble's first four bytes ff 73 6c 75 are -9,212,811,
// and as an unsigned number 4,285,754,485, above any limit a broker can be
// configured with: no Kafka client ever sends them, and a Kafka broker
// that meets them refuses the connection (Kafka's NetworkReceive rejects a
// negative size). The first byte alone decides: 0xff can never begin a
// Kafka connection, so Demux hands a Kafka connection over on its first
// byte and never waits for more.
//
// Every frame, the hello included, is
//
//	+----------+------------+------+--------------------+
//	| size u32 | crc32c u32 | kind | body (size-5 bytes) |
//	+----------+------------+------+--------------------+
//
// in big-endian, size counting what follows it and the checksum
// (Castagnoli) covering kind and body. Kinds:
//
//	1 hello          version u16 | sender id u64 | receiver id u64 (18 bytes)
//	2 message        a raftpb.Message, proto.Marshal'd
//	3 snapshot ack   index u64 | term u64 of a MsgSnap's snapshot, stepped
//	4 refusal        a UTF-8 reason; the sender closes after it
//	5 keepalive      empty; either end writes it on a connection idle for
//	                 TransportConfig.KeepaliveInterval, the receiver skips it
//	                 (a connection silent for SilenceTimeout is closed)
//
// The hello is the first frame each way and comes only once. Its receiver
// id is the id the dialer means to reach: an acceptor with another id
// refuses the connection (a misconfigured voter list) and says why in a
// refusal frame, so the misconfigured side logs it too.
//
// A frame's size is bounded by TransportConfig.MaxFrameBytes (256 MiB by
// default: a snapshot of 100,000 partitions is tens of MB); a larger size,
// a bad checksum, an unknown kind, a body that does not decode, or a
// message not from the peer or not to this node closes the connection.

// transportPreamble opens the dialer's side of every raft connection.
const transportPreamble = "\xffsluice-raft\n"

// transportVersion is the format version the hello carries. A node refuses
// a hello of any other version.
const transportVersion = 1

// Frame kinds.
const (
	frameHello       byte = 1
	frameMessage     byte = 2
	frameSnapshotAck byte = 3
	frameRefusal     byte = 4
	frameKeepalive   byte = 5
)

const (
	// frameHeaderLen is the size, checksum and kind before a body.
	frameHeaderLen = 9
	// frameOverhead is what a frame's size counts besides the body: the
	// checksum and the kind.
	frameOverhead = 5
	helloBodyLen  = 18
	ackBodyLen    = 16
	// refusalMax bounds a refusal's reason, sent and read.
	refusalMax = 1024
)

var transportCRCTable = crc32.MakeTable(crc32.Castagnoli)

// transportHello is the body of a hello frame.
type transportHello struct {
	version  uint16
	sender   uint64
	receiver uint64
}

// appendFrame appends a frame of kind with body to dst.
func appendFrame(dst []byte, kind byte, body []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	dst = append(dst, body...)
	return sealFrame(dst, start)
}

// sealFrame fills in the size and the checksum of the frame that begins at
// start and runs to the end of dst.
func sealFrame(dst []byte, start int) []byte {
	f := dst[start:]
	binary.BigEndian.PutUint32(f[0:4], uint32(len(f)-4))
	binary.BigEndian.PutUint32(f[4:8], crc32.Checksum(f[8:], transportCRCTable))
	return dst
}

func appendHello(dst []byte, h transportHello) []byte {
	var body [helloBodyLen]byte
	binary.BigEndian.PutUint16(body[0:2], h.version)
	binary.BigEndian.PutUint64(body[2:10], h.sender)
	binary.BigEndian.PutUint64(body[10:18], h.receiver)
	return appendFrame(dst, frameHello, body[:])
}

func appendSnapshotAck(dst []byte, index, term uint64) []byte {
	var body [ackBodyLen]byte
	binary.BigEndian.PutUint64(body[0:8], index)
	binary.BigEndian.PutUint64(body[8:16], term)
	return appendFrame(dst, frameSnapshotAck, body[:])
}

func appendKeepalive(dst []byte) []byte { return appendFrame(dst, frameKeepalive, nil) }

func appendRefusal(dst []byte, reason string) []byte {
	if len(reason) > refusalMax {
		reason = reason[:refusalMax]
	}
	return appendFrame(dst, frameRefusal, []byte(reason))
}

// messageFrameLen returns the length of m's frame, size prefix included,
// and the size proto.Marshal gives m (cached in m for appendMessage).
func messageFrameLen(m *raftpb.Message) (frameLen, bodyLen int) {
	bodyLen = proto.Size(m)
	return frameHeaderLen + bodyLen, bodyLen
}

// appendMessage appends m's frame to dst. m's size must have been computed
// by messageFrameLen just before, and m not changed since.
func appendMessage(dst []byte, m *raftpb.Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, frameMessage)
	dst, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, m)
	if err != nil {
		return dst[:start], fmt.Errorf("marshal %v to %d: %w", m.GetType(), m.GetTo(), err)
	}
	return sealFrame(dst, start), nil
}

// parseFrame checks a frame as wire.FrameReader returns it (without its
// size prefix) and splits it into kind and body. The body is a slice of
// frame.
func parseFrame(frame []byte) (kind byte, body []byte, err error) {
	if len(frame) < frameOverhead {
		return 0, nil, fmt.Errorf("frame of %d bytes is shorter than its checksum and kind (%d)", len(frame), frameOverhead)
	}
	want := binary.BigEndian.Uint32(frame[0:4])
	if got := crc32.Checksum(frame[4:], transportCRCTable); got != want {
		return 0, nil, fmt.Errorf("frame of %d bytes fails its checksum: crc32c %08x, frame says %08x", len(frame), got, want)
	}
	return frame[4], frame[5:], nil
}

func parseHello(body []byte) (transportHello, error) {
	if len(body) != helloBodyLen {
		return transportHello{}, fmt.Errorf("hello of %d bytes, want %d", len(body), helloBodyLen)
	}
	return transportHello{
		version:  binary.BigEndian.Uint16(body[0:2]),
		sender:   binary.BigEndian.Uint64(body[2:10]),
		receiver: binary.BigEndian.Uint64(body[10:18]),
	}, nil
}

func parseSnapshotAck(body []byte) (index, term uint64, err error) {
	if len(body) != ackBodyLen {
		return 0, 0, fmt.Errorf("snapshot ack of %d bytes, want %d", len(body), ackBodyLen)
	}
	return binary.BigEndian.Uint64(body[0:8]), binary.BigEndian.Uint64(body[8:16]), nil
}

// parseRefusal returns a refusal's reason, made printable.
func parseRefusal(body []byte) string {
	if len(body) > refusalMax {
		body = body[:refusalMax]
	}
	if !utf8.Valid(body) {
		return fmt.Sprintf("%q", body)
	}
	return string(body)
}

// parseMessage decodes a message frame's body.
func parseMessage(body []byte) (*raftpb.Message, error) {
	m := &raftpb.Message{}
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("message of %d bytes does not decode: %w", len(body), err)
	}
	return m, nil
}
