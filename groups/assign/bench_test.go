package assign

import (
	"fmt"
	"testing"
)

// benchGroup is 100 members subscribed to 10 topics of 100 partitions:
// 1,000 partitions, 10 a member.
func benchGroup(heterogeneous bool) (GroupSpec, TopicCounts) {
	topics := TopicCounts{}
	var ids []TopicID
	for i := range 10 {
		id := topicN(byte(i + 1))
		topics[id] = 100
		ids = append(ids, id)
	}
	var spec GroupSpec
	for i := range 100 {
		subs := ids
		if heterogeneous {
			subs = ids[i%3 : 10-i%4]
		}
		spec.Members = append(spec.Members, Member{ID: fmt.Sprintf("member-%03d", i), Topics: subs})
	}
	return spec, topics
}

// BenchmarkUniformAssign: 100 members over 1,000 partitions, from nothing
// (fresh), from the previous result (steady: a heartbeat's recomputation
// with nothing changed), and with one member replaced (a join and a leave).
func BenchmarkUniformAssign(b *testing.B) {
	for _, heterogeneous := range []bool{false, true} {
		spec, topics := benchGroup(heterogeneous)
		kind := "homogeneous"
		if heterogeneous {
			kind = "heterogeneous"
		}
		fresh, err := Uniform{}.Assign(spec, topics)
		if err != nil {
			b.Fatal(err)
		}
		steady := asCurrent(spec, fresh)
		churn := asCurrent(spec, fresh)
		churn.Members[17].ID, churn.Members[17].Current = "member-new", nil
		for _, c := range []struct {
			name string
			spec GroupSpec
		}{{"fresh", spec}, {"steady", steady}, {"churn", churn}} {
			b.Run(kind+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := (Uniform{}).Assign(c.spec, topics); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkRangeAssign(b *testing.B) {
	spec, topics := benchGroup(false)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Range{}).Assign(spec, topics); err != nil {
			b.Fatal(err)
		}
	}
}
