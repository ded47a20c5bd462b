package wire

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// recyclingConn is an env.Conn and env.FrameRecycler that records the
// frames handed back to it.
type recyclingConn struct {
	recycled [][]byte
}

func (c *recyclingConn) Write([]byte) error   { return nil }
func (c *recyclingConn) Close() error         { return nil }
func (c *recyclingConn) LocalAddr() string    { return "client:1" }
func (c *recyclingConn) RemoteAddr() string   { return "broker:9092" }
func (c *recyclingConn) Recycle(frame []byte) { c.recycled = append(c.recycled, frame) }

// TestRecyclingClientHandsEachFrameBackAfterItsCallback: a client made by
// DialRecycling borrows every frame and recycles each response's frame
// once its callback has returned (the callback still reads the records in
// place); Dial's client borrows none and recycles none.
func TestRecyclingClientHandsEachFrameBackAfterItsCallback(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		conn := &recyclingConn{}
		c := &Client{conn: conn, clientID: "replica", frames: NewFrameReader(FrameReaderConfig{}), recycle: recycle}
		if c.BorrowsFrame([]byte{0, 0, 0, 1}) != recycle {
			t.Fatalf("recycle=%v: BorrowsFrame says %v", recycle, !recycle)
		}
		records := []byte("the records of one partition")
		var seen string
		req := kmsg.NewPtrFetchRequest()
		req.Version = 18
		c.Request(req, func(resp kmsg.Response, err error) {
			if err != nil {
				t.Fatalf("recycle=%v: %v", recycle, err)
			}
			if len(conn.recycled) != 0 {
				t.Fatalf("recycle=%v: the frame was recycled before its callback ran", recycle)
			}
			seen = string(resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches)
		})
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 18
		rt := kmsg.NewFetchResponseTopic()
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = records
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		c.OnData(AppendResponse(nil, 1, resp))
		if seen != string(records) {
			t.Fatalf("recycle=%v: callback read %q", recycle, seen)
		}
		switch {
		case !recycle && len(conn.recycled) != 0:
			t.Fatalf("Dial's client recycled %d frames", len(conn.recycled))
		case recycle && len(conn.recycled) != 1:
			t.Fatalf("DialRecycling's client recycled %d frames, want 1", len(conn.recycled))
		case recycle && !bytes.Contains(conn.recycled[0], records):
			t.Fatal("the recycled frame is not the response's")
		}
	}
}
