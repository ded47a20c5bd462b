package node

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// copyPath reconnects the client over a connection without env.FileSender,
// so that Fetch takes its copying path (reading and checking the batches)
// instead of sending file ranges.
func (s *simBroker) copyPath() {
	s.t.Helper()
	s.world.Net().SetSendFile(false)
	s.connect()
}

// newestConnSendsFiles reports whether the broker's newest connection
// implements env.FileSender; the client's must have been accepted.
func (s *simBroker) newestConnSendsFiles() bool {
	ids := make([]uint64, 0, len(s.broker.conns))
	for id := range s.broker.conns {
		ids = append(ids, id)
	}
	_, ok := s.broker.conns[slices.Max(ids)].c.(env.FileSender)
	return ok
}

// Fetch answers the same whether the connection sends the batches as file
// ranges (zero-copy, as in production) or the broker copies them.
func TestFetchSameOverSendFileAndCopy(t *testing.T) {
	answers := map[bool][]kmsg.Response{}
	for _, sendFile := range []bool{true, false} {
		s := newSimBroker(t, 24, func(c *Config) { c.LogSegmentBytes = 2048 })
		if !sendFile {
			s.copyPath()
		}
		s.createTopic("t", 2)
		require.Equal(t, sendFile, s.newestConnSendsFiles(), "the connection does not take the path under test")
		for i := range 30 {
			v := fmt.Sprintf("%0200d", i)
			require.Zero(t, s.produce("t", int32(i%2), -1, valueBatch(wire.NoProducer, 1000+int64(i), v, v+"!")).ErrorCode)
		}
		for _, version := range []int16{4, 11, 12} {
			for _, offset := range []int64{0, 7, 15} {
				req := fetchRequest("t", 0, offset, 0)
				req.Version = version
				p1 := req.Topics[0].Partitions[0]
				p1.Partition, p1.FetchOffset = 1, offset/2
				req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
				answers[sendFile] = append(answers[sendFile], s.do(req))
				// A partition limit below one batch still returns one
				// (KIP-74); a response limit cuts the second partition.
				req.Topics[0].Partitions[0].PartitionMaxBytes = 10
				req.MaxBytes = 1500
				answers[sendFile] = append(answers[sendFile], s.do(req))
			}
		}
		resp := answers[sendFile][0].(*kmsg.FetchResponse)
		recs, err := wire.DecodeBatches(resp.Topics[0].Partitions[0].RecordBatches)
		require.NoError(t, err)
		require.Len(t, recs, 30, "the first fetch of partition 0 over sendFile=%v", sendFile)
	}
	require.Equal(t, answers[false], answers[true])
}
