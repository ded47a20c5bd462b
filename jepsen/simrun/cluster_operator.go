package simrun

import (
	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/sim"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// operator is a machine of an aim's own from which it sends admin
// requests, as an operator would (cluster_stale_follower.go,
// cluster_lagging_image.go).
type operator struct {
	sched *aimSchedule
	name  string
	node  *sim.Node
	s     *session // on node's current incarnation; nil while it is down
}

func (n *clusterNemesis) startOperator(name string, sched *aimSchedule) *operator {
	o := &operator{sched: sched, name: name}
	o.node = n.r.w.AddNode(name, o.boot)
	return o
}

// boot makes the operator's session, at first and after a power loss
// (which takes the operator's machine too, and the aim in flight with it).
func (o *operator) boot(e env.Env) {
	o.s = &session{e: e, clientID: o.name, dialTimeout: dialTimeout, probes: &o.sched.n.r.probes}
}

// up says the operator's machine runs.
func (o *operator) up() bool { return o.s != nil && o.node.Up() }

// sendReassignment sends req to a running broker but the one of index
// exclude (-1: none), drawn by the aim's rand, and calls done with the
// partition's error code (-1 if there was no answer).
func (o *operator) sendReassignment(req *kmsg.AlterPartitionAssignmentsRequest, exclude int, done func(int16)) {
	o.send(req, exclude, func(resp kmsg.Response) int16 {
		ar := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		if ar.ErrorCode == 0 && len(ar.Topics) > 0 && len(ar.Topics[0].Partitions) > 0 {
			return ar.Topics[0].Partitions[0].ErrorCode
		}
		return ar.ErrorCode
	}, done)
}

// sendElectPreferred asks for a preferred leader election of one partition
// of the data topic, as sendReassignment sends.
func (o *operator) sendElectPreferred(part int, exclude int, done func(int16)) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType, req.TimeoutMillis = 0, 10000
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = clusterTopic, []int32{int32(part)}
	req.Topics = append(req.Topics, rt)
	o.send(req, exclude, func(resp kmsg.Response) int16 {
		er := resp.(*kmsg.ElectLeadersResponse)
		if er.ErrorCode == 0 && len(er.Topics) > 0 && len(er.Topics[0].Partitions) > 0 {
			return er.Topics[0].Partitions[0].ErrorCode
		}
		return er.ErrorCode
	}, done)
}

// send sends req from the operator's machine to a running broker but the
// one of index exclude, drawn by the aim's rand, and calls done with what
// code reads from the answer, or -1 if there was none.
func (o *operator) send(req kmsg.Request, exclude int, code func(kmsg.Response) int16, done func(int16)) {
	n := o.sched.n
	var up []*clusterNode
	for i, cn := range n.r.nodes {
		if cn.running() && i != exclude {
			up = append(up, cn)
		}
	}
	if len(up) == 0 || !o.up() {
		n.r.w.After(0, o.sched.label, func() { done(-1) })
		return
	}
	s, inc := o.s, o.node.Incarnation()
	s.addr, s.client = up[o.sched.rand.Intn(len(up))].name+":9092", nil
	o.node.Post(func() {
		s.do(req, metaTimeout, func(resp kmsg.Response, err error) {
			if o.node.Incarnation() != inc {
				return // the machine lost power meanwhile; the aim's bound ends it
			}
			if err != nil {
				done(-1)
				return
			}
			done(code(resp))
		})
	})
}
