package node

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/sluicemq/sluice/isr"
	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/raftmeta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partitionKey names a partition by its topic's id, which unlike the name
// is never reused.
type partitionKey struct {
	topic raftmeta.TopicID
	index int32
}

// partition is a partition this broker holds a replica of: its log, its
// replication state, and what waits on it.
type partition struct {
	b           *Broker
	topic       string
	topicID     raftmeta.TopicID
	index       int32
	leaderEpoch int32
	// leading says the image names this broker the partition's leader.
	// A partition whose leadership moved away stays open (its data is
	// here) and follows the new leader.
	leading bool
	// recovered says the tail its log recovered is durable: until then
	// the partition serves nothing and its replica has no role, since a
	// record the recovery found only in the page cache could still be
	// lost, and serving it would move the high watermark past what a
	// power loss keeps.
	recovered bool
	// recoveryDone says recover finished (recoveryErr: how), and
	// recoveryWaiters wait for it.
	recoveryDone    bool
	recoveryErr     error
	recoveryWaiters waiters
	log             *log.Log
	// rep decides replication (package isr); the node does what its
	// Ready says (replication.go).
	rep *isr.Replica
	// hw is the high watermark, rep's, kept here for the fast path. Only
	// records below it are served, so a consumer never sees a record that
	// a power loss of every replica could take back.
	hw int64
	// watchers are parked fetches to wake when hw moves (and, for
	// followers' fetches, when the log grows).
	watchers []*fetchWait
	// followerStarts are the followers' log starts as their last fetches
	// gave them, for KIP-392's choice of a read replica (replica_selector.go).
	followerStarts map[int32]int64
	// hwWaiters are acks=all produces waiting for hw to pass their
	// records, in the order they were appended.
	hwWaiters []hwWaiter
	// flushMessages is flush.messages: 1 (the default) is the
	// power-loss-safe mode, where a replica's position is its durable
	// end; above 1 is Kafka's page-cache mode, where it is the log end and
	// the log is synced every flushMessages messages (or flush.ms).
	// unflushed counts the messages appended since the last sync asked.
	flushMessages, unflushed int64
	// Follower state: query is an epoch query to send to the leader
	// (rep's Ready), fetching says the truncation is done and the
	// partition belongs in its leader's fetches, truncating that a
	// truncation is on its way to the disk.
	query      *isr.EpochQuery
	fetching   bool
	truncating bool
	// fetcher is the fetcher last given the partition to follow its
	// leader (assignFetcher), nil if none: no other fetcher's parts hold
	// it.
	fetcher *fetcher
}

// serving says this broker answers produces and fetches for the
// partition: it leads it, its recovery is durable, and it holds its lease
// as a leader (63_broker_heartbeat.go).
func (p *partition) serving() bool {
	return p != nil && p.leading && p.recovered && p.rep.Role() == isr.RoleLeader && p.b.leaseHeld()
}

// highWatermark is the end of what may be served and acknowledged. Every
// caller relies on log start <= high watermark <= durable end <= log end,
// so it is asserted at each read.
func (p *partition) highWatermark() int64 {
	if invariants.Enabled {
		p.checkOffsets()
	}
	return p.hw
}

// checkOffsets asserts the order of the partition's offsets.
func (p *partition) checkOffsets() {
	start, durable, end := p.log.LogStartOffset(), p.log.DurableOffset(), p.log.LogEndOffset()
	if p.pageCache() {
		durable = end // positions are log ends
	}
	if !(start <= p.hw && p.hw <= durable && durable <= end) {
		invariants.Panicf("partition %s-%d: want log start %d <= high watermark %d <= durable end %d <= log end %d",
			p.topic, p.index, start, p.hw, durable, end)
	}
}

// pageCache says the partition runs in Kafka's page-cache mode
// (flush.messages above 1).
func (p *partition) pageCache() bool { return p.flushMessages > 1 }

// appended applies the flush policy to n messages just appended (ending
// before end): in the power-loss-safe mode every append is flushed (the
// log group-commits them); in page-cache mode every flushMessages
// messages, flush.ms being the log's own timer.
func (p *partition) appended(end, n int64) {
	if !p.pageCache() {
		p.flushTo(end)
		return
	}
	p.unflushed += n
	if p.unflushed >= p.flushMessages {
		p.unflushed = 0
		p.flushTo(end)
	}
	p.b.localMoved(p)
}

// flushTo asks the log to make everything before end durable; the replica
// learns its new position when it is. A flush that fails fails the
// produces waiting on the partition with the log's error.
func (p *partition) flushTo(end int64) {
	p.log.Flush(end, func(err error) {
		if err != nil {
			p.failWaiters(err)
		}
		p.b.localMoved(p)
	})
}

// whenDurable calls done once everything before end is durable (or with
// the error that stopped it).
func (p *partition) whenDurable(end int64, done func(error)) {
	p.log.Flush(end, func(err error) {
		p.b.localMoved(p)
		done(err)
	})
}

// partitionDir is Kafka's directory name for a partition.
func partitionDir(topic string, index int32) string {
	return topic + "-" + strconv.Itoa(int(index))
}

// openPartitions opens the log of every partition in the image this broker
// leads, and removes directories of partitions that no longer exist (a
// topic deleted just before a crash).
func (b *Broker) openPartitions() error {
	for _, name := range b.image.TopicNames() {
		if _, err := b.openTopicPartitions(b.image.TopicByName(name)); err != nil {
			b.env.Log.Error("partition offline", "err", err)
		}
	}
	return b.removeOrphanDirs()
}

// openTopicPartitions opens (creating) the logs of a topic's partitions and
// returns those it opened, which serve once recovered (see recover). A
// partition whose log cannot be opened (its disk fails) is marked offline
// and the others are still served; the error names every failure.
func (b *Broker) openTopicPartitions(t *raftmeta.Topic) ([]*partition, error) {
	var opened []*partition
	var errs []error
	for _, mp := range t.Partitions {
		if !slices.Contains(mp.Replicas, b.cfg.NodeID) {
			continue
		}
		key := partitionKey{t.ID, mp.Index}
		if p := b.partitions[key]; p != nil {
			b.followMetadata(p, mp)
			continue
		}
		cfg := b.logConfig(t, mp.Index)
		err := b.claimPartitionDir(cfg.Dir, t.ID)
		var l *log.Log
		if err == nil {
			l, err = log.Open(cfg)
		}
		if err != nil {
			err = fmt.Errorf("node: open partition %s: %w", cfg.Dir, err)
			b.offline[key] = err
			errs = append(errs, err)
			continue
		}
		delete(b.offline, key)
		b.writePartitionMetadata(cfg.Dir, t.ID)
		p := &partition{b: b, topic: t.Name, topicID: t.ID, index: mp.Index, leaderEpoch: mp.LeaderEpoch,
			leading: mp.Leader == b.cfg.NodeID, log: l}
		b.newReplica(p, t)
		b.partitions[key] = p
		opened = append(opened, p)
	}
	return opened, errors.Join(errs...)
}

// recover makes p's recovered tail durable and then starts its replica
// (which serves, if it leads); done gets the error that stopped it. A log recovered from anything but a
// clean shutdown refuses appends until its recovery is durable
// (Log.Ready).
func (b *Broker) recover(p *partition, done func(error)) {
	finish := func(err error) {
		p.recovered, p.recoveryDone, p.recoveryErr = err == nil, true, err
		if err == nil {
			b.startReplica(p)
			if p.topic == offsetsTopic && b.state == stateRunning {
				b.syncShards()
			}
		}
		done(err)
		p.recoveryWaiters.wake(err)
	}
	p.log.Ready(func(err error) {
		if err != nil {
			finish(err)
			return
		}
		p.whenDurable(p.log.LogEndOffset(), finish)
	})
}

// whenRecovered calls done once recover has finished with p (with its
// error): from then on the partition serves, if this broker leads it.
func (b *Broker) whenRecovered(p *partition, done func(error)) {
	if p.recoveryDone {
		err := p.recoveryErr
		b.env.Loop.Post(func() { done(err) })
		return
	}
	p.recoveryWaiters.add(done)
}

// recoverOpened recovers partitions opened while the broker runs; one
// whose recovery fails is offline.
func (b *Broker) recoverOpened(opened []*partition) {
	for _, p := range opened {
		b.recover(p, func(err error) {
			key := partitionKey{p.topicID, p.index}
			if err != nil && b.partitions[key] == p {
				err = fmt.Errorf("node: recover partition %s: %w", partitionDir(p.topic, p.index), err)
				b.offline[key] = err
				b.env.Log.Error("partition offline", "err", err)
			}
		})
	}
}

// ledPartition returns partition index of t as this broker leads it, with
// the error a request carrying the client's leaderEpoch gets: none, or
// FENCED_LEADER_EPOCH for an older epoch (-1 skips the check),
// UNKNOWN_LEADER_EPOCH for a newer one. The partition is returned with
// those two errors too, for responses that still report its offsets.
func (b *Broker) ledPartition(t *raftmeta.Topic, index, leaderEpoch int32) (*partition, *kerr.Error) {
	key := partitionKey{t.ID, index}
	p := b.partitions[key]
	switch {
	case !p.serving() && p != nil && p.recovered && leaderEpoch >= 0 && leaderEpoch != p.leaderEpoch:
		// A replica here that does not lead: the epoch is checked first,
		// as Kafka's Partition does, so a follower asked at a newer epoch
		// than it knows says so (UNKNOWN_LEADER_EPOCH: its metadata is
		// behind) and one asked at an older says FENCED_LEADER_EPOCH.
		if leaderEpoch < p.leaderEpoch {
			return nil, kerr.FencedLeaderEpoch
		}
		return nil, kerr.UnknownLeaderEpoch
	case !p.serving():
		return nil, b.missingPartition(key)
	case leaderEpoch >= 0 && leaderEpoch < p.leaderEpoch:
		return p, kerr.FencedLeaderEpoch
	case leaderEpoch > p.leaderEpoch:
		return p, kerr.UnknownLeaderEpoch
	}
	return p, nil
}

// missingPartition is the error for a partition of a known topic that this
// broker does not serve: offline if its log failed to open,
// NOT_LEADER_OR_FOLLOWER if another broker leads it (or none does, for
// now), else unknown.
func (b *Broker) missingPartition(key partitionKey) *kerr.Error {
	if b.offline[key] != nil {
		return kerr.KafkaStorageError
	}
	if _, ok := b.imagePartition(key); ok {
		return kerr.NotLeaderForPartition
	}
	return kerr.UnknownTopicOrPartition
}

// imagePartition is a partition as the image has it.
func (b *Broker) imagePartition(key partitionKey) (raftmeta.Partition, bool) {
	t := b.image.Topics[key.topic]
	if t == nil || key.index < 0 || int(key.index) >= len(t.Partitions) {
		return raftmeta.Partition{}, false
	}
	return t.Partitions[key.index], true
}

// currentLeader is the leader and leader epoch the image gives a
// partition, for KIP-951's hints in NOT_LEADER_OR_FOLLOWER answers (-1, -1
// when unknown).
func (b *Broker) currentLeader(key partitionKey) (leader, epoch int32) {
	p, ok := b.imagePartition(key)
	if !ok {
		return -1, -1
	}
	return p.Leader, p.LeaderEpoch
}

// leaderEndpoint is a broker's client address, for KIP-951's node
// endpoints.
func (b *Broker) leaderEndpoint(id int32) (raftmeta.Broker, bool) {
	br, ok := b.image.Brokers[id]
	return br, ok && id >= 0
}

// awaitPartitionsDurable calls done once every open partition is
// recovered (its high watermark has caught up with its log's end), or with
// the errors that stopped them.
func (b *Broker) awaitPartitionsDurable(done func(error)) {
	all := newJoin(done)
	for _, key := range b.sortedPartitionKeys() {
		b.recover(b.partitions[key], all.add())
	}
	all.wait()
}

// scheduleMaintenance arms the next retention pass.
func (b *Broker) scheduleMaintenance() {
	b.maintenance = b.env.Clock.AfterFunc(b.cfg.LogRetentionCheckInterval, func() {
		if b.state != stateRunning {
			return
		}
		b.enforceRetention()
		b.scheduleMaintenance()
	})
}

// enforceRetention deletes each partition's segments that retention.ms and
// retention.bytes no longer keep (never beyond the high watermark, never
// the active segment), and forgets producers idle past
// producer.id.expiration.ms.
func (b *Broker) enforceRetention() {
	for _, key := range b.sortedPartitionKeys() {
		p := b.partitions[key]
		deleted, err := p.log.EnforceRetention(p.highWatermark())
		if err != nil {
			b.env.Log.Error("retention failed", "topic", p.topic, "partition", p.index, "err", err)
			continue
		}
		if deleted > 0 {
			b.env.Log.Info("deleted segments by retention", "topic", p.topic, "partition", p.index,
				"segments", deleted, "log_start_offset", p.log.LogStartOffset())
		}
		p.log.RemoveExpiredProducers()
	}
}

// logConfig maps a topic's configs (over the broker's defaults) to its
// partition log's.
func (b *Broker) logConfig(t *raftmeta.Topic, index int32) log.Config {
	value := func(name string) string {
		if v, ok := t.Configs[name]; ok {
			return v
		}
		def, _ := lookupTopicConfig(name)
		return def.defaultValue(b.cfg)
	}
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(value(name)), 10, 64)
		return n
	}
	// Topic configs are Kafka's values: milliseconds and bytes, -1 for
	// unlimited where Kafka allows it, 0 for "at once" or "nothing". The
	// log reads a zero as "Kafka's default" and a negative as unlimited,
	// so a zero or an overflowing value must not reach it as such.
	forever := time.Duration(100 * 365 * 24 * time.Hour)
	ms := func(name string) time.Duration {
		n := num(name)
		switch {
		case n <= Unlimited:
			return -1
		case n == 0:
			return time.Millisecond // at once: the smallest interval the log tells from "default"
		case n >= int64(forever/time.Millisecond):
			return forever
		}
		return time.Duration(n) * time.Millisecond
	}
	byteLimit := func(name string) int64 {
		n := num(name)
		switch {
		case n <= Unlimited:
			return -1
		case n == 0:
			return 1 // keep nothing but the active segment, as Kafka's 0 does
		}
		return n
	}
	atLeastOne := func(name string) int64 { return max(num(name), 1) }
	cfg := log.Config{
		FS:                 b.env.FS,
		Clock:              b.env.Clock,
		Loop:               b.env.Loop,
		Logger:             b.env.Log.With("topic", t.Name, "partition", index),
		Dir:                partitionDir(t.Name, index),
		SegmentBytes:       num("segment.bytes"),
		SegmentTime:        ms("segment.ms"),
		IndexIntervalBytes: atLeastOne("index.interval.bytes"),
		IndexBytesMax:      num("segment.index.bytes"),
		MaxMessageBytes:    int(atLeastOne("max.message.bytes")),
		RetentionTime:      ms("retention.ms"),
		RetentionBytes:     byteLimit("retention.bytes"),
		FlushInterval:      ms("flush.ms"),
		CheckpointInterval: b.cfg.LogFlushOffsetCheckpointInterval,
	}
	if value("message.timestamp.type") == "LogAppendTime" {
		cfg.TimestampType = log.LogAppendTime
	}
	// compression.type was checked when it was set (topicconfig.go).
	if c, err := log.ParseCompression(value("compression.type")); err == nil {
		cfg.Compression = c
	}
	return cfg
}

// removeOrphanDirs removes partition directories that no topic owns.
func (b *Broker) removeOrphanDirs() error {
	names, err := b.env.FS.List(".")
	if err != nil {
		return fmt.Errorf("node: list data directory: %w", err)
	}
	// A directory is an orphan only if no partition of any topic in the
	// image has its name: a partition this broker does not lead keeps its
	// data.
	owned := map[string]raftmeta.TopicID{}
	for _, name := range b.image.TopicNames() {
		t := b.image.TopicByName(name)
		for _, mp := range t.Partitions {
			owned[partitionDir(name, mp.Index)] = t.ID
		}
	}
	for _, name := range names {
		i := strings.LastIndexByte(name, '-')
		if i <= 0 || strings.HasPrefix(name, "__cluster_metadata") {
			continue
		}
		if _, err := strconv.Atoi(name[i+1:]); err != nil {
			continue
		}
		if id, ok := owned[name]; ok {
			// A directory of a deleted topic whose name a new topic took
			// is the new topic's only if it says so (partition.metadata).
			claimed, known, err := b.dirTopicID(name)
			if err != nil || !known || claimed == id {
				continue
			}
		}
		b.env.Log.Warn("removing the directory of a deleted partition", "dir", name)
		if err := removeTree(b.env.FS, name); err != nil {
			return fmt.Errorf("node: remove orphan partition %s: %w", name, err)
		}
	}
	return nil
}

// removeTopicPartitions closes and deletes the logs of a topic whose
// deletion has committed; done runs on the loop with the errors, and
// stranded set if a partition directory could not be removed.
func (b *Broker) removeTopicPartitions(t *raftmeta.Topic, done func(stranded bool, err error)) {
	stranded := false
	all := newJoin(func(err error) {
		b.env.FS.SyncDir(".", func(serr error) { done(stranded, errors.Join(err, serr)) })
	})
	remove := func(dir string) error {
		err := removeTree(b.env.FS, dir)
		if err != nil {
			stranded = true
		}
		return err
	}
	for _, mp := range t.Partitions {
		key := partitionKey{t.ID, mp.Index}
		p := b.partitions[key]
		dir := partitionDir(t.Name, mp.Index)
		if b.offline[key] != nil {
			// Its log never opened, but its directory may hold records.
			delete(b.offline, key)
			all.add()(remove(dir))
		}
		if p == nil {
			continue
		}
		delete(b.partitions, key)
		for _, f := range slices.Clone(p.watchers) {
			f.finish()
		}
		removed := all.add()
		p.log.Close(func(err error) {
			// Remove the data even when the log failed to close cleanly:
			// a deleted topic's records must never come back under a new
			// topic of the same name.
			removed(errors.Join(err, remove(dir)))
		})
	}
	all.wait()
}

// closePartitions flushes, checkpoints and closes every log.
func (b *Broker) closePartitions(done func(error)) {
	all := newJoin(done)
	for _, key := range b.sortedPartitionKeys() {
		p := b.partitions[key]
		delete(b.partitions, key)
		p.log.Close(all.add())
	}
	all.wait()
}

// join waits for callbacks started together: each add returns one to hand
// out, and once wait has been called and every callback has run, done runs
// with their errors joined.
type join struct {
	pending int
	errs    []error
	done    func(error)
}

func newJoin(done func(error)) *join { return &join{pending: 1, done: done} }

func (j *join) add() func(error) {
	j.pending++
	return j.finish
}

// wait releases the join's own hold: done runs when the last callback does
// (at once if none is outstanding).
func (j *join) wait() { j.finish(nil) }

func (j *join) finish(err error) {
	if err != nil {
		j.errs = append(j.errs, err)
	}
	j.pending--
	if j.pending == 0 {
		j.done(errors.Join(j.errs...))
	}
}

func (b *Broker) sortedPartitionKeys() []partitionKey { return sortedPartitionKeysOf(b.partitions) }

// sortedPartitionKeysOf returns a map's partition keys in order.
func sortedPartitionKeysOf[V any](m map[partitionKey]V) []partitionKey {
	keys := make([]partitionKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, comparePartitionKeys)
	return keys
}

func comparePartitionKeys(x, y partitionKey) int {
	if c := bytes.Compare(x.topic[:], y.topic[:]); c != 0 {
		return c
	}
	return cmp.Compare(x.index, y.index)
}

// removeTree removes a directory and the files in it.
func removeTree(fsys interface {
	List(string) ([]string, error)
	Remove(string) error
}, dir string) error {
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := fsys.Remove(dir + "/" + name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return fsys.Remove(dir)
}
