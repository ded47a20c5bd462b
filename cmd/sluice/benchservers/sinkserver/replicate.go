package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// peer is one sink of a cluster: where clients reach it and where its
// leaders send it what it follows.
type peer struct{ client, repl string }

// parseCluster reads -cluster's client/replication address pairs.
func parseCluster(text string, id int, dir string) ([]peer, error) {
	if dir == "" {
		return nil, errors.New("-cluster needs -dir: a replicating sink stores what it takes")
	}
	var peers []peer
	for _, pair := range strings.Split(text, ",") {
		client, repl, ok := strings.Cut(pair, "/")
		if !ok || client == "" || repl == "" {
			return nil, fmt.Errorf("-cluster entry %q: want client-address/replication-address", pair)
		}
		peers = append(peers, peer{client: client, repl: repl})
	}
	if id < 0 || id >= len(peers) {
		return nil, fmt.Errorf("-id %d: want 0 to %d, an index into -cluster", id, len(peers)-1)
	}
	return peers, nil
}

// clusterMetadata lists every sink, and partition p led by sink p % n with
// the rf sinks from it on as its replicas and ISR.
func (s *sink) clusterMetadata(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) kmsg.Response {
	n := int32(len(s.peers))
	for i, p := range s.peers {
		host, portText, _ := net.SplitHostPort(p.client)
		port, _ := strconv.Atoi(portText)
		broker := kmsg.NewMetadataResponseBroker()
		broker.NodeID, broker.Host, broker.Port = int32(i), host, int32(port)
		resp.Brokers = append(resp.Brokers, broker)
	}
	clusterID := "sink"
	resp.ClusterID = &clusterID
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			continue
		}
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = rt.Topic
		t.TopicID = topicID(*rt.Topic)
		for p := range s.partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader = p, p%n
			for r := range int32(s.rf) {
				mp.Replicas = append(mp.Replicas, (p+r)%n)
			}
			mp.ISR = mp.Replicas
			t.Partitions = append(t.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// serveReplicated answers one client connection of a clustered sink. Its
// requests are taken as they come: a produce request's batches are stored
// and sent to the followers at once, and the answers go out in order, each
// once this sink's files are synced past it (one syncfs covers every
// request stored before it started) and every follower has acknowledged
// its frame. Like a broker, it overlaps the requests in flight.
func (s *sink) serveReplicated(c net.Conn) {
	defer c.Close()
	followers, err := s.dialFollowers()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sinkserver:", err)
		return
	}
	defer func() {
		for _, f := range followers {
			if f != nil {
				f.Close()
			}
		}
	}()
	answers := make(chan pendingAnswer, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.answerInOrder(c, followers, answers)
	}()
	defer func() { close(answers); <-done }()
	// One buffer for every request: the batches are copied into the
	// replication frame, and no answer refers to the request.
	r := requestReader{r: bufio.NewReaderSize(c, 1<<20), table: s.table}
	for {
		req, ok := r.next()
		if !ok {
			return
		}
		a := pendingAnswer{correlationID: req.Header.CorrelationID}
		var err error
		switch body := req.Body.(type) {
		case *kmsg.ProduceRequest:
			a.resp, a.seq, err = s.produceReplicated(body, followers)
		case *kmsg.OffsetCommitRequest:
			a.resp, a.seq, err = s.commitReplicated(body, followers)
		case *kmsg.FindCoordinatorRequest:
			a.resp = s.findClusterCoordinator(body)
		default:
			a.resp = s.answer(req.Body)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sinkserver:", err)
			os.Exit(1)
		}
		answers <- a
	}
}

// pendingAnswer is a response waiting for its turn, and for replication
// frame seq (0: none) to be durable here and at every follower.
type pendingAnswer struct {
	correlationID int32
	resp          kmsg.Response // nil: acks=0, nothing to send
	seq           uint64
}

// answerInOrder sends each answer once what it waits for is durable.
func (s *sink) answerInOrder(c net.Conn, followers []net.Conn, answers <-chan pendingAnswer) {
	acks := make([]*bufio.Reader, len(followers))
	for i, f := range followers {
		if f != nil {
			acks[i] = bufio.NewReader(f)
		}
	}
	var out []byte
	for a := range answers {
		if a.seq > 0 {
			if err := s.syncThrough(a.seq); err != nil {
				fmt.Fprintln(os.Stderr, "sinkserver:", err)
				os.Exit(1)
			}
			for _, r := range acks {
				if r == nil {
					continue
				}
				if _, err := r.ReadByte(); err != nil {
					fmt.Fprintln(os.Stderr, "sinkserver: follower's acknowledgement:", err)
					os.Exit(1)
				}
			}
		}
		if a.resp == nil {
			continue
		}
		out = wire.AppendResponse(out[:0], a.correlationID, a.resp)
		if _, err := c.Write(out); err != nil {
			for range answers { // let the reader finish
			}
			return
		}
	}
}

// syncThrough makes this sink's files durable past frame seq (a frame
// stored as a leader or as a follower: one count for both): one syncfs
// covers every frame stored before it starts, and callers that arrive
// while one runs wait for it instead of starting their own.
func (s *sink) syncThrough(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.synced < seq {
		if s.syncing {
			s.syncDone.Wait()
			continue
		}
		s.syncing = true
		upTo := s.stored
		s.mu.Unlock()
		err := unix.Syncfs(int(s.dir.Fd()))
		s.mu.Lock()
		s.syncing = false
		s.syncDone.Broadcast()
		if err != nil {
			return fmt.Errorf("syncfs: %w", err)
		}
		s.synced = max(s.synced, upTo)
	}
	return nil
}

// dialFollowers connects to the replication listener of every sink that
// follows this one's partitions: the next rf-1.
func (s *sink) dialFollowers() ([]net.Conn, error) {
	conns := make([]net.Conn, len(s.peers))
	for r := 1; r < s.rf; r++ {
		i := (s.id + r) % len(s.peers)
		p := s.peers[i]
		c, err := net.Dial("tcp", p.repl)
		if err != nil {
			return nil, err
		}
		conns[i] = c
	}
	return conns, nil
}

// produceReplicated stores the batches of the partitions this sink leads
// and sends them to every follower as one frame, whose number it returns
// (0 if nothing was stored). A partition it does not lead is
// NOT_LEADER_FOR_PARTITION.
func (s *sink) produceReplicated(req *kmsg.ProduceRequest, followers []net.Conn) (kmsg.Response, uint64, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	frame := make([]byte, 4, 64)
	s.mu.Lock()
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			key := topicName(rt) + "/" + strconv.Itoa(int(rp.Partition))
			n, err := countRecords(rp.Records, true)
			switch {
			case int(rp.Partition)%len(s.peers) != s.id:
				p.ErrorCode = 6 // NOT_LEADER_FOR_PARTITION
			case err != nil:
				fmt.Fprintf(os.Stderr, "sinkserver: %s: %v\n", key, err)
				p.ErrorCode = 2 // CORRUPT_MESSAGE
			default:
				if err := s.store(key, rp.Records); err != nil {
					s.mu.Unlock()
					return nil, 0, fmt.Errorf("%s: %w", key, err)
				}
				p.BaseOffset = s.offsets[key]
				s.offsets[key] += n
				frame = binary.BigEndian.AppendUint16(frame, uint16(len(key)))
				frame = append(frame, key...)
				frame = binary.BigEndian.AppendUint32(frame, uint32(len(rp.Records)))
				frame = append(frame, rp.Records...)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	seq := s.storedFrame(frame)
	s.mu.Unlock()
	if req.Acks == 0 {
		resp = nil
	}
	return resp, seq, sendFrame(frame, seq, followers)
}

// storedFrame counts frame, stored here, if it holds an entry, and returns
// its number (0: none). Called with mu held.
func (s *sink) storedFrame(frame []byte) uint64 {
	if len(frame) == 4 {
		return 0
	}
	s.stored++
	return s.stored
}

// sendFrame sends frame number seq (none if 0) to every follower.
func sendFrame(frame []byte, seq uint64, followers []net.Conn) error {
	if seq == 0 {
		return nil
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	for _, f := range followers {
		if f != nil {
			if _, err := f.Write(frame); err != nil {
				return fmt.Errorf("send to a follower: %w", err)
			}
		}
	}
	return nil
}

// offsetsKey prefixes the files of committed offsets, one per shard.
const offsetsKey = "__offsets/"

// offsetShards is how many shards the groups are spread over, as
// __consumer_offsets' 50 partitions; shard i is led by sink i % n.
const offsetShards = 50

// groupShard is the shard a group's offsets live on.
func groupShard(group string) int {
	var h uint32
	for i := 0; i < len(group); i++ {
		h = 31*h + uint32(group[i])
	}
	return int(h % offsetShards)
}

// findClusterCoordinator names the sink leading each group's shard.
func (s *sink) findClusterCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for i, key := range keys {
		id := groupShard(key) % len(s.peers)
		host, portText, _ := net.SplitHostPort(s.peers[id].client)
		port, _ := strconv.Atoi(portText)
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = key, int32(id), host, int32(port)
		resp.Coordinators = append(resp.Coordinators, c)
		if i == 0 {
			resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		}
	}
	return resp
}

// commitReplicated stores an OffsetCommit's offsets, one record of (group,
// topic, partition, offset, metadata) each, in its group's shard file and
// sends them to every follower, as a coordinator writes them to its
// __consumer_offsets partition. A group whose shard another sink leads is
// NOT_COORDINATOR.
func (s *sink) commitReplicated(req *kmsg.OffsetCommitRequest, followers []net.Conn) (kmsg.Response, uint64, error) {
	shard := groupShard(req.Group)
	if shard%len(s.peers) != s.id {
		return commitResponse(req, 16), 0, nil // NOT_COORDINATOR
	}
	resp := commitResponse(req, 0)
	var rec []byte
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			rec = binary.BigEndian.AppendUint16(rec, uint16(len(req.Group)))
			rec = append(rec, req.Group...)
			rec = binary.BigEndian.AppendUint16(rec, uint16(len(rt.Topic)))
			rec = append(rec, rt.Topic...)
			rec = binary.BigEndian.AppendUint32(rec, uint32(rp.Partition))
			rec = binary.BigEndian.AppendUint64(rec, uint64(rp.Offset))
			if rp.Metadata != nil {
				rec = append(rec, *rp.Metadata...)
			}
		}
	}
	if len(rec) == 0 {
		return resp, 0, nil
	}
	key := offsetsKey + strconv.Itoa(shard)
	frame := make([]byte, 4, 4+2+len(key)+4+len(rec))
	frame = binary.BigEndian.AppendUint16(frame, uint16(len(key)))
	frame = append(frame, key...)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(rec)))
	frame = append(frame, rec...)
	s.mu.Lock()
	if err := s.store(key, rec); err != nil {
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("%s: %w", key, err)
	}
	seq := s.storedFrame(frame)
	s.mu.Unlock()
	return resp, seq, sendFrame(frame, seq, followers)
}

// serveReplication takes leaders' connections.
func (s *sink) serveReplication(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "sinkserver: replication listener:", err)
			os.Exit(1)
		}
		go s.follow(c)
	}
}

// follow checks, stores and syncs each frame a leader sends, and answers
// each with one byte; frames that arrive together share a syncfs.
func (s *sink) follow(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<20)
	var size [4]byte
	var frame []byte
	unacked := 0 // frames stored and not yet synced and acknowledged
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(frame) < n {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		seq, err := s.storeFrame(frame)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sinkserver: follower:", err)
			os.Exit(1)
		}
		unacked++
		if r.Buffered() >= 4 && r.Buffered() >= 4+int(binary.BigEndian.Uint32(peek(r))) {
			continue // another whole frame is here: one syncfs for both
		}
		if err := s.syncThrough(seq); err != nil {
			fmt.Fprintln(os.Stderr, "sinkserver: follower:", err)
			os.Exit(1)
		}
		if _, err := c.Write(bytes.Repeat([]byte{1}, unacked)); err != nil {
			return
		}
		unacked = 0
	}
}

// storeFrame checks and appends each (partition, batches) entry of a
// replication frame.
func (s *sink) storeFrame(p []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.storeEntries(p); err != nil {
		return 0, err
	}
	s.stored++
	return s.stored, nil
}

// storeEntries checks and appends each entry of a frame. Called with mu
// held.
func (s *sink) storeEntries(p []byte) error {
	for len(p) > 0 {
		if len(p) < 2 {
			return errors.New("truncated frame")
		}
		kl := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+kl+4 {
			return errors.New("truncated frame")
		}
		key := string(p[2 : 2+kl])
		bl := int(binary.BigEndian.Uint32(p[2+kl:]))
		p = p[2+kl+4:]
		if len(p) < bl {
			return errors.New("truncated frame")
		}
		if !strings.HasPrefix(key, offsetsKey) {
			if _, err := countRecords(p[:bl], true); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		if err := s.store(key, p[:bl]); err != nil {
			return err
		}
		p = p[bl:]
	}
	return nil
}

// peek returns the next four buffered bytes of r.
func peek(r *bufio.Reader) []byte {
	p, _ := r.Peek(4)
	return p
}
