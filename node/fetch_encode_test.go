package node

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/log"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
	"github.com/sluicemq/sluice/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// servedVersions returns the versions of API key the broker's dispatch
// table serves.
func servedVersions(t *testing.T, key int16) (lo, hi int16) {
	t.Helper()
	for _, h := range (&Broker{}).apiHandlers() {
		if h.key == key {
			return h.min, h.max
		}
	}
	t.Fatalf("api key %d is not served", key)
	return 0, 0
}

// TestFetchFrameMatchesKmsg checks encodeFetchFrame against kmsg's own
// encoder for every Fetch version served, on random responses whose record
// batches live in a file.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	lo, hi := servedVersions(t, 1)
	require.GreaterOrEqual(t, hi, int16(18), "the dispatch table serves Fetch up to v%d", hi)
	s := sched.New()
	disk := simfs.New(rng.New(1), sched.Direct(s, "n1"))
	f, err := disk.Create("segment")
	require.NoError(t, err)
	content := make([]byte, 1<<16)
	rnd := rand.New(rand.NewPCG(3, 4))
	for i := range content {
		content[i] = byte(rnd.Uint32())
	}
	_, err = f.WriteAt(content, 0)
	require.NoError(t, err)

	fileParts := 0 // chunks above copyMax, sent from their file
	for version := lo; version <= hi; version++ {
		for trial := 0; trial < 20; trial++ {
			copyMax := int64(defaultFetchCopyMax)
			if trial%2 == 1 {
				copyMax = 0 // every chunk from its file
			}
			t.Run(fmt.Sprintf("v%d/%d", version, trial), func(t *testing.T) {
				resp := kmsg.NewPtrFetchResponse()
				resp.Version = version
				resp.ThrottleMillis = rnd.Int32N(100)
				resp.SessionID = rnd.Int32()
				var records [][]log.Records
				for ti := rnd.IntN(3); ti >= 0; ti-- {
					rt := kmsg.NewFetchResponseTopic()
					rt.Topic = fmt.Sprintf("topic-%d", rnd.IntN(1000))
					rt.TopicID = [16]byte{byte(rnd.Uint32()), 1, 2}
					var recs []log.Records
					for pi := rnd.IntN(4); pi >= 0; pi-- {
						rp := kmsg.NewFetchResponseTopicPartition()
						rp.Partition = rnd.Int32N(50)
						rp.ErrorCode = int16(rnd.IntN(2))
						rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = rnd.Int64N(1e9), rnd.Int64N(1e9), rnd.Int64N(1e9)
						if rnd.IntN(2) == 0 {
							rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
						}
						var r log.Records
						for ci := rnd.IntN(3); ci > 0; ci-- {
							pos, size := rnd.Int64N(1<<15), rnd.Int64N(1<<15)
							r.Chunks = append(r.Chunks, log.Chunk{File: f, Position: pos, Size: size})
							r.Size += size
							rp.RecordBatches = append(rp.RecordBatches, content[pos:pos+size]...)
						}
						if rp.RecordBatches == nil {
							rp.RecordBatches = []byte{}
						}
						rt.Partitions = append(rt.Partitions, rp)
						recs = append(recs, r)
					}
					resp.Topics = append(resp.Topics, rt)
					records = append(records, recs)
				}
				want := wire.AppendResponse(nil, 77, resp)
				var got []byte
				for _, part := range encodeFetchFrame(77, resp, records, copyMax) {
					if part.bytes != nil {
						got = append(got, part.bytes...)
						continue
					}
					require.Greater(t, part.chunk.Size, copyMax, "a small chunk is copied in, not sent from its file")
					fileParts++
					got = append(got, content[part.chunk.Position:part.chunk.Position+part.chunk.Size]...)
				}
				require.Equal(t, want, got)
			})
		}
	}
	require.Positive(t, fileParts, "no chunk was large enough to be sent from its file")
}
