package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// captureEnv, set to 1, makes TestCaptureCorpus drive real franz-go clients
// against captureBroker and write the request frames they send as seed
// corpus files under testdata/fuzz. The files are committed; ordinary test
// runs leave them alone.
const captureEnv = "SLUICE_CAPTURE_CORPUS"

// captureBroker is a loopback Kafka broker just real enough for franz-go to
// connect, look up metadata, produce, list offsets and fetch what it
// produced. Framing, headers, decoding and response framing all go through
// this package, so a real client checks them; every request frame is kept.
type captureBroker struct {
	t     testing.TB
	ln    net.Listener
	table *Table
	host  string
	port  int32

	mu       sync.Mutex
	flavor   string // label of the client currently connecting
	conns    int
	frames   []capturedFrame
	streams  []capturedFrame // the first bytes of each connection
	topics   map[string]*captureTopic
	topicIDs map[[16]byte]string
}

type capturedFrame struct {
	flavor       string
	conn         int
	key, version int16
	data         []byte
}

type captureTopic struct {
	id      [16]byte
	batches [][]byte // record batches of partition 0, base offsets rewritten
	next    int64    // the offset the next batch gets
}

func startCaptureBroker(t testing.TB) *captureBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	b := &captureBroker{
		t: t, ln: ln, table: everythingTable(t),
		host: addr.IP.String(), port: int32(addr.Port),
		topics: map[string]*captureTopic{}, topicIDs: map[[16]byte]string{},
	}
	go b.accept()
	t.Cleanup(func() { ln.Close() })
	return b
}

func (b *captureBroker) addr() string { return net.JoinHostPort(b.host, strconv.Itoa(int(b.port))) }

func (b *captureBroker) setFlavor(f string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flavor = f
}

func (b *captureBroker) accept() {
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns++
		stream := len(b.streams)
		b.streams = append(b.streams, capturedFrame{flavor: b.flavor, conn: b.conns})
		b.mu.Unlock()
		go b.serve(conn, stream)
	}
}

// serve answers one connection's requests in order, as a broker must.
func (b *captureBroker) serve(conn net.Conn, stream int) {
	defer conn.Close()
	frames := NewFrameReader(FrameReaderConfig{})
	for {
		buf := make([]byte, 32<<10)
		n, err := conn.Read(buf)
		if n > 0 {
			b.keepStream(stream, buf[:n])
			frames.Feed(buf[:n])
		}
		for {
			frame, ok, ferr := frames.Next()
			if ferr != nil {
				b.t.Errorf("capture broker: %v", ferr)
				return
			}
			if !ok {
				break
			}
			if !b.handle(conn, stream, frame) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				b.t.Logf("capture broker read: %v", err)
			}
			return
		}
	}
}

func (b *captureBroker) keepStream(stream int, p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &b.streams[stream]
	if room := 4<<10 - len(s.data); room > 0 {
		s.data = append(s.data, p[:min(room, len(p))]...)
	}
}

// handle answers one frame; it reports false when the connection must close.
func (b *captureBroker) handle(conn net.Conn, stream int, frame []byte) bool {
	req, err := b.table.ParseRequest(frame)
	if err != nil {
		b.t.Errorf("capture broker: a real client's request did not parse: %v", err)
		return false
	}
	b.mu.Lock()
	b.frames = append(b.frames, capturedFrame{
		flavor: b.streams[stream].flavor, conn: b.streams[stream].conn,
		key: req.Header.Key, version: req.Header.Version, data: bytes.Clone(frame),
	})
	resp := b.answer(req)
	b.mu.Unlock()
	if resp == nil {
		return true // acks=0 produce
	}
	if _, err := conn.Write(AppendResponse(nil, req.Header.CorrelationID, resp)); err != nil {
		return false
	}
	if f, ok := req.Body.(*kmsg.FetchRequest); ok && isEmptyFetch(resp) {
		// Stand in for long polling, so that an idle consumer does not
		// spin; the wait is after the answer to keep the lock free.
		time.Sleep(time.Duration(min(f.MaxWaitMillis, 50)) * time.Millisecond)
	}
	return true
}

// answer builds the response to req; b.mu is held.
func (b *captureBroker) answer(req Request) kmsg.Response {
	switch r := req.Body.(type) {
	case *kmsg.ApiVersionsRequest:
		return b.table.ApiVersionsResponse(r)
	case *kmsg.MetadataRequest:
		return b.metadata(r)
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = 1000, 0
		return resp
	case *kmsg.ProduceRequest:
		return b.produce(r)
	case *kmsg.ListOffsetsRequest:
		return b.listOffsets(r)
	case *kmsg.FetchRequest:
		return b.fetch(r)
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.TopicID, t.NumPartitions, t.ReplicationFactor = rt.Topic, b.topic(rt.Topic).id, 1, 1
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	return req.Body.ResponseKind() // an empty answer: enough to capture the request
}

func (b *captureBroker) topic(name string) *captureTopic {
	t, ok := b.topics[name]
	if !ok {
		t = &captureTopic{}
		t.id[0], t.id[15] = 0x51, byte(len(b.topics)+1)
		b.topics[name] = t
		b.topicIDs[t.id] = name
	}
	return t
}

func (b *captureBroker) metadata(r *kmsg.MetadataRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	broker := kmsg.NewMetadataResponseBroker()
	broker.NodeID, broker.Host, broker.Port = 0, b.host, b.port
	resp.Brokers = []kmsg.MetadataResponseBroker{broker}
	resp.ClusterID = kmsg.StringPtr("capture-cluster")
	resp.ControllerID = 0
	var names []string
	for _, rt := range r.Topics {
		if rt.Topic != nil {
			names = append(names, *rt.Topic)
		}
	}
	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		for name := range b.topics {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	for _, name := range names {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID = kmsg.StringPtr(name), b.topic(name).id
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.Replicas, p.ISR = 0, 0, []int32{0}, []int32{0}
		t.Partitions = []kmsg.MetadataResponseTopicPartition{p}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// recordBatchNext returns the offset after a v2 record batch placed at
// base, or false for an older message format.
func recordBatchNext(batch []byte, base int64) (int64, bool) {
	const magicAt, lastOffsetDeltaAt = 16, 23
	if len(batch) < 61 || batch[magicAt] != 2 {
		return 0, false
	}
	return base + int64(int32(binary.BigEndian.Uint32(batch[lastOffsetDeltaAt:]))) + 1, true
}

func (b *captureBroker) produce(r *kmsg.ProduceRequest) kmsg.Response {
	if r.Acks == 0 {
		return nil
	}
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range r.Topics {
		name := rt.Topic
		if r.Version >= 13 {
			name = b.topicIDs[rt.TopicID]
		}
		t := b.topic(name)
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset = rp.Partition, t.next
			if next, ok := recordBatchNext(rp.Records, t.next); ok && rp.Partition == 0 {
				batch := bytes.Clone(rp.Records)
				binary.BigEndian.PutUint64(batch, uint64(t.next))
				t.batches = append(t.batches, batch)
				t.next = next
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *captureBroker) listOffsets(r *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp, sp.Offset = rp.Partition, -1, 0
			if rp.Timestamp == -1 {
				sp.Offset = b.topic(rt.Topic).next
			}
			sp.OldStyleOffsets = []int64{sp.Offset}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *captureBroker) fetch(r *kmsg.FetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range r.Topics {
		name := rt.Topic
		if r.Version >= 13 {
			name = b.topicIDs[rt.TopicID]
		}
		t := b.topic(name)
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = rp.Partition, t.next, t.next, 0
			if rp.Partition == 0 {
				base := int64(0)
				for _, batch := range t.batches {
					next, _ := recordBatchNext(batch, base)
					if next > rp.FetchOffset {
						sp.RecordBatches = append(sp.RecordBatches, batch...)
					}
					base = next
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func isEmptyFetch(resp kmsg.Response) bool {
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			if len(p.RecordBatches) > 0 {
				return false
			}
		}
	}
	return true
}

// produceAndConsume produces records to topic with client options opts, then
// reads them back from the start of partition 0 with a fresh client.
func produceAndConsume(t *testing.T, b *captureBroker, topic string, consume bool, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := []kgo.Opt{kgo.SeedBrokers(b.addr()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	producer, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var want []string
	for i := range 3 {
		v := fmt.Sprintf("%s-%d", topic, i)
		want = append(want, v)
		rec := &kgo.Record{Value: []byte(v), Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce %s through the capture broker: %v", v, err)
		}
	}
	if !consume {
		return
	}
	consumer, err := kgo.NewClient(append(opts, kgo.SeedBrokers(b.addr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got []string
	for len(got) < len(want) {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %q before the deadline, want %q", got, want)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %q, want %q", got, want)
	}
}

// TestRealClientThroughWire runs franz-go against the capture broker: its
// ApiVersions v5 gets the v0 UNSUPPORTED_VERSION answer, and it must still
// get through metadata, an idempotent produce and a fetch, reading every
// response header where this package put it.
func TestRealClientThroughWire(t *testing.T) {
	b := startCaptureBroker(t)
	b.setFlavor("kgo")
	produceAndConsume(t, b, "real", true)
	b.mu.Lock()
	defer b.mu.Unlock()
	first := b.frames[0]
	if first.key != keyApiVersions || first.version <= maxApiVersionsServed {
		t.Fatalf("first request was %s v%d; the test expects franz-go to open with an ApiVersions newer than v%d",
			kmsg.NameForKey(first.key), first.version, maxApiVersionsServed)
	}
	seen := map[string]bool{}
	for _, f := range b.frames {
		seen[kmsg.NameForKey(f.key)] = true
	}
	for _, name := range []string{"ApiVersions", "Metadata", "InitProducerID", "Produce", "ListOffsets", "Fetch"} {
		if !seen[name] {
			t.Errorf("franz-go sent no %s request", name)
		}
	}
}

// TestCaptureCorpus writes the seed corpus. Run it with
//
//	SLUICE_CAPTURE_CORPUS=1 go test -run TestCaptureCorpus ./wire/
//
// and commit what changes under testdata/fuzz.
func TestCaptureCorpus(t *testing.T) {
	if os.Getenv(captureEnv) != "1" {
		t.Skipf("set %s=1 to capture real client requests into testdata/fuzz", captureEnv)
	}
	b := startCaptureBroker(t)
	old := func(v *kversion.Versions) []kgo.Opt {
		return []kgo.Opt{kgo.MaxVersions(v), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())}
	}
	apiVersions4 := kversion.Stable()
	apiVersions4.SetMaxKeyVersion(keyApiVersions, 4)
	flavors := []struct {
		name    string
		consume bool
		opts    []kgo.Opt
	}{
		{"kgo", true, nil},
		{"kgo-acks0", false, []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.NoAck())}},
		{"kgo-apiversions4", false, []kgo.Opt{kgo.MaxVersions(apiVersions4)}},
		{"kgo-kafka2.4", true, old(kversion.V2_4_0())},
		{"kgo-kafka1.0", false, old(kversion.V1_0_0())},
		{"kgo-kafka0.11", false, old(kversion.V0_11_0())},
		{"kgo-kafka0.10", false, old(kversion.V0_10_0())},
	}
	for _, f := range flavors {
		b.setFlavor(f.name)
		produceAndConsume(t, b, f.name, f.consume, f.opts...)
	}
	b.setFlavor("kadm")
	runAdmin(t, b)

	b.mu.Lock()
	defer b.mu.Unlock()
	written := writeCorpus(t, b.frames, b.streams)
	t.Logf("wrote %d corpus files", written)
}

// runAdmin sends a spread of admin requests; answers are mostly empty, so
// errors are expected and ignored: only the requests matter.
func runAdmin(t *testing.T, b *captureBroker) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = adm.CreateTopics(ctx, 3, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "made")
	_, _ = adm.DeleteTopics(ctx, "made")
	_, _ = adm.ListTopics(ctx)
	_, _ = adm.DescribeTopicConfigs(ctx, "kgo")
	_, _ = adm.DescribeBrokerConfigs(ctx, 0)
	_, _ = adm.ListEndOffsets(ctx, "kgo")
	_, _ = adm.ListGroups(ctx)
	_, _ = adm.DescribeGroups(ctx, "g")
	_, _ = adm.DeleteRecords(ctx, kadm.Offsets{"kgo": {0: {At: 1}}})
	_, _ = adm.FetchOffsets(ctx, "g")
}

// writeCorpus writes one seed per (client flavor, api, version) to the two
// frame targets, and the opening bytes of the first connections of each
// flavor to FuzzFrameReader.
func writeCorpus(t *testing.T, frames, streams []capturedFrame) int {
	written := 0
	seen := map[string]bool{}
	for _, f := range frames {
		name := fmt.Sprintf("%s-%s-v%d", f.flavor, kmsg.NameForKey(f.key), f.version)
		if seen[name] {
			continue
		}
		seen[name] = true
		writeSeed(t, "FuzzParseRequest", name, f.data)
		writeSeed(t, "FuzzParseRequestHeader", name, f.data)
		written += 2
	}
	perFlavor := map[string]int{}
	for _, s := range streams {
		if len(s.data) == 0 || perFlavor[s.flavor] >= 2 {
			continue
		}
		perFlavor[s.flavor]++
		cuts := []byte{5, 0x83, 17, 2, 0x90, 63, 1}
		writeSeed(t, "FuzzFrameReader", fmt.Sprintf("%s-conn%d", s.flavor, perFlavor[s.flavor]), s.data, cuts)
		written++
	}
	return written
}

func writeSeed(t *testing.T, target, name string, values ...[]byte) {
	var buf bytes.Buffer
	buf.WriteString("go test fuzz v1\n")
	for _, v := range values {
		fmt.Fprintf(&buf, "[]byte(%q)\n", v)
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCorpusHasRealClientRequests guards the committed seed corpus: it must
// hold what franz-go opens a connection with, at today's versions and old.
func TestCorpusHasRealClientRequests(t *testing.T) {
	for _, name := range []string{
		"kgo-ApiVersions-v5", "kgo-ApiVersions-v4", "kgo-Metadata-v13", "kgo-Produce-v13", "kgo-Fetch-v18",
		"kgo-kafka0.10-ApiVersions-v0", "kgo-kafka0.10-Metadata-v1", "kgo-kafka2.4-Produce-v8",
	} {
		for _, target := range []string{"FuzzParseRequest", "FuzzParseRequestHeader"} {
			if _, err := os.Stat(filepath.Join("testdata", "fuzz", target, name)); err != nil {
				t.Errorf("seed corpus lacks %s/%s: %v (regenerate with %s=1)", target, name, err, captureEnv)
			}
		}
	}
}
