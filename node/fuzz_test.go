package node

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzBrokerSurvivesAnyRequest sends one arbitrary request frame to a
// simulated broker that has a topic with data, then checks that the broker
// still answers a new connection: no input may panic it or wedge it. The
// seeds are the real client requests wire's fuzzers start from.
func FuzzBrokerSurvivesAnyRequest(f *testing.F) {
	for _, frame := range wireCorpus(f) {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		s := newSimBroker(t, 99, nil)
		s.createTopic("t", 2)
		s.produce("t", 0, -1, valueBatch(wire.NoProducer, 1, "a", "b"))

		raw := make([]byte, 4, 4+len(frame))
		binary.BigEndian.PutUint32(raw, uint32(len(frame)))
		raw = append(raw, frame...)
		c1 := s.world.Node("c1")
		sent := false
		c1.Post(func() {
			c1.Env().Net.Dial("n1:9092", func(c env.Conn, err error) env.ConnHandler {
				if err == nil {
					c.Write(raw)
				}
				sent = true
				return discard{}
			})
		})
		s.world.RunUntil(func() bool { return sent }, time.Minute)
		s.world.Run(time.Minute) // whatever the request parks on times out

		s.connect()
		req := kmsg.NewPtrApiVersionsRequest()
		if resp := s.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions after the fuzzed request: error %d", resp.ErrorCode)
		}
	})
}

type discard struct{}

func (discard) OnData([]byte) {}
func (discard) OnClose(error) {}

// wireCorpus reads the request frames of wire's FuzzParseRequest corpus.
func wireCorpus(f *testing.F) [][]byte {
	dir := filepath.Join("..", "wire", "testdata", "fuzz", "FuzzParseRequest")
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatalf("read wire corpus: %v", err)
	}
	var frames [][]byte
	for _, e := range entries {
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(text)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			f.Fatalf("corpus file %s: %v", e.Name(), err)
		}
		frames = append(frames, []byte(s))
	}
	if len(frames) == 0 {
		f.Fatal("no frames in the wire corpus")
	}
	return frames
}
