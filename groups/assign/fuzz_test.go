package assign

import (
	"fmt"
	"testing"
)

// FuzzAssignorsSurviveAnySpec builds a group from arbitrary bytes: member
// ids that may repeat or be empty, subscriptions to topics that may not
// exist, and current assignments of any partitions. Each assignor must
// answer with an error or a valid assignment, never a panic.
func FuzzAssignorsSurviveAnySpec(f *testing.F) {
	f.Add([]byte{3, 2, 5, 1, 0, 1, 2, 3, 4})
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{7, 6, 0, 255, 128, 3, 3, 9, 1, 2, 200, 17, 4, 4, 4, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		topics := TopicCounts{}
		for i := range next() % 5 {
			topics[topicN(byte(i))] = int32(next() % 20)
		}
		var spec GroupSpec
		for range next() % 8 {
			m := Member{ID: fmt.Sprintf("m%d", next()%6)}
			if next()%7 == 0 {
				m.ID = ""
			}
			if next()%3 == 0 {
				m.InstanceID = fmt.Sprintf("i%d", next()%4)
			}
			for range next() % 4 {
				m.Topics = append(m.Topics, topicN(byte(next()%6)))
			}
			for range next() % 3 {
				tp := TopicPartitions{Topic: topicN(byte(next() % 6))}
				for range next() % 5 {
					tp.Partitions = append(tp.Partitions, int32(next()%30)-5)
				}
				m.Current = append(m.Current, tp)
			}
			spec.Members = append(spec.Members, m)
		}
		for _, a := range All() {
			got, err := a.Assign(spec, topics)
			if err != nil {
				continue
			}
			for _, bad := range checkValid(spec, topics, got) {
				t.Errorf("%s: %s", a.Name(), bad)
			}
		}
	})
}
