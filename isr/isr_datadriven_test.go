package isr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"
)

// TestTranscripts runs testdata/*.txt: each command steps one replica and
// prints what Ready then holds and the replica's state. go test -rewrite
// regenerates the expected output.
//
// Commands:
//
//	new id=N [lag=10s] [min-isr=1] [end=0] [pos=end] [hw=0] [epoch=-1] [check-truncation]
//	meta leader=N epoch=E pepoch=P replicas=(1,2,3) isr=(1,2,3)
//	local end=O [pos=end] [start=S] [epoch=E]     the replica's own log moved
//	fetch replica=N offset=O                       a follower fetched (leader)
//	advance by=D                                   the clock moves
//	tick
//	alter-done [err=stale|timeout|REASON] [isr=(...) pepoch=P]   the controller's answer
//	                                               (timeout: unknown outcome; REASON: refused)
//	epoch-end epoch=E offset=O [local-epoch=E local-offset=O]
//	fetched hw=H [end=O] [pos=O]                   a fetch response (follower)
//	truncated [epoch=E]                            the truncation asked is done
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &transcript{now: time.Unix(1_000_000, 0)}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	})
}

type transcript struct {
	r     *Replica
	now   time.Time
	local Local
	// pendingTruncate is the last truncation Ready asked for.
	pendingTruncate int64
}

func (h *transcript) run(t *testing.T, td *datadriven.TestData) string {
	if td.Cmd != "new" {
		require.NotNil(t, h.r, "%s: new first", td.Pos)
	}
	m := Message{Now: h.now}
	switch td.Cmd {
	case "new":
		h.newReplica(t, td)
		return h.r.String() + "\n"
	case "meta":
		m.Type, m.Meta = MsgMetadata, scanMeta(t, td)
	case "local":
		h.local.LogEnd = scanInt(t, td, "end", h.local.LogEnd)
		h.local.Position = scanInt(t, td, "pos", h.local.LogEnd)
		h.local.LogStart = scanInt(t, td, "start", h.local.LogStart)
		h.local.LatestEpoch = int32(scanInt(t, td, "epoch", int64(h.local.LatestEpoch)))
		m.Type = MsgLocal
	case "fetch":
		m.Type, m.Replica, m.Offset = MsgFetch, int32(scanInt(t, td, "replica", -1)), scanInt(t, td, "offset", -1)
	case "advance":
		var by string
		td.ScanArgs(t, "by", &by)
		d, err := time.ParseDuration(by)
		require.NoError(t, err)
		h.now = h.now.Add(d)
		return fmt.Sprintf("now +%s\n", d)
	case "tick":
		m.Type = MsgTick
	case "alter-done":
		m.Type = MsgAlterDone
		m.Meta, m.Err = h.alterAnswer(t, td)
	case "epoch-end":
		m.Type, m.Epoch, m.Offset = MsgEpochEnd, int32(scanInt(t, td, "epoch", -1)), scanInt(t, td, "offset", -1)
		m.LocalEpoch, m.LocalOffset = int32(scanInt(t, td, "local-epoch", -1)), scanInt(t, td, "local-offset", -1)
	case "fetched":
		h.local.LogEnd = scanInt(t, td, "end", h.local.LogEnd)
		h.local.Position = scanInt(t, td, "pos", h.local.LogEnd)
		m.Type, m.Offset = MsgFetched, scanInt(t, td, "hw", -1)
	case "truncated":
		require.GreaterOrEqual(t, h.pendingTruncate, int64(0), "%s: no truncation was asked", td.Pos)
		h.local.LogEnd, h.local.Position = h.pendingTruncate, min(h.local.Position, h.pendingTruncate)
		h.local.LatestEpoch = int32(scanInt(t, td, "epoch", int64(h.local.LatestEpoch)))
		h.pendingTruncate = -1
		m.Type = MsgTruncated
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	m.Local = h.local
	h.r.Step(m)
	return h.ready() + h.r.String() + "\n"
}

func (h *transcript) newReplica(t *testing.T, td *datadriven.TestData) {
	cfg := Config{ID: int32(scanInt(t, td, "id", 1)), ReplicaLagTimeMax: 10 * time.Second, MinInSync: int(scanInt(t, td, "min-isr", 1))}
	var lag string
	if td.MaybeScanArgs(t, "lag", &lag) {
		d, err := time.ParseDuration(lag)
		require.NoError(t, err)
		cfg.ReplicaLagTimeMax = d
	}
	cfg.CheckTruncation = td.HasArg("check-truncation")
	end := scanInt(t, td, "end", 0)
	h.local = Local{LogEnd: end, Position: scanInt(t, td, "pos", end), LatestEpoch: int32(scanInt(t, td, "epoch", -1))}
	h.r = New(cfg, h.local, scanInt(t, td, "hw", 0))
	h.pendingTruncate = -1
}

func (h *transcript) alterAnswer(t *testing.T, td *datadriven.TestData) (Metadata, error) {
	var e string
	if td.MaybeScanArgs(t, "err", &e) {
		switch e {
		case "stale":
			return Metadata{}, fmt.Errorf("INVALID_UPDATE_VERSION: %w", ErrStaleEpoch)
		case "timeout":
			return Metadata{}, fmt.Errorf("no answer in time: %w", ErrOutcomeUnknown)
		default:
			return Metadata{}, errors.New(e)
		}
	}
	meta := h.r.Metadata()
	meta.ISR = scanIDs(t, td, "isr")
	meta.PartitionEpoch = int32(scanInt(t, td, "pepoch", int64(meta.PartitionEpoch+1)))
	// The partition as the controller left it: another leader, a newer
	// leader epoch or other replicas when the same change moved it on.
	meta.Leader = int32(scanInt(t, td, "leader", int64(meta.Leader)))
	meta.LeaderEpoch = int32(scanInt(t, td, "epoch", int64(meta.LeaderEpoch)))
	if td.HasArg("replicas") {
		meta.Replicas = scanIDs(t, td, "replicas")
	}
	return meta, nil
}

// ready prints the non-empty parts of Ready, one per line.
func (h *transcript) ready() string {
	rd := h.r.Ready()
	var b strings.Builder
	if rd.HWMoved {
		fmt.Fprintf(&b, "ready: high watermark %d\n", rd.HighWatermark)
	}
	if rd.Alter != nil {
		fmt.Fprintf(&b, "ready: alter isr=%v at epoch %d/%d\n", rd.Alter.ISR, rd.Alter.LeaderEpoch, rd.Alter.PartitionEpoch)
	}
	if rd.Query != nil {
		fmt.Fprintf(&b, "ready: ask leader %d (epoch %d) for the end of epoch %d\n", rd.Query.Leader, rd.Query.CurrentLeaderEpoch, rd.Query.Epoch)
	}
	if rd.TruncateTo >= 0 {
		fmt.Fprintf(&b, "ready: truncate to %d\n", rd.TruncateTo)
		h.pendingTruncate = rd.TruncateTo
	}
	return b.String()
}

func scanMeta(t *testing.T, td *datadriven.TestData) Metadata {
	return Metadata{
		Leader:         int32(scanInt(t, td, "leader", int64(NoLeader))),
		LeaderEpoch:    int32(scanInt(t, td, "epoch", 0)),
		PartitionEpoch: int32(scanInt(t, td, "pepoch", 0)),
		Replicas:       scanIDs(t, td, "replicas"),
		ISR:            scanIDs(t, td, "isr"),
	}
}

func scanInt(t *testing.T, td *datadriven.TestData, key string, def int64) int64 {
	var s string
	if !td.MaybeScanArgs(t, key, &s) {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "%s: %s=%s", td.Pos, key, s)
	return v
}

func scanIDs(t *testing.T, td *datadriven.TestData, key string) []int32 {
	var s string
	if !td.MaybeScanArgs(t, key, &s) {
		return nil
	}
	s = strings.Trim(s, "()")
	var ids []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		v, err := strconv.ParseInt(f, 10, 32)
		require.NoError(t, err, "%s: %s=%s", td.Pos, key, s)
		ids = append(ids, int32(v))
	}
	return ids
}
