package simrun

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reconfigurer: in a seed with voter changes, an operator takes a
// voter out of the metadata quorum (RemoveRaftVoter, kafka-metadata-quorum
// remove-controller) and puts it back (AddRaftVoter, add-controller) every
// few seconds while the faults and the clients go on, as one does to
// replace a controller's disk or machine. The removed node stays up: a
// combined node is demoted to a learner, and its broker goes on following
// the metadata log. Each step asks the quorum's leader which nodes vote
// now (DescribeQuorum, following NOT_LEADER_OR_FOLLOWER's hint), then
// removes one (never below two voters, so that a single fault does not
// always stall the quorum) or adds back the one missing. A change whose
// answer is lost is simply looked at again by the next step.
//
// It records no history of its own: what the quorum promises through a
// reconfiguration (one leader a term, applied logs prefixes of one
// another, the metadata history linearizable, every node converging) is
// what the run checks anyway, now with the voter set moving under it. In
// the liveness phase it adds back whatever is out and must then see every
// original voter voting again (a quorum that cannot be made whole after
// healing fails the run).
type reconfigurer struct {
	r    *clusterRun
	node *sim.Node
	rand *rng.Rand
	e    env.Env
	s    *session
	// voters are the original voters' node ids, in order; clusterID is
	// the cluster's, which voter changes must name.
	voters    []int32
	clusterID string
	// leader is the node index to ask first (the last leader heard of).
	leader int
	// live is set in the liveness phase; whole once every original
	// voter votes again, seen twice, wholeFor apart (wholeOnce the
	// first time), so that a change whose answer was lost and that
	// commits late is seen too.
	live, whole, wholeOnce bool
	busy                   bool
	tries                  int
}

// reconfigureEvery is the mean pause between two of the reconfigurer's
// steps; wholeFor is how long the quorum must stay whole in the liveness
// phase.
const (
	reconfigureEvery = 3 * time.Second
	wholeFor         = 3 * time.Second
)

func (r *clusterRun) startReconfigurer() {
	if !r.opts.VoterChanges {
		return
	}
	c := &reconfigurer{r: r, rand: r.w.Rand("reconfigurer")}
	for _, n := range r.nodes {
		if n.voter {
			c.voters = append(c.voters, n.id)
		}
	}
	r.reconfig = c
	c.node = r.w.AddNode("reconfigurer", c.boot)
}

// boot starts the reconfigurer on its node, at first and after the node
// lost power (a power-loss seed cuts every machine, the operator's too):
// the step in flight is gone with the node's memory, and the next looks at
// the quorum afresh.
func (c *reconfigurer) boot(e env.Env) {
	c.e, c.busy = e, false
	c.s = &session{e: e, clientID: "reconfigurer", dialTimeout: dialTimeout, probes: &c.r.probes}
	c.later(time.Duration(c.rand.Intn(3000)) * time.Millisecond)
}

func (c *reconfigurer) later(d time.Duration) {
	inc := c.node.Incarnation()
	c.e.Clock.AfterFunc(d, func() {
		if c.node.Incarnation() == inc {
			c.step()
		}
	})
}

func (c *reconfigurer) done() bool { return !c.live || c.whole }

// startLiveness begins the liveness phase: from outside the world, so that
// the run sees the reconfigurer busy at once.
func (c *reconfigurer) startLiveness() {
	c.live, c.tries = true, 0
	inc := c.node.Incarnation()
	c.node.Post(func() {
		if c.node.Incarnation() == inc && !c.busy {
			c.step()
		}
	})
}

// step asks the leader for the voters, then changes them.
func (c *reconfigurer) step() {
	if c.busy || c.whole || c.r.stopping && !c.live {
		return
	}
	c.busy = true
	c.describe(c.leader, 0)
}

// describe asks node index i for the quorum; hops counts the leader hints
// followed.
func (c *reconfigurer) describe(i, hops int) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	c.send(i, req, func(resp kmsg.Response, err error) {
		var p *kmsg.DescribeQuorumResponseTopicPartition
		if err == nil {
			dq := resp.(*kmsg.DescribeQuorumResponse)
			if code := dq.ErrorCode; code != 0 {
				err = kerr.ErrorForCode(code)
			} else if len(dq.Topics) != 1 || len(dq.Topics[0].Partitions) != 1 {
				err = fmt.Errorf("DescribeQuorum answered %d topics", len(dq.Topics))
			} else {
				p = &dq.Topics[0].Partitions[0]
				if p.ErrorCode != 0 {
					err = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
		switch {
		case err == nil:
			c.leader = i
			c.change(p)
		case p != nil && p.ErrorCode == kerr.NotLeaderForPartition.Code && p.LeaderID >= 1 && int(p.LeaderID) <= len(c.r.nodes) && hops < 3:
			c.describe(int(p.LeaderID-1), hops+1)
		default:
			c.r.logf("reconfigurer: DescribeQuorum on %s: %v", c.r.nodes[i].name, err)
			c.leader = c.rand.Intn(len(c.r.nodes))
			c.retry()
		}
	})
}

// change removes a voter or adds the missing one back, as the quorum p
// stands.
func (c *reconfigurer) change(p *kmsg.DescribeQuorumResponseTopicPartition) {
	var voting []int32
	for _, v := range p.CurrentVoters {
		voting = append(voting, v.ReplicaID)
	}
	var missing []int32
	for _, id := range c.voters {
		if !slices.Contains(voting, id) {
			missing = append(missing, id)
		}
	}
	if c.clusterID == "" {
		// The operator's knowledge of the cluster (kafka-metadata-quorum
		// reads it from the quorum): any running node's image has it
		// once the leader answered.
		for _, n := range c.r.nodes {
			if b := n.broker(); b != nil && b.MetadataImage() != nil && b.MetadataImage().ClusterID != "" {
				c.clusterID = b.MetadataImage().ClusterID
				break
			}
		}
	}
	clusterID := c.clusterID
	switch {
	case len(missing) == 0 && c.live && !c.wholeOnce:
		c.wholeOnce, c.busy = true, false
		c.later(wholeFor)
		return
	case len(missing) == 0 && c.live:
		c.whole, c.busy = true, false
		c.r.logf("reconfigurer: every voter votes: %v", voting)
		return
	case len(missing) == 0 && len(voting) > 2:
		id := voting[c.rand.Intn(len(voting))]
		req := kmsg.NewPtrRemoveRaftVoterRequest()
		req.ClusterID, req.VoterID = &clusterID, id
		c.r.logf("reconfigurer: removing voter %d of %v", id, voting)
		c.send(c.rand.Intn(len(c.r.nodes)), req, func(resp kmsg.Response, err error) {
			if err == nil {
				rr := resp.(*kmsg.RemoveRaftVoterResponse)
				err = voterChangeError(rr.ErrorCode, rr.ErrorMessage)
			}
			c.answered("removed", id, err)
		})
	case len(missing) > 0:
		c.wholeOnce = false
		id := missing[c.rand.Intn(len(missing))]
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.ClusterID, req.TimeoutMillis, req.VoterID = &clusterID, 10000, id
		req.Listeners = append(req.Listeners, kmsg.AddRaftVoterRequestListener{Name: "CONTROLLER", Host: nodeName(int(id - 1)), Port: controllerPort})
		c.r.logf("reconfigurer: adding voter %d back to %v", id, voting)
		c.send(c.rand.Intn(len(c.r.nodes)), req, func(resp kmsg.Response, err error) {
			if err == nil {
				rr := resp.(*kmsg.AddRaftVoterResponse)
				err = voterChangeError(rr.ErrorCode, rr.ErrorMessage)
			}
			c.answered("added", id, err)
		})
	default:
		c.busy = false
		c.later(c.pause())
	}
}

// voterChangeError is a voter change's answer as an error (nil for none),
// with the broker's message, which says which refusal it was.
func voterChangeError(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil {
		err = fmt.Errorf("%w (%s)", err, *msg)
	}
	return err
}

// answered ends a step whose change got err (nil: done).
func (c *reconfigurer) answered(what string, id int32, err error) {
	c.busy = false
	if err != nil {
		c.r.logf("reconfigurer: voter %d not %s: %v", id, what, err)
		c.r.probes.add("voter.change_failed")
		c.retry()
		return
	}
	c.r.probes.add("voter." + what)
	if c.r.nemesis.faultedNow() {
		c.r.probes.add("voter.change_during_fault")
	}
	c.tries = 0
	c.later(c.pause())
}

// retry steps again after a short pause; in the liveness phase it gives
// up, failing the run, after many tries.
func (c *reconfigurer) retry() {
	c.busy = false
	c.tries++
	if c.live && c.tries >= 100 {
		c.r.fail("liveness: the reconfigurer could not make every original voter %v vote again after healing in %d tries", c.voters, c.tries)
		c.whole = true
		return
	}
	c.later(time.Duration(200+c.rand.Intn(800)) * time.Millisecond)
}

func (c *reconfigurer) pause() time.Duration {
	if c.live {
		return 100 * time.Millisecond
	}
	return time.Duration(c.rand.Uint64n(uint64(2 * reconfigureEvery)))
}

// send sends req to node index i's broker listener (which forwards a
// voter change to the active controller).
func (c *reconfigurer) send(i int, req kmsg.Request, done func(kmsg.Response, error)) {
	addr := c.r.nodes[i].name + ":9092"
	if c.s.addr != addr {
		c.s.addr, c.s.client = addr, nil
	}
	c.s.do(req, metaTimeout, done)
}

// checkQuorumConfigs holds every node's raft configuration, once the
// cluster has converged, to what the run made: the original voters voting
// (a reconfigured quorum made whole again) and the broker-only nodes as
// learners, on every node alike. A node restarted from a snapshot that lost
// part of the configuration would otherwise go unseen while it follows.
func (r *clusterRun) checkQuorumConfigs() {
	var wantVoters, wantLearners []int32
	for _, n := range r.nodes {
		if n.voter {
			wantVoters = append(wantVoters, n.id)
		} else {
			wantLearners = append(wantLearners, n.id)
		}
	}
	for _, n := range r.nodes {
		b := n.broker()
		if b == nil {
			continue
		}
		voters, learners := b.QuorumConfig()
		if !slices.Equal(voters, wantVoters) || !slices.Equal(learners, wantLearners) {
			r.fail("quorum: %s's raft configuration has voters %v and learners %v at the end, want voters %v and learners %v",
				n.name, voters, learners, wantVoters, wantLearners)
		}
	}
}
