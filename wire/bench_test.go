package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceFrame is a Produce v11 request frame carrying one 16 KiB batch to
// each of 6 partitions, as a busy producer sends.
func produceFrame() []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 30000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "bench"
	for p := range int32(6) {
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition, part.Records = p, make([]byte, 16<<10)
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = []kmsg.ProduceRequestTopic{topic}
	return AppendRequest(nil, 1, "bench", req)[4:]
}

func BenchmarkParseRequestProduce(b *testing.B) {
	table := everythingTable(b)
	frame := produceFrame()
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := table.ParseRequest(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendResponseProduce(b *testing.B) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 11
	topic := kmsg.NewProduceResponseTopic()
	topic.Topic = "bench"
	for p := range int32(6) {
		part := kmsg.NewProduceResponseTopicPartition()
		part.Partition, part.BaseOffset = p, 1<<40
		topic.Partitions = append(topic.Partitions, part)
	}
	resp.Topics = []kmsg.ProduceResponseTopic{topic}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendResponse(buf[:0], 1, resp)
	}
}
