// Command sinkserver is the client's ceiling in BenchmarkBroker: a Kafka
// broker that speaks just enough of the protocol for a franz-go producer
// (ApiVersions, Metadata, InitProducerId, Produce), acknowledges every batch
// at once with the offset it would have had, and stores nothing. Whatever
// produce rate a client reaches against it, no real broker can beat. It
// also coordinates every group (FindCoordinator) and accepts every
// OffsetCommit at once, storing nothing: BenchmarkGroupCommits's ceiling.
//
// With -dir, it is instead the least a durable broker can do, the floor of
// BenchmarkBroker's CPU per GB: it checks each batch's CRC32C, appends the
// batches of each partition to a file of their own, and makes them durable
// with one syncfs(2) per request before acknowledging it.
//
// With -cluster and -id, it is one of several durable sinks that replicate
// to one another, BenchmarkClusterReplication's protocol-free reference:
// the work a cluster at replication factor -rf (default: all of them)
// cannot avoid.
// Partition p is led by sink p % n, and the next rf-1 sinks follow it. A leader stores and checks a
// produce request's batches as above, sends them to every follower over a
// connection of its own (a length-prefixed frame of (partition, batches)
// entries), syncs, and acknowledges once every follower has answered that
// it checked, stored and synced them too. No protocol, no positions, no
// high watermark: just the bytes every node must take, store, sync and
// (the leader) send on.
//
// It listens on -addr (port 0 picks one), prints "listening <host:port>" on
// stdout, and serves until killed. Every topic a client asks about exists,
// with -partitions partitions led by node 0, the sink itself (clustered:
// by the sinks in turn).
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	partitions := flag.Int("partitions", 6, "partitions of every topic")
	dir := flag.String("dir", "", "store batches here and sync them before acknowledging")
	cluster := flag.String("cluster", "", "with -dir: client/replication address pairs of every sink, comma-separated (client1/repl1,client2/repl2,...)")
	id := flag.Int("id", -1, "with -cluster: this sink's index in it")
	rf := flag.Int("rf", 0, "with -cluster: replicas of each partition, its leader first (default: every sink)")
	flag.Parse()
	var err error
	var peers []peer
	if *cluster != "" {
		if peers, err = parseCluster(*cluster, *id, *dir); err == nil {
			*addr = peers[*id].client
		}
	}
	if err == nil {
		err = run(*addr, int32(*partitions), *dir, peers, *id, *rf)
	}
	fmt.Fprintln(os.Stderr, "sinkserver:", err)
	os.Exit(1)
}

// run serves until accepting fails; it returns only with an error.
func run(addr string, partitions int32, dir string, peers []peer, id, rf int) error {
	if rf <= 0 || rf > len(peers) {
		rf = len(peers)
	}
	table, err := wire.NewTable([]wire.APIRange{
		{Key: 0, Min: 3, Max: (&kmsg.ProduceRequest{}).MaxVersion()},
		{Key: 3, Min: 0, Max: (&kmsg.MetadataRequest{}).MaxVersion()},
		{Key: 8, Min: 0, Max: (&kmsg.OffsetCommitRequest{}).MaxVersion()},
		{Key: 10, Min: 0, Max: (&kmsg.FindCoordinatorRequest{}).MaxVersion()},
		{Key: 18, Min: 0, Max: 4},
		{Key: 22, Min: 0, Max: (&kmsg.InitProducerIDRequest{}).MaxVersion()},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	host, portText, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portText)
	fmt.Printf("listening %s\n", ln.Addr())
	s := &sink{table: table, host: host, port: int32(port), partitions: partitions, offsets: map[string]int64{}, peers: peers, id: id, rf: rf}
	s.syncDone = sync.NewCond(&s.mu)
	if dir != "" {
		if s.dir, err = os.Open(dir); err != nil {
			return err
		}
		s.files = map[string]*os.File{}
	}
	if peers != nil {
		rl, err := net.Listen("tcp", peers[id].repl)
		if err != nil {
			return err
		}
		go s.serveReplication(rl)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go s.serve(c)
	}
}

// sink holds what every connection shares: only the next offset of each
// partition, so that acknowledgements look like a real log's.
type sink struct {
	table      *wire.Table
	host       string
	port       int32
	partitions int32

	mu         sync.Mutex
	offsets    map[string]int64 // "topic/partition" -> next offset
	producerID int64

	dir   *os.File            // with -dir: where batches are stored
	files map[string]*os.File // "topic/partition" -> its file in dir

	peers []peer // with -cluster: every sink, this one at index id
	id    int
	rf    int // with -cluster: partition p's replicas are sinks p, p+1, ... p+rf-1 (mod n)
	// stored counts the replication frames stored here, as a leader or a
	// follower, and synced those a syncfs covered; syncing says one runs,
	// and syncDone is broadcast when it ends (replicate.go). Under mu.
	stored, synced uint64
	syncing        bool
	syncDone       *sync.Cond
}

// serve answers one connection's requests in order until it closes.
func (s *sink) serve(c net.Conn) {
	if s.peers != nil {
		s.serveReplicated(c)
		return
	}
	defer c.Close()
	r := requestReader{r: bufio.NewReaderSize(c, 1<<20), table: s.table}
	var out []byte
	for {
		req, ok := r.next()
		if !ok {
			return
		}
		resp := s.answer(req.Body)
		if resp == nil {
			continue // acks=0
		}
		out = wire.AppendResponse(out[:0], req.Header.CorrelationID, resp)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// requestReader reads a connection's requests, each into the same buffer:
// a request is done with before the next is read.
type requestReader struct {
	r     *bufio.Reader
	table *wire.Table
	frame []byte
}

// next returns the next request, or false once the connection ends or
// sends what is not a request (said on stderr).
func (rr *requestReader) next() (wire.Request, bool) {
	var size [4]byte
	if _, err := io.ReadFull(rr.r, size[:]); err != nil {
		return wire.Request{}, false
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > wire.DefaultMaxRequestBytes {
		fmt.Fprintf(os.Stderr, "sinkserver: frame size %d\n", n)
		return wire.Request{}, false
	}
	if cap(rr.frame) < int(n) {
		rr.frame = make([]byte, n)
	}
	rr.frame = rr.frame[:n]
	if _, err := io.ReadFull(rr.r, rr.frame); err != nil {
		return wire.Request{}, false
	}
	req, err := rr.table.ParseRequest(rr.frame)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sinkserver: %v\n", err)
		return wire.Request{}, false
	}
	return req, true
}

func (s *sink) answer(body kmsg.Request) kmsg.Response {
	switch req := body.(type) {
	case *kmsg.ApiVersionsRequest:
		return s.table.ApiVersionsResponse(req)
	case *kmsg.MetadataRequest:
		return s.metadata(req)
	case *kmsg.InitProducerIDRequest:
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		s.mu.Lock()
		s.producerID++
		resp.ProducerID = s.producerID
		s.mu.Unlock()
		return resp
	case *kmsg.ProduceRequest:
		return s.produce(req)
	case *kmsg.FindCoordinatorRequest:
		return s.findCoordinator(req)
	case *kmsg.OffsetCommitRequest:
		return commitResponse(req, 0)
	}
	panic(fmt.Sprintf("sinkserver: the table serves %T but answer does not", body))
}

func (s *sink) metadata(req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	if s.peers != nil {
		return s.clusterMetadata(req, resp)
	}
	broker := kmsg.NewMetadataResponseBroker()
	broker.NodeID, broker.Host, broker.Port = 0, s.host, s.port
	resp.Brokers = []kmsg.MetadataResponseBroker{broker}
	clusterID := "sink"
	resp.ClusterID = &clusterID
	resp.ControllerID = 0
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			continue // by id only: not served
		}
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = rt.Topic
		t.TopicID = topicID(*rt.Topic)
		for p := range s.partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.Replicas, mp.ISR = p, 0, []int32{0}, []int32{0}
			t.Partitions = append(t.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// commitResponse answers every partition of req with code.
func commitResponse(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// findCoordinator names the sink as every group's coordinator.
func (s *sink) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.NodeID, resp.Host, resp.Port = 0, s.host, s.port
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = key, 0, s.host, s.port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte(name))
	var id [16]byte
	copy(id[:], sum[:])
	return id
}

// produce acknowledges every batch with the offsets it would have taken.
func (s *sink) produce(req *kmsg.ProduceRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name := topicName(rt)
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			key := name + "/" + strconv.Itoa(int(rp.Partition))
			n, err := countRecords(rp.Records, s.dir != nil)
			if err == nil && s.dir != nil {
				err = s.store(key, rp.Records)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sinkserver: %s: %v\n", key, err)
				p.ErrorCode = 2 // CORRUPT_MESSAGE
			} else {
				p.BaseOffset = s.offsets[key]
				s.offsets[key] += n
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if s.dir != nil {
		if err := unix.Syncfs(int(s.dir.Fd())); err != nil {
			fmt.Fprintf(os.Stderr, "sinkserver: syncfs: %v\n", err)
			os.Exit(1)
		}
	}
	if req.Acks == 0 {
		return nil
	}
	return resp
}

// store appends a partition's batches to its file.
func (s *sink) store(key string, batches []byte) error {
	f := s.files[key]
	if f == nil {
		var err error
		f, err = os.OpenFile(filepath.Join(s.dir.Name(), strings.ReplaceAll(key, "/", "-")), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		s.files[key] = f
	}
	_, err := f.Write(batches)
	return err
}

// topicName is how a produce request names its topic: by name, or (v13+)
// by id, in hex.
func topicName(rt kmsg.ProduceRequestTopic) string {
	if rt.Topic == "" {
		return fmt.Sprintf("%x", rt.TopicID)
	}
	return rt.Topic
}

// countRecords returns the offsets the v2 batches in p take: the sum of each
// batch's last offset delta plus one. With checkCRC it also checks each
// batch's CRC32C, as a broker must before it stores a batch.
func countRecords(p []byte, checkCRC bool) (int64, error) {
	var n int64
	for len(p) > 0 {
		if len(p) < 61 {
			return 0, errors.New("truncated batch header")
		}
		length := int(int32(binary.BigEndian.Uint32(p[8:12])))
		if length < 49 || 12+length > len(p) {
			return 0, fmt.Errorf("batch length %d with %d bytes left", length, len(p))
		}
		if checkCRC && crc32.Checksum(p[21:12+length], castagnoli) != binary.BigEndian.Uint32(p[17:21]) {
			return 0, errors.New("batch CRC mismatch")
		}
		n += int64(int32(binary.BigEndian.Uint32(p[23:27]))) + 1
		p = p[12+length:]
	}
	return n, nil
}
