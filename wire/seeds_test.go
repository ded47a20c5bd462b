package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// oldClientSeed is a request frame (size removed) written byte by byte as an
// older client sends it, with a check of what it must decode to.
type oldClientSeed struct {
	name  string
	frame []byte
	check func(kmsg.Request) error
}

// header1 writes a v1 request header with kafka-python's client id.
func header1(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	const clientID = "kafka-python-2.0.2"
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	return append(b, clientID...)
}

func metadataTopics(want []string) func(kmsg.Request) error {
	return func(r kmsg.Request) error {
		m, ok := r.(*kmsg.MetadataRequest)
		if !ok {
			return fmt.Errorf("decoded %T, want *kmsg.MetadataRequest", r)
		}
		if (want == nil) != (m.Topics == nil) || len(want) != len(m.Topics) {
			return fmt.Errorf("topics %+v, want %q", m.Topics, want)
		}
		for i, topic := range m.Topics {
			if topic.Topic == nil || *topic.Topic != want[i] {
				return fmt.Errorf("topic %d is %v, want %q", i, topic.Topic, want[i])
			}
		}
		return nil
	}
}

// oldClientSeeds are the requests kafka-python 2.0 opens a connection with:
// ApiVersions v0, then Metadata v0 or v1 depending on the broker it detects.
// In v0 an empty topic list means every topic; v1 says that with null.
func oldClientSeeds() []oldClientSeed {
	oneTopic := []byte{0, 0, 0, 1, 0, 4, 't', 'e', 's', 't'}
	return []oldClientSeed{
		{
			name:  "kafka-python ApiVersions v0",
			frame: header1(18, 0, 1),
			check: func(r kmsg.Request) error {
				if a, ok := r.(*kmsg.ApiVersionsRequest); !ok || a.Version != 0 {
					return fmt.Errorf("decoded %T %+v, want ApiVersions v0", r, r)
				}
				return nil
			},
		},
		{
			name:  "kafka-python Metadata v0, all topics",
			frame: append(header1(3, 0, 2), 0, 0, 0, 0),
			check: metadataTopics([]string{}),
		},
		{
			name:  "kafka-python Metadata v0, one topic",
			frame: append(header1(3, 0, 3), oneTopic...),
			check: metadataTopics([]string{"test"}),
		},
		{
			name:  "kafka-python Metadata v1, all topics",
			frame: append(header1(3, 1, 4), 0xff, 0xff, 0xff, 0xff),
			check: metadataTopics(nil),
		},
		{
			name:  "kafka-python Metadata v1, one topic",
			frame: append(header1(3, 1, 5), oneTopic...),
			check: metadataTopics([]string{"test"}),
		},
	}
}
