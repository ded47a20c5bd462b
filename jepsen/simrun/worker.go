package simrun

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client timings, on the client node's clock.
const (
	dialTimeout     = 2 * time.Second
	metadataTimeout = 3 * time.Second
	backoffMin      = 20 * time.Millisecond
	backoffMax      = 500 * time.Millisecond
	// topicIndexBytes is segment.index.bytes of the run's topic: Kafka's
	// 10 MiB default would be zero-filled in the simulated disk's memory
	// at every segment roll and crash.
	topicIndexBytes = 4096
)

// worker is what every client has: its number in the history, its node,
// and its stream of randomness (the run's, forked by the client's name, so
// it continues across crashes of the node).
type worker struct {
	r    *run
	id   int
	name string
	rand *rng.Rand
}

func (w *worker) newSession(e env.Env) *session {
	return &session{e: e, addr: brokerAddr, clientID: w.name, dialTimeout: dialTimeout, probes: &w.r.probes}
}

// after runs f on the node's loop after d.
func (w *worker) after(e env.Env, d time.Duration, f func()) {
	e.Clock.AfterFunc(d, f)
}

// think draws a pause between two operations, uniform in [0, 2*Think].
func (w *worker) think() time.Duration {
	mean := w.r.opts.Think
	if mean <= 0 {
		return 0
	}
	return time.Duration(w.rand.Uint64n(uint64(2 * mean)))
}

// backoff runs f after a seeded, jittered pause.
func (w *worker) backoff(e env.Env, f func()) {
	d := backoffMin + time.Duration(w.rand.Uint64n(uint64(backoffMax-backoffMin)))
	w.after(e, d, f)
}

// topicInfo is what the metadata says of the run's topic.
type topicInfo struct {
	id         [16]byte
	partitions int
}

// ensureTopic makes sure the session knows the topic, then calls ready.
// The topic is created with CreateTopics where the broker serves it (with
// small segments and index files, which keep a simulated disk cheap), and
// otherwise by Metadata's auto-creation with the broker's defaults. Either
// is retried until the metadata lists the topic.
func (w *worker) ensureTopic(e env.Env, s *session, ready func(*topicInfo)) {
	if s.topic != nil {
		ready(s.topic)
		return
	}
	retry := func() {
		w.r.probes.add("client.metadata_retry")
		w.backoff(e, func() { w.ensureTopic(e, s, ready) })
	}
	describe := func() {
		w.describeTopic(s, func(info *topicInfo, err error) {
			if err != nil {
				retry()
				return
			}
			s.topic = info
			ready(info)
		})
	}
	if s.client == nil {
		s.connect(func(err error) {
			if err != nil {
				retry()
				return
			}
			w.ensureTopic(e, s, ready)
		})
		return
	}
	if s.served(kmsg.CreateTopics.Int16()) < 2 {
		describe()
		return
	}
	w.createTopic(s, func(err error) {
		if err != nil {
			// Refused or lost: the metadata's auto-creation is the
			// fallback, and says whether the topic exists.
			w.r.probes.add("client.create_topic_failed")
		}
		describe()
	})
}

// createTopic asks for the run's topic; one that exists already is fine.
func (w *worker) createTopic(s *session, done func(error)) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = min(s.served(kmsg.CreateTopics.Int16()), 7)
	req.TimeoutMillis = int32(metadataTimeout / time.Millisecond)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = w.r.topic
	t.NumPartitions = int32(w.r.opts.Partitions)
	t.ReplicationFactor = 1
	for _, kv := range [][2]string{
		{"segment.bytes", fmt.Sprint(w.r.opts.SegmentBytes)},
		{"segment.index.bytes", fmt.Sprint(topicIndexBytes)},
	} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = kv[0], &kv[1]
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	s.do(req, metadataTimeout, func(resp kmsg.Response, err error) {
		if err != nil {
			done(err)
			return
		}
		for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
			if rt.Topic == w.r.topic && rt.ErrorCode != 0 && rt.ErrorCode != kerr.TopicAlreadyExists.Code {
				done(kerr.ErrorForCode(rt.ErrorCode))
				return
			}
		}
		done(nil)
	})
}

// describeTopic asks the metadata for the run's topic, allowing
// auto-creation.
func (w *worker) describeTopic(s *session, done func(*topicInfo, error)) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	name := w.r.topic
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	s.do(req, metadataTimeout, func(resp kmsg.Response, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(w.topicFrom(resp.(*kmsg.MetadataResponse)))
	})
}

func (w *worker) topicFrom(resp *kmsg.MetadataResponse) (*topicInfo, error) {
	if resp.ClusterID != nil {
		w.r.seeClusterID(*resp.ClusterID)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != w.r.topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata of %s: %w", w.r.topic, kerr.ErrorForCode(t.ErrorCode))
		}
		if len(t.Partitions) != w.r.opts.Partitions {
			// A topic with another count would make every partition
			// number of the workload wrong: the broker broke a promise.
			w.r.violate("metadata of %s lists %d partitions, the broker was configured with %d", w.r.topic, len(t.Partitions), w.r.opts.Partitions)
			return nil, fmt.Errorf("metadata of %s: %d partitions", w.r.topic, len(t.Partitions))
		}
		return &topicInfo{id: t.TopicID, partitions: len(t.Partitions)}, nil
	}
	return nil, fmt.Errorf("metadata does not list %s", w.r.topic)
}

// staleTopicCode reports the errors after which a client asks the metadata
// again before retrying: the topic it knows may be gone or recreated.
func staleTopicCode(err error) bool {
	for _, e := range []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.NotLeaderForPartition, kerr.LeaderNotAvailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
