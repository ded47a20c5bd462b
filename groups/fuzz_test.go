package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// servedKeys are the APIs a shard serves, with their highest version.
var servedKeys = []struct {
	key int16
	max int16
}{{8, 9}, {9, 9}, {11, 9}, {12, 4}, {13, 5}, {14, 5}, {15, 5}, {16, 5}, {42, 2}, {47, 1}, {68, 1}, {69, 1}}

// FuzzHandle decodes arbitrary bodies as every served request, in every
// version, and hands them to one shard, ticking between: no input panics
// it, and every record it writes decodes.
//
//	go test ./groups -run XXX -fuzz FuzzHandle -fuzztime 30s
func FuzzHandle(f *testing.F) {
	for _, k := range servedKeys {
		req := kmsg.RequestForKey(k.key)
		req.SetVersion(k.max)
		f.Add(byte(len(servedKeys)), byte(k.max), req.AppendTo(nil))
	}
	f.Add(byte(2), byte(3), joinReq(3, "g", "", 10*time.Second, time.Minute).AppendTo(nil))
	f.Add(byte(0), byte(2), commitReq(2, "g", -1, "", "t", 0, 5).AppendTo(nil))
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "g", "m", 1000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	f.Add(byte(10), byte(1), hb.AppendTo(nil))
	f.Fuzz(func(t *testing.T, which, version byte, body []byte) {
		h := newHarness(t, Config{InitialRebalanceDelay: -1})
		h.topics["t"] = 2
		for i := 0; i < 3; i++ {
			k := servedKeys[int(which+byte(i))%len(servedKeys)]
			req := kmsg.RequestForKey(k.key)
			req.SetVersion(int16(version) % (k.max + 1))
			if req.ReadFrom(body) != nil {
				continue
			}
			h.send("fuzz", req, Client{ID: "c"})
			h.ready()
			h.advance(time.Duration(version) * time.Second)
		}
		for _, r := range h.log {
			if _, err := decodeKey(r.Key); err != nil {
				t.Fatalf("wrote an undecodable key: %v", err)
			}
		}
	})
}
