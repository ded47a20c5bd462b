package raftmeta

import (
	"fmt"
	"sort"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/internal/invariants"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The controller decides which records the cluster writes, in the manner of
// Kafka's QuorumController and its managers (ClusterControlManager,
// BrokerHeartbeatManager, ReplicationControlManager). It is a pure state
// machine, as etcd raft's core is: inputs arrive as calls (a request, a
// heartbeat, the clock's now, the committed image), and effects leave as
// data (records to propose, the answer, the next deadline). It owns no timer
// and does no I/O.
//
// The node runs it on the raft leader. Each call returns its records as one
// batch, to be proposed in order as one entry; the answer the call returns
// holds once that batch commits, and the node sends it then. When the
// committed image advances, the node calls Committed. If the batch does not
// commit (the leader lost its term, a proposal was dropped), the node
// discards the controller and, once it leads again, builds a new one from
// the committed image, as Kafka's controller renounces and reloads.
//
// Decisions are made against a working view: the committed image with every
// proposed batch applied to it, so two requests in flight cannot both create
// one topic, and a record's offset (its Applied count) is known when it is
// proposed. Only the controller writes records while it lives; records
// written by anyone else are noticed by Committed, which then rebuilds the
// view from the committed image.
//
// Heartbeats stay in memory, as in KRaft: only their consequences (fence,
// unfence, controlled shutdown and the leader moves they cause) become
// records, so the log does not grow with the number of brokers.

// ControllerConfig tunes the controller; zero values take Kafka's defaults.
type ControllerConfig struct {
	// SessionTimeout is how long a broker may go without a heartbeat
	// before it is fenced (broker.session.timeout.ms, 9s).
	SessionTimeout time.Duration
	// AutoLeaderRebalance turns on the periodic preferred-leader election
	// (auto.leader.rebalance.enable; Kafka's default is true, the zero
	// value here is off so a caller chooses).
	AutoLeaderRebalance bool
	// RebalanceInterval is the period of that check
	// (leader.imbalance.check.interval.seconds, 300s).
	RebalanceInterval time.Duration
	// ImbalancePercent is the share of a broker's preferred partitions it
	// may fail to lead before a rebalance moves them back
	// (leader.imbalance.per.broker.percentage, 10).
	ImbalancePercent int
	// ProducerIDBlock is the size of a producer-id block (1000, as Kafka's
	// ProducerIdControlManager).
	ProducerIDBlock int64
	// ImageLagMax is how far behind the committed log, in time, a
	// broker's image may be and its heartbeat still say it is caught up
	// (a quarter of SessionTimeout). Brokers lead only on a lease that
	// such a heartbeat renews: one whose image stopped moving (its raft
	// link broken while its heartbeats get through) must not go on
	// acting on leaderships the log has taken from it.
	ImageLagMax time.Duration
	// CommitTimes is the node's record of when its image reached each
	// offset, which the node keeps up as it applies the log; nil: the
	// controller keeps its own, from its start (counting the log it starts
	// with as committed then).
	CommitTimes *CommitTimes
}

const (
	defaultSessionTimeout    = 9 * time.Second
	defaultRebalanceInterval = 300 * time.Second
	defaultImbalancePercent  = 10
	defaultProducerIDBlock   = 1000
	// maxElectionsPerRebalance bounds one rebalance round, as Kafka's
	// MAX_ELECTIONS_PER_IMBALANCE; the next round follows at once.
	maxElectionsPerRebalance = 1000
)

func (cfg ControllerConfig) withDefaults() ControllerConfig {
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = defaultSessionTimeout
	}
	if cfg.RebalanceInterval <= 0 {
		cfg.RebalanceInterval = defaultRebalanceInterval
	}
	if cfg.ImageLagMax <= 0 {
		cfg.ImageLagMax = cfg.SessionTimeout / 4
	}
	if cfg.ImbalancePercent <= 0 {
		cfg.ImbalancePercent = defaultImbalancePercent
	}
	if cfg.ProducerIDBlock <= 0 {
		cfg.ProducerIDBlock = defaultProducerIDBlock
	}
	return cfg
}

// Controller is the metadata controller's state: the working view and the
// brokers' sessions.
type Controller struct {
	cfg  ControllerConfig
	rand env.Rand
	view *Image
	// pendingEnds are the view's Applied counts at the end of each batch
	// proposed and not yet seen committed, in order.
	pendingEnds []uint64
	sessions    map[int32]*session
	// commits says when the committed log reached each offset: the
	// node's (ControllerConfig.CommitTimes), or the controller's own from
	// its start.
	commits *CommitTimes
	// now is the latest time a call passed in.
	now           time.Time
	nextRebalance time.Time
	// failed is set when a record the controller decided does not apply
	// to its own view: a bug. Every later call answers
	// UNKNOWN_SERVER_ERROR with no records, and Err reports it, so the
	// node rebuilds the controller from the committed image.
	failed error
}

// session is what the controller knows of a broker from its heartbeats.
type session struct {
	// epoch is the registration the session belongs to.
	epoch int64
	// lastContact is the last heartbeat (or registration, or the moment
	// this controller started).
	lastContact time.Time
	// heard says this controller has heard from the broker itself (a
	// registration or a heartbeat), not just given it a session when it
	// started. Only a session heard from blocks a new incarnation's
	// registration: a broker restarted across a controller failover, or a
	// single node restarted (its own controller started with it), is not
	// kept waiting out a session nobody renewed (Kafka's
	// BrokerHeartbeatManager has no session for such a broker at all).
	heard bool
	// metadataOffset is the last offset the broker said it has applied.
	metadataOffset uint64
	// shutdownOffset is the view's offset at the end of the batch that
	// began the broker's controlled shutdown: it may shut down once every
	// active broker has applied that far (so the partitions' new leaders
	// know they lead).
	shutdownOffset uint64
}

// NewController starts a controller from the committed image (which it
// copies and never touches again). It gives every registered broker a full
// session from now before it fences anyone, since it cannot know when the
// previous controller last heard from them (Kafka's BrokerHeartbeatManager
// starts empty on activation for the same reason). Random choices (replica
// placement, topic ids not given) draw from rand.
//
// The node must build it only once the committed image holds every entry of
// earlier raft terms (the leader's first entry of its term has committed),
// so that nothing another controller proposed lands after its view.
func NewController(committed *Image, cfg ControllerConfig, now time.Time, rand env.Rand) *Controller {
	c := &Controller{
		cfg:      cfg.withDefaults(),
		rand:     rand,
		view:     committed.Clone(),
		sessions: map[int32]*session{},
		now:      now,
	}
	c.nextRebalance = now.Add(c.cfg.RebalanceInterval)
	c.syncSessions()
	c.commits = c.cfg.CommitTimes
	if c.commits == nil {
		c.commits = NewCommitTimes(c.cfg.ImageLagMax)
		c.commits.Note(committed.Applied, now)
	}
	return c
}

// syncSessions gives every registered broker without a session of its
// current registration a fresh one from now, and drops the sessions of
// brokers gone.
func (c *Controller) syncSessions() {
	for _, id := range c.sessionIDs() {
		if b, ok := c.view.Brokers[id]; !ok || b.Epoch != c.sessions[id].epoch {
			delete(c.sessions, id)
		}
	}
	for _, id := range c.view.BrokerIDs() {
		b := c.view.Brokers[id]
		if c.sessions[id] == nil {
			s := &session{epoch: b.Epoch, lastContact: c.now}
			if b.InControlledShutdown {
				s.shutdownOffset = c.view.Applied
			}
			c.sessions[id] = s
		}
	}
}

// session returns the broker's session. Every registered broker has one
// (NewController, Committed and RegisterBroker make them); should one be
// missing, it starts now rather than fail.
func (c *Controller) session(id int32) *session {
	s := c.sessions[id]
	if s == nil {
		s = &session{epoch: c.view.Brokers[id].Epoch, lastContact: c.now}
		c.sessions[id] = s
	}
	return s
}

func (c *Controller) sessionIDs() []int32 {
	ids := make([]int32, 0, len(c.sessions))
	for id := range c.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// View returns the working view: the committed image with every proposed
// batch applied. The caller must not change it.
func (c *Controller) View() *Image { return c.view }

// Err returns why the controller stopped deciding, or nil.
func (c *Controller) Err() error { return c.failed }

// Pending reports how many proposed batches have not been seen committed.
func (c *Controller) Pending() int { return len(c.pendingEnds) }

// Committed tells the controller that the committed image has advanced to
// im (read during the call only) at now. Batches the image now covers are
// no longer pending. When none is pending and the image is not at the
// view's offset, records came from elsewhere: the view is rebuilt from im,
// and brokers new to it get a full session.
func (c *Controller) Committed(now time.Time, im *Image) {
	c.observe(now)
	if c.cfg.CommitTimes == nil {
		c.commits.Note(im.Applied, now) // the node notes its own
	}
	for len(c.pendingEnds) > 0 && c.pendingEnds[0] <= im.Applied {
		c.pendingEnds = c.pendingEnds[1:]
	}
	if len(c.pendingEnds) > 0 {
		return
	}
	if im.Applied != c.view.Applied || c.failed != nil {
		c.view = im.Clone()
		c.failed = nil
		c.syncSessions()
		return
	}
	if invariants.Enabled && im.partitions <= fullCheckPartitionsMax && !im.Equal(c.view) {
		invariants.Panicf("controller: the committed image at offset %d differs from the view the controller proposed", im.Applied)
	}
}

// imageCaughtUp says whether a broker whose image has applied offset has
// everything committed more than ImageLagMax ago.
func (c *Controller) imageCaughtUp(offset uint64) bool {
	return offset >= c.commits.reachedBy(c.now.Add(-c.cfg.ImageLagMax))
}

// batch collects the records of one call, each applied to the view as it
// is added.
type batch struct {
	c       *Controller
	records []Record
}

func (c *Controller) batch() *batch { return &batch{c: c} }

// add applies r to the view and keeps it. A record that does not apply is
// a bug of the controller's: it fails the controller (and the process, in
// an invariants build).
func (b *batch) add(r Record) {
	c := b.c
	if c.failed != nil {
		return
	}
	if err := c.view.Apply(r); err != nil {
		c.failed = fmt.Errorf("raftmeta: controller: a record it decided does not apply to its view: %w", err)
		if invariants.Enabled {
			invariants.Panicf("%v", c.failed)
		}
		return
	}
	b.records = append(b.records, r)
}

// done returns the batch's records and remembers it as pending.
func (b *batch) done() []Record {
	c := b.c
	if c.failed != nil || len(b.records) == 0 {
		return nil
	}
	c.pendingEnds = append(c.pendingEnds, c.view.Applied)
	return b.records
}

// observe moves the controller's clock. The clock may jump backwards (the
// simulator's can); a session then simply lasts longer.
func (c *Controller) observe(now time.Time) { c.now = now }

// failedErr is the answer of every call once the controller has failed.
func (c *Controller) failedErr() (*kerr.Error, string) {
	return kerr.UnknownServerError, c.failed.Error()
}

// Tick is the passage of time: it fences every broker whose session has run
// out (no heartbeat for SessionTimeout), moving its leaderships, and runs
// the automatic leader rebalance when it is due. It returns the records and
// the next deadline (zero when there is none), at which the node calls
// Tick again.
//
// Kafka fences one stale broker per event so that each fencing is visible
// before the next; here all stale brokers are fenced in one batch, in the
// order their sessions ran out (then by id), and each fencing's leader
// choice already sees the ones before it, which comes to the same.
func (c *Controller) Tick(now time.Time) ([]Record, time.Time) {
	c.observe(now)
	if c.failed != nil {
		return nil, time.Time{}
	}
	b := c.batch()
	for _, id := range c.staleBrokers(now) {
		c.fence(b, id)
	}
	if c.cfg.AutoLeaderRebalance && !now.Before(c.nextRebalance) {
		if c.rebalance(b) {
			c.nextRebalance = now
		} else {
			c.nextRebalance = now.Add(c.cfg.RebalanceInterval)
		}
	}
	return b.done(), c.Deadline()
}

// staleBrokers returns the unfenced brokers whose session has run out at
// now, in the order they ran out.
func (c *Controller) staleBrokers(now time.Time) []int32 {
	var stale []int32
	for _, id := range c.view.BrokerIDs() {
		if !c.view.Brokers[id].Fenced && !now.Before(c.sessionEnd(id)) {
			stale = append(stale, id)
		}
	}
	sort.SliceStable(stale, func(i, j int) bool { return c.sessionEnd(stale[i]).Before(c.sessionEnd(stale[j])) })
	return stale
}

func (c *Controller) sessionEnd(id int32) time.Time {
	return c.session(id).lastContact.Add(c.cfg.SessionTimeout)
}

// hasValidSession reports whether the broker is unfenced and heard from
// within the session timeout.
func (c *Controller) hasValidSession(id int32, now time.Time) bool {
	b, ok := c.view.Brokers[id]
	return ok && !b.Fenced && now.Before(c.sessionEnd(id))
}

// Deadline returns when Tick next has something to do: the first session
// of an unfenced broker to run out, or the next rebalance; zero when
// neither.
func (c *Controller) Deadline() time.Time {
	var next time.Time
	for _, id := range c.view.BrokerIDs() {
		if end := c.sessionEnd(id); !c.view.Brokers[id].Fenced && (next.IsZero() || end.Before(next)) {
			next = end
		}
	}
	if c.cfg.AutoLeaderRebalance && (next.IsZero() || c.nextRebalance.Before(next)) {
		next = c.nextRebalance
	}
	return next
}

// Bootstrap returns the record that names the cluster, when the log has no
// cluster id yet; nothing when it has this one; INCONSISTENT_CLUSTER_ID when
// it has another.
func (c *Controller) Bootstrap(clusterID string) (*kerr.Error, []Record) {
	if c.failed != nil {
		err, _ := c.failedErr()
		return err, nil
	}
	switch {
	case clusterID == "":
		return kerr.InvalidRequest, nil
	case c.view.ClusterID == clusterID:
		return nil, nil
	case c.view.ClusterID != "":
		return kerr.InconsistentClusterID, nil
	}
	b := c.batch()
	b.add(ClusterIDRecord{ClusterID: clusterID})
	return nil, b.done()
}
