package raftmeta

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/sim/rng"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// harness drives a controller the way the node will: it proposes each
// call's records, commits them to a committed image (at once, or when told
// while holding), and tells the controller. After every step it checks
// what the controller promises: every leader of the committed image is a
// registered, unfenced broker, and with nothing pending the view equals
// the committed image.
type harness struct {
	t         testing.TB
	cfg       ControllerConfig
	rand      *rng.Rand
	committed *Image
	c         *Controller
	now       time.Time
	// held are batches proposed and not yet committed, while holding.
	held    [][]Record
	holding bool
	// names maps a topic's short id to its name, for transcripts.
	names map[string]string
	// incarnations counts the incarnations drawn per broker.
	incarnations map[int32]byte
	// last is the last call's records.
	last []Record
}

var harnessEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newHarness(t testing.TB, cfg ControllerConfig, seed uint64) *harness {
	h := &harness{t: t, cfg: cfg, rand: rng.New(seed), committed: NewImage(), now: harnessEpoch,
		names: map[string]string{}, incarnations: map[int32]byte{}}
	require.NoError(t, h.committed.Apply(ClusterIDRecord{ClusterID: "cluster"}))
	h.c = NewController(h.committed, cfg, h.now, h.rand)
	return h
}

// propose hands a call's records to the "quorum".
func (h *harness) propose(records []Record) {
	h.last = records
	if len(records) == 0 {
		return
	}
	for _, r := range records {
		if ct, ok := r.(CreateTopicRecord); ok {
			h.names[shortID(ct.Topic.ID)] = ct.Topic.Name
		}
	}
	h.held = append(h.held, records)
	if !h.holding {
		h.commit()
	}
}

// commit commits every held batch, in order.
func (h *harness) commit() {
	for _, batch := range h.held {
		for _, r := range batch {
			require.NoError(h.t, h.committed.Apply(r))
		}
		h.c.Committed(h.now, h.committed)
	}
	h.held = nil
	h.check()
}

func (h *harness) check() {
	require.NoError(h.t, h.committed.Validate())
	require.NoError(h.t, h.c.Err())
	checkLeadersEligible(h.t, h.committed)
	checkLeadersEligible(h.t, h.c.View())
	if h.c.Pending() == 0 {
		require.True(h.t, h.committed.Equal(h.c.View()), "with nothing pending the view equals the committed image")
	}
}

// checkLeadersEligible asserts that every partition's leader is a
// registered, unfenced broker.
func checkLeadersEligible(t testing.TB, im *Image) {
	for _, name := range im.TopicNames() {
		for _, p := range im.TopicByName(name).Partitions {
			if p.Leader == NoLeader {
				continue
			}
			b, ok := im.Brokers[p.Leader]
			require.True(t, ok && !b.Fenced, "partition %s-%d is led by %d, which is not a registered unfenced broker", name, p.Index, p.Leader)
		}
	}
}

func (h *harness) incarnation(id int32) IncarnationID {
	return IncarnationID{byte(id), h.incarnations[id]}
}

// register registers broker id with its current incarnation, as after an
// unclean shutdown (no previous epoch).
func (h *harness) register(id int32, rack string) RegistrationReply {
	return h.registerAfter(id, rack, -1)
}

// registerAfter registers broker id with its current incarnation and the
// previous epoch given (the epoch it had at a clean shutdown, or -1).
func (h *harness) registerAfter(id int32, rack string, previousEpoch int64) RegistrationReply {
	reply, records := h.c.RegisterBroker(h.now, BrokerRegistration{BrokerID: id, IncarnationID: h.incarnation(id),
		Listeners: []Listener{{Name: "PLAINTEXT", Host: fmt.Sprintf("b%d", id), Port: 9092}}, Rack: rack,
		PreviousBrokerEpoch: previousEpoch})
	h.propose(records)
	return reply
}

// heartbeat sends a heartbeat of broker id at its current epoch, having
// applied everything committed.
func (h *harness) heartbeat(id int32, fence, shutdown bool) HeartbeatReply {
	reply, records := h.c.Heartbeat(h.now, BrokerHeartbeat{BrokerID: id, BrokerEpoch: h.c.View().Brokers[id].Epoch,
		MetadataOffset: h.committed.Applied, WantFence: fence, WantShutDown: shutdown})
	h.propose(records)
	return reply
}

// startBrokers registers and unfences brokers 1..n, racks given in turn.
func (h *harness) startBrokers(n int, racks ...string) {
	for id := int32(1); id <= int32(n); id++ {
		rack := ""
		if len(racks) > 0 {
			rack = racks[int(id-1)%len(racks)]
		}
		require.Nil(h.t, h.register(id, rack).Err)
	}
	for id := int32(1); id <= int32(n); id++ {
		reply := h.heartbeat(id, false, false)
		require.Nil(h.t, reply.Err)
		require.False(h.t, reply.IsFenced)
	}
}

func (h *harness) tick() []Record {
	records, _ := h.c.Tick(h.now)
	h.propose(records)
	return records
}

// createTopic creates a placed topic and returns it from the committed
// image.
func (h *harness) createTopic(name string, partitions int32, rf int16) *Topic {
	res, records := h.c.CreateTopics([]TopicSpec{{Name: name, Partitions: partitions, ReplicationFactor: rf}})
	require.Nil(h.t, res[0].Err, res[0].Message)
	h.propose(records)
	return h.committed.TopicByName(name)
}

// show formats records for a transcript, topic ids replaced by names.
func (h *harness) show(records []Record) string {
	var b strings.Builder
	for _, r := range records {
		s := fmt.Sprint(r)
		for _, id := range sortedKeys(h.names) {
			s = strings.ReplaceAll(s, id, h.names[id])
		}
		fmt.Fprintf(&b, "> %s\n", s)
	}
	return b.String()
}

// image formats the committed image's brokers and partitions.
func (h *harness) image() string {
	var b strings.Builder
	for _, id := range h.committed.BrokerIDs() {
		br := h.committed.Brokers[id]
		fmt.Fprintf(&b, "broker %d epoch=%d", id, br.Epoch)
		if br.Rack != "" {
			fmt.Fprintf(&b, " rack=%s", br.Rack)
		}
		switch {
		case br.Fenced:
			b.WriteString(" fenced")
		case br.InControlledShutdown:
			b.WriteString(" shutting-down")
		default:
			b.WriteString(" unfenced")
		}
		fmt.Fprintf(&b, " leads=%d\n", h.committed.LeaderCount(id))
	}
	for _, name := range h.committed.TopicNames() {
		for _, p := range h.committed.TopicByName(name).Partitions {
			fmt.Fprintf(&b, "%s-%s\n", name, p)
		}
	}
	return b.String()
}

func errName(err *kerr.Error) string {
	if err == nil {
		return "ok"
	}
	return err.Message
}

// leaderSpread counts partitions led per broker, as "id:n" sorted by id.
func leaderSpread(t *Topic) string {
	counts := map[int32]int{}
	for _, p := range t.Partitions {
		counts[p.Leader]++
	}
	ids := make([]int32, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%d:%d", id, counts[id]))
	}
	return strings.Join(parts, " ")
}
