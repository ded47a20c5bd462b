package jepsen

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicPartition names one partition's log.
type TopicPartition struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
}

func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

func (tp TopicPartition) less(other TopicPartition) bool {
	if tp.Topic != other.Topic {
		return tp.Topic < other.Topic
	}
	return tp.Partition < other.Partition
}

// Record is one record a fetch returned: the offset where it sits, its
// value, and its timestamp (milliseconds, as the batch carries it; what
// ListOffsets by timestamp is checked against).
type Record struct {
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
	Timestamp int64  `json:"ts,omitempty"`
}

// Watermarks are what a fetch answer says of its partition's bounds: the
// high watermark (the end of what may be read) and the log start offset
// (-1 when the answer did not carry it: fetch before v5).
type Watermarks struct {
	HighWatermark int64 `json:"hw"`
	LogStart      int64 `json:"log_start"`
}

// Kind says what an event is.
type Kind string

const (
	// KindInvoke is a client's call.
	KindInvoke Kind = "invoke"
	// KindOk is a successful answer: the operation took effect.
	KindOk Kind = "ok"
	// KindFail is a definite failure: the operation did not take effect.
	KindFail Kind = "fail"
	// KindInfo is an unknown outcome: the operation may or may not have
	// taken effect, now or later.
	KindInfo Kind = "info"
	// KindNote is an instantaneous fact a client observed about itself (a
	// consumer position, an assignment); it has no invoke.
	KindNote Kind = "note"
)

// Type says what an operation or note is about.
type Type string

const (
	// TypeProduce appends Values to a partition; ok carries the base Offset.
	TypeProduce Type = "produce"
	// TypeFetch reads a partition from From; ok carries the Records.
	TypeFetch Type = "fetch"
	// TypePosition notes a consumer's position in a partition: the offset
	// it will read next.
	TypePosition Type = "position"
	// TypeAssign notes the partitions a consumer was given in one
	// generation of a group.
	TypeAssign Type = "assign"
	// TypeListOffsets asks for one offset of a partition (ListOffsets):
	// Target says which, TargetLatest (the high watermark), TargetEarliest
	// (the log start offset) or a timestamp (the first offset whose record
	// has a timestamp at least Target); ok carries the Offset, -1 when no
	// record has such a timestamp.
	TypeListOffsets Type = "list_offsets"
	// TypeDeleteRecords moves a partition's log start offset up
	// (DeleteRecords): the invoke carries the Offset asked for, below which
	// records are to go (DeleteToHighWatermark: the high watermark); ok
	// carries the low watermark answered, the new log start, as Offset.
	TypeDeleteRecords Type = "delete_records"
)

// The targets of a ListOffsets that are not timestamps, as Kafka encodes
// them.
const (
	TargetLatest   int64 = -1
	TargetEarliest int64 = -2
)

// DeleteToHighWatermark is the offset a DeleteRecords asks for to delete
// every record below the high watermark, as Kafka encodes it.
const DeleteToHighWatermark int64 = -1

// OffsetUnknown is the base offset of an acknowledged produce whose offset
// the broker did not say: Kafka answers a retried idempotent batch that it
// already holds with success and, when it no longer remembers where the
// batch sits, with offset -1.
const OffsetUnknown int64 = -1

// Event is one line of a history. Which fields mean something depends on
// Kind and Type; the rest are zero (and absent from JSON).
type Event struct {
	// Time is the logical timestamp: strictly increasing along a history.
	Time int64 `json:"time"`
	// Virtual is when the event was recorded by the run's own clock, in
	// nanoseconds (History.SetClock; 0 without one): virtual time in the
	// simulator. Only the timeline reads it.
	Virtual int64 `json:"virtual,omitempty"`
	Kind    Kind  `json:"kind"`
	// Op ties an invoke to its completion. Notes carry an op id of their
	// own.
	Op     int  `json:"op"`
	Client int  `json:"client"`
	Type   Type `json:"type"`
	TopicPartition

	// Produce invoke: the values of one batch, in order, and whether the
	// producer was idempotent (then no value may land twice).
	Values     []string `json:"values,omitempty"`
	Idempotent bool     `json:"idempotent,omitempty"`
	// LeaderAck marks a produce sent with acks=1: its acknowledgement says
	// only that the leader appended it, so, as Kafka's contract allows, it
	// may still be lost (a leader that dies before its followers have the
	// records). Its outcome is judged as unknown, except that if its values
	// are read at all, they must be at the offset acknowledged.
	LeaderAck bool `json:"leader_ack,omitempty"`
	// Produce ok: the base offset (values[i] sits at Offset+i), or
	// OffsetUnknown. Position note: the consumer's next offset.
	// DeleteRecords invoke: the offset asked for, records below it to go
	// (DeleteToHighWatermark: below the high watermark); DeleteRecords ok:
	// the low watermark answered, the partition's new log start offset.
	Offset int64 `json:"offset,omitempty"`

	// Fetch invoke: where the read starts, at most how many records the
	// caller accepts (0: no limit), and whether this is the final read of
	// the whole log, made once the cluster is quiet (it starts at the log
	// start offset, 0 unless records were deleted).
	From  int64 `json:"from,omitempty"`
	Max   int   `json:"max,omitempty"`
	Final bool  `json:"final,omitempty"`
	// Epoch is the partition leader epoch an answer is known to come from
	// (nil: unknown, as on a single broker): on a fetch invoke, the
	// CurrentLeaderEpoch the client sent, which the broker checks, so an
	// answer comes from a leader of exactly that epoch; on a produce ok,
	// an epoch the acknowledging leader's cannot exceed. A leader that has
	// not yet learned it was replaced may answer a high watermark below
	// one its successor answered (Kafka's contract allows stale reads);
	// the offsets check holds answers only to those of epochs at most
	// their own.
	Epoch *int32 `json:"epoch,omitempty"`
	// Fetch ok: what the read returned, in order, and the partition's
	// watermarks as the answer gave them (nil if it did not record them).
	Records    []Record    `json:"records,omitempty"`
	Watermarks *Watermarks `json:"watermarks,omitempty"`

	// ListOffsets invoke: what is asked for (see TypeListOffsets).
	Target int64 `json:"target,omitempty"`

	// Fail and info: what went wrong, and the Kafka error code if the
	// broker answered with one (0 for a transport failure).
	Error string `json:"error,omitempty"`
	Code  int16  `json:"code,omitempty"`

	// Assign note: the group, its generation and the partitions this
	// client owns in it.
	Group      string           `json:"group,omitempty"`
	Generation int32            `json:"generation,omitempty"`
	Partitions []TopicPartition `json:"partitions,omitempty"`
}

func (e Event) String() string {
	head := fmt.Sprintf("#%d %s op %d client %d", e.Time, e.Kind, e.Op, e.Client)
	switch {
	case e.Type == TypeAssign:
		return fmt.Sprintf("%s assign group %q generation %d %v", head, e.Group, e.Generation, e.Partitions)
	case e.Type == TypePosition:
		return fmt.Sprintf("%s position %s @%d", head, e.TopicPartition, e.Offset)
	case e.Kind == KindFail || e.Kind == KindInfo:
		return fmt.Sprintf("%s %s %s: %s", head, e.Type, e.TopicPartition, e.Error)
	case e.Type == TypeProduce && e.Kind == KindInvoke:
		return fmt.Sprintf("%s produce %s %s", head, e.TopicPartition, quoteValues(e.Values, 8))
	case e.Type == TypeProduce:
		return fmt.Sprintf("%s produce %s -> offset %d", head, e.TopicPartition, e.Offset)
	case e.Type == TypeFetch && e.Kind == KindInvoke:
		s := fmt.Sprintf("%s fetch %s from %d", head, e.TopicPartition, e.From)
		if e.Max > 0 {
			s += fmt.Sprintf(" max %d", e.Max)
		}
		if e.Final {
			s += " (final read)"
		}
		return s
	case e.Type == TypeFetch:
		s := fmt.Sprintf("%s fetch %s -> %s", head, e.TopicPartition, describeRecords(e.Records, 8))
		if w := e.Watermarks; w != nil {
			s += fmt.Sprintf(" (high watermark %d, log start %d)", w.HighWatermark, w.LogStart)
		}
		return s
	case e.Type == TypeListOffsets && e.Kind == KindInvoke:
		return fmt.Sprintf("%s list offsets %s %s", head, e.TopicPartition, describeTarget(e.Target))
	case e.Type == TypeListOffsets:
		return fmt.Sprintf("%s list offsets %s -> %d", head, e.TopicPartition, e.Offset)
	case e.Type == TypeDeleteRecords && e.Kind == KindInvoke:
		return fmt.Sprintf("%s delete records %s below %s", head, e.TopicPartition, describeDeleteOffset(e.Offset))
	case e.Type == TypeDeleteRecords:
		return fmt.Sprintf("%s delete records %s -> low watermark %d", head, e.TopicPartition, e.Offset)
	}
	return head + " " + string(e.Type)
}

func describeTarget(target int64) string {
	switch target {
	case TargetLatest:
		return "latest"
	case TargetEarliest:
		return "earliest"
	}
	return fmt.Sprintf("timestamp %d", target)
}

func describeDeleteOffset(offset int64) string {
	if offset == DeleteToHighWatermark {
		return "the high watermark"
	}
	return strconv.FormatInt(offset, 10)
}

// OpID names an operation between its invoke and its completion.
type OpID int

// History is a recording of client operations. The zero value is ready to
// use. It is not safe for concurrent use.
//
// Recording methods never fail loudly: a misuse (completing an operation
// twice, completing one that was never invoked, an ok without the result
// its type needs) is remembered, Err returns the first, and Check reports
// it, so that a bug in a client cannot hide behind a passing check.
type History struct {
	events []Event
	clock  int64
	opNext int
	// open maps an invoked, not yet completed operation to its invoke event.
	open map[OpID]int
	err  error
	// now, if set, stamps each event's Virtual (SetClock).
	now func() time.Duration
}

// SetClock has every event recorded from now on stamped with now() as its
// Virtual time: the simulator's virtual clock, or a real run's time since
// its start. The check never reads it (Time orders the history); the
// timeline places events by it.
func (h *History) SetClock(now func() time.Duration) { h.now = now }

// NewHistory returns an empty history.
func NewHistory() *History { return &History{} }

// Events returns the recorded events, in time order. The caller must not
// modify them.
func (h *History) Events() []Event { return h.events }

// Err returns the first misuse of the recording methods, or nil.
func (h *History) Err() error { return h.err }

func (h *History) fail(format string, args ...any) {
	if h.err == nil {
		h.err = fmt.Errorf(format, args...)
	}
}

func (h *History) tick() int64 {
	h.clock++
	return h.clock
}

// stamp gives e its logical time and, with a clock, its virtual time.
func (h *History) stamp(e *Event) {
	e.Time = h.tick()
	if h.now != nil {
		e.Virtual = int64(h.now())
	}
}

func (h *History) invoke(e Event) OpID {
	if h.open == nil {
		h.open = make(map[OpID]int)
	}
	id := OpID(h.opNext)
	h.opNext++
	h.stamp(&e)
	e.Kind = KindInvoke
	e.Op = int(id)
	h.open[id] = len(h.events)
	h.events = append(h.events, e)
	return id
}

// InvokeProduce records a client's call to append values, one batch, to tp.
// A batch is atomic, as Kafka's record batches are: all its values land,
// contiguously (values[i] at base+i), or none does. A client that sends one
// record per operation passes one value. idempotent says whether the
// producer has a producer id and sequence numbers, so that Kafka must not
// store the batch twice.
func (h *History) InvokeProduce(client int, tp TopicPartition, idempotent bool, values ...string) OpID {
	if len(values) == 0 {
		h.fail("produce by client %d to %s has no values", client, tp)
	}
	vs := append([]string(nil), values...)
	return h.invoke(Event{Client: client, Type: TypeProduce, TopicPartition: tp, Values: vs, Idempotent: idempotent})
}

// InvokeProduceLeaderAck is InvokeProduce for a produce sent with acks=1
// (see Event.LeaderAck).
func (h *History) InvokeProduceLeaderAck(client int, tp TopicPartition, idempotent bool, values ...string) OpID {
	id := h.InvokeProduce(client, tp, idempotent, values...)
	h.events[len(h.events)-1].LeaderAck = true
	return id
}

// InvokeFetch records a client's call to read tp from offset from,
// accepting at most max records (0: any number). Kafka's own limits are in
// bytes; max is for a client that caps what it takes in records.
func (h *History) InvokeFetch(client int, tp TopicPartition, from int64, max int) OpID {
	return h.invoke(Event{Client: client, Type: TypeFetch, TopicPartition: tp, From: from, Max: max})
}

// InvokeFetchAtEpoch is InvokeFetch with the CurrentLeaderEpoch the fetch
// carries (see Event.Epoch).
func (h *History) InvokeFetchAtEpoch(client int, tp TopicPartition, from int64, max int, epoch int32) OpID {
	return h.invoke(Event{Client: client, Type: TypeFetch, TopicPartition: tp, From: from, Max: max, Epoch: &epoch})
}

// InvokeFinalRead records the start of the final read of tp: a read of the
// whole log from its log start offset from (0 unless records were deleted;
// a reader learns it from ListOffsets earliest, itself an operation of the
// history), made once every other operation has completed or been given
// up, the faults have stopped and the cluster has converged. Complete it
// with FetchOk and every record of the log from there, however many
// requests it took; a read whose start turns out to be below the log start
// (OFFSET_OUT_OF_RANGE) ends with that error, and another begins.
func (h *History) InvokeFinalRead(client int, tp TopicPartition, from int64) OpID {
	return h.invoke(Event{Client: client, Type: TypeFetch, TopicPartition: tp, From: from, Final: true})
}

// complete closes operation id with e and returns the invoke event.
func (h *History) complete(id OpID, e Event) (Event, bool) {
	at, ok := h.open[id]
	if !ok {
		h.fail("operation %d completed (%s) but is not open: never invoked or already completed", id, e.Kind)
		return Event{}, false
	}
	delete(h.open, id)
	inv := h.events[at]
	h.stamp(&e)
	e.Op = inv.Op
	e.Client = inv.Client
	e.Type = inv.Type
	e.TopicPartition = inv.TopicPartition
	h.events = append(h.events, e)
	return inv, true
}

// ProduceOk records that produce id was acknowledged with base offset
// offset (OffsetUnknown if the broker gave none).
func (h *History) ProduceOk(id OpID, offset int64) {
	h.ok(id, TypeProduce, Event{Offset: offset})
}

// ProduceOkAtEpoch is ProduceOk from a leader whose epoch was at most
// epoch (see Event.Epoch).
func (h *History) ProduceOkAtEpoch(id OpID, offset int64, epoch int32) {
	h.ok(id, TypeProduce, Event{Offset: offset, Epoch: &epoch})
}

// ok closes operation id, which must be of type want, with the result in e.
func (h *History) ok(id OpID, want Type, e Event) {
	e.Kind = KindOk
	inv, ok := h.complete(id, e)
	if ok && inv.Type != want {
		h.fail("operation %d is a %s, completed as a %s", id, inv.Type, want)
	}
}

// FetchOk records the records fetch id returned, in the order returned,
// as a consumer delivers them: Kafka answers with whole batches, which may
// begin before the offset asked for, and those earlier records are dropped
// by the client before they reach here.
func (h *History) FetchOk(id OpID, records []Record) {
	h.ok(id, TypeFetch, Event{Records: append([]Record(nil), records...)})
}

// FetchOkWatermarks is FetchOk with the watermarks the answer reported for
// the partition, which the offsets check compares with what the history
// shows.
func (h *History) FetchOkWatermarks(id OpID, records []Record, w Watermarks) {
	h.ok(id, TypeFetch, Event{Records: append([]Record(nil), records...), Watermarks: &w})
}

// InvokeListOffsets records a client's ListOffsets question about tp:
// TargetLatest, TargetEarliest or a timestamp in milliseconds.
func (h *History) InvokeListOffsets(client int, tp TopicPartition, target int64) OpID {
	return h.invoke(Event{Client: client, Type: TypeListOffsets, TopicPartition: tp, Target: target})
}

// ListOffsetsOk records the offset a ListOffsets answered (-1: no record
// has a timestamp at least the one asked for).
func (h *History) ListOffsetsOk(id OpID, offset int64) {
	h.ok(id, TypeListOffsets, Event{Offset: offset})
}

// InvokeDeleteRecords records a client's DeleteRecords of tp: every record
// below offset is to go, DeleteToHighWatermark meaning below the high
// watermark.
func (h *History) InvokeDeleteRecords(client int, tp TopicPartition, offset int64) OpID {
	return h.invoke(Event{Client: client, Type: TypeDeleteRecords, TopicPartition: tp, Offset: offset})
}

// DeleteRecordsOk records the low watermark a DeleteRecords answered: the
// partition's log start offset once the deletion took effect.
func (h *History) DeleteRecordsOk(id OpID, lowWatermark int64) {
	h.ok(id, TypeDeleteRecords, Event{Offset: lowWatermark})
}

// Fail records that operation id definitely did not take effect.
func (h *History) Fail(id OpID, err error) { h.end(id, KindFail, err) }

// Info records that nobody knows whether operation id took effect.
func (h *History) Info(id OpID, err error) { h.end(id, KindInfo, err) }

// Complete records the error that ended operation id as Classify judges it:
// a definite failure or an unknown outcome. A nil err is a misuse: success
// needs its result (ProduceOk, FetchOk).
func (h *History) Complete(id OpID, err error) {
	if err == nil {
		h.fail("operation %d completed with a nil error; use ProduceOk or FetchOk", id)
		h.end(id, KindInfo, errors.New("completed with a nil error"))
		return
	}
	if Classify(err) == Failed {
		h.end(id, KindFail, err)
		return
	}
	h.end(id, KindInfo, err)
}

func (h *History) end(id OpID, kind Kind, err error) {
	e := Event{Kind: kind}
	if err != nil {
		e.Error = err.Error()
		if ke, ok := errors.AsType[*kerr.Error](err); ok {
			e.Code = ke.Code
		}
	}
	h.complete(id, e)
}

func (h *History) note(e Event) {
	h.stamp(&e)
	e.Kind = KindNote
	e.Op = h.opNext
	h.opNext++
	h.events = append(h.events, e)
}

// Position notes that a consumer's position in tp, the offset it will read
// next, is now offset. Positions of one client in one partition must not go
// backwards, except across an Assigned note for that client, after which a
// consumer resumes from its group's committed offset.
func (h *History) Position(client int, tp TopicPartition, offset int64) {
	h.note(Event{Client: client, Type: TypePosition, TopicPartition: tp, Offset: offset})
}

// Assigned notes that client owns partitions in generation of group (the
// answer of a SyncGroup, or a KIP-848 heartbeat's assignment).
func (h *History) Assigned(client int, group string, generation int32, partitions []TopicPartition) {
	ps := append([]TopicPartition(nil), partitions...)
	h.note(Event{Client: client, Type: TypeAssign, Group: group, Generation: generation, Partitions: ps})
}

// Pending returns the operations invoked and not yet completed, in invoke
// order. Check treats them as info: their outcome is unknown.
func (h *History) Pending() []OpID {
	var ids []OpID
	for _, e := range h.events {
		if e.Kind != KindInvoke {
			continue
		}
		if _, open := h.open[OpID(e.Op)]; open {
			ids = append(ids, OpID(e.Op))
		}
	}
	return ids
}
