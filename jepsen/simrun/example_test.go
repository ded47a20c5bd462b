package simrun_test

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/jepsen/simrun"
	"github.com/sluicemq/sluice/wire"
)

// Run seeds from a test of your own: each is one whole run (safety phase,
// liveness phase, checks), the same every time for the same seed.
func ExampleRun() {
	for seed := uint64(1); seed <= 3; seed++ {
		s := simrun.Run(simrun.Config{Seed: seed, Swarm: true, Duration: 5 * time.Second})
		fmt.Printf("seed %d: %s, %d nodes\n", seed, s.Result(), max(s.Nodes, 1))
		if !s.OK() {
			fmt.Println(s.Details()) // and replay it with sluice sim run --swarm --seed N
		}
	}
	// Output:
	// seed 1: ok, 5 nodes
	// seed 2: ok, 5 nodes
	// seed 3: ok, 4 nodes
}

// A checker of your own reads the finished run, here the clients'
// operations with their virtual times, and fails it with what it finds;
// Findings (and so sim minimize) tell its violations apart by its name.
func ExampleChecker() {
	slowProduce := simrun.Checker{Name: "slow-produce", Check: func(s simrun.Summary) []string {
		invoked := map[int]int64{}
		var slow []string
		for _, e := range s.History {
			switch {
			case e.Kind == jepsen.KindInvoke && e.Type == jepsen.TypeProduce:
				invoked[e.Op] = e.Virtual
			case e.Kind == jepsen.KindOk && e.Type == jepsen.TypeProduce:
				if d := time.Duration(e.Virtual - invoked[e.Op]); d > 2*time.Second {
					slow = append(slow, fmt.Sprintf("op %d took %s", e.Op, d))
				}
			}
		}
		return slow[:min(len(slow), 1)]
	}}
	s := simrun.Run(simrun.Config{Seed: 12, Duration: 5 * time.Second, Checkers: []simrun.Checker{slowProduce}})
	fmt.Println(s.Result(), s.Findings()[0])
	// Output: violation failure/slow-produce
}

// A workload of your own runs beside the run's clients, on a node of the
// simulated world: it speaks the protocol over the world's network
// (wire.Client), records its operations in the run's history, and the
// run checks them with everything else. Here it asks for the latest
// offset of partition 0 every 100 ms.
func ExampleWorkload() {
	var asked, inFlight int
	watcher := simrun.Workload{
		Name: "latest-offsets",
		Idle: func() bool { return inFlight == 0 },
		Start: func(ctx simrun.WorkloadContext) {
			const client = simrun.FirstWorkloadClient
			tp := jepsen.TopicPartition{Topic: ctx.Topic, Partition: 0}
			ctx.World.AddNode("watcher", func(e env.Env) {
				var ask func()
				ask = func() {
					if ctx.Stopping() {
						return
					}
					inFlight++
					id := ctx.History.InvokeListOffsets(client, tp, jepsen.TargetLatest)
					wire.Dial(e.Net, ctx.Brokers[0], "watcher", func(c *wire.Client, err error) {
						if err != nil {
							ctx.History.Fail(id, err) // no connection: nothing was asked
							inFlight--
							e.Clock.AfterFunc(100*time.Millisecond, ask)
							return
						}
						req := kmsg.NewPtrListOffsetsRequest()
						req.Version, req.ReplicaID = 4, -1
						rt := kmsg.NewListOffsetsRequestTopic()
						rt.Topic = tp.Topic
						rp := kmsg.NewListOffsetsRequestTopicPartition()
						rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
						rt.Partitions = append(rt.Partitions, rp)
						req.Topics = append(req.Topics, rt)
						c.Request(req, func(resp kmsg.Response, err error) {
							c.Close()
							switch {
							case err != nil:
								ctx.History.Info(id, err) // asked, answer lost
							case len(resp.(*kmsg.ListOffsetsResponse).Topics) != 1:
								ctx.History.Info(id, fmt.Errorf("an answer without the topic"))
							default:
								p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
								if p.ErrorCode != 0 {
									ctx.History.Fail(id, kerr.ErrorForCode(p.ErrorCode))
								} else {
									ctx.History.ListOffsetsOk(id, p.Offset)
									asked++
								}
							}
							inFlight--
							e.Clock.AfterFunc(100*time.Millisecond, ask)
						})
					})
				}
				ask()
			})
		},
	}
	s := simrun.Run(simrun.Config{Seed: 7, Duration: 5 * time.Second, Workloads: []simrun.Workload{watcher}, Set: []string{"faults=none"}})
	fmt.Println(s.Result(), asked > 20)
	// Output: ok true
}
